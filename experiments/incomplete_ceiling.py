"""A supervised reference for the incomplete-data protocol: how much of the drop from complete to
incomplete data is the data's own, measured with the labels.

    PYTHONPATH=. python experiments/incomplete_ceiling.py --datasets bdgp handwritten --data-dir DATA
    PYTHONPATH=. python experiments/incomplete_ceiling.py --datasets noisymnist --fractions 0.5 --max-train 5000

The same samples as ``experiments/incomplete.py`` (the preset's split and preprocessing, the same
seeded views removed). The test samples fall into groups by the views they have; for each group an
RBF SVM (C = 10) is trained with the *labels* of the training rows that have those views (their
preprocessed rows side by side; at most ``--max-train`` of them, a seeded subsample) and predicts
the group's test samples. Per group and overall test ACC, at p = 0 (complete data) and each p.

This is no baseline (it uses labels); it says what is left to learn from a group's views at all.
When even a supervised classifier loses d points from complete to incomplete data, an unsupervised
method that stays within less than d of its own complete-data score loses less than the labels do.

Writes experiments/results/incomplete_<dataset>_supervised.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.svm import SVC

from specrage_jax.data import load_dataset
from specrage_jax.data.incomplete import remove_views_at_random
from specrage_jax.evaluation.metrics import view_group_name, view_groups
from specrage_jax.runs.prepare import PreparedSplits, prepare_splits, preset_config
from specrage_jax.runs.records import environment_info
from specrage_jax.validation import present_views

RESULTS = Path(__file__).resolve().parent / "results"
SVM_C = 10.0


def side_by_side(views: tuple[np.ndarray, ...], rows: np.ndarray, pattern: tuple[bool, ...]) -> np.ndarray:
    """The present views' rows ``rows`` (bool (n,)) concatenated: (n_rows, sum of their dims)."""
    return np.concatenate([np.asarray(x)[rows] for x, has in zip(views, pattern) if has], axis=1)


def supervised_by_group(splits: PreparedSplits, *, max_train: int, seed: int) -> dict[str, Any]:
    """Test ACC of a per-group RBF SVM trained with labels: {'acc': overall, 'groups': {name: {n, acc}}}."""
    train_present, test_present = present_views(splits.train), present_views(splits.test)
    correct = np.zeros(len(splits.test_labels), bool)
    groups: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    for pattern in view_groups(test_present):
        needed = np.asarray(pattern)
        fit_rows = np.flatnonzero(np.all(train_present[:, needed], axis=1))
        if len(fit_rows) > max_train:
            fit_rows = np.sort(rng.choice(fit_rows, max_train, replace=False))
        fit_mask = np.zeros(len(train_present), bool)
        fit_mask[fit_rows] = True
        test_rows = np.all(test_present == needed, axis=1)
        svm = SVC(C=SVM_C).fit(side_by_side(splits.train, fit_mask, pattern), splits.train_labels[fit_mask])
        predicted = svm.predict(side_by_side(splits.test, test_rows, pattern))
        correct[test_rows] = predicted == splits.test_labels[test_rows]
        groups[view_group_name(pattern)] = {
            "n_test": int(test_rows.sum()),
            "n_train": int(fit_mask.sum()),
            "acc": float(correct[test_rows].mean()),
        }
    return {"acc": float(correct.mean()), "groups": groups}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["handwritten", "bdgp"])
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.1, 0.3, 0.5, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--max-train", type=int, default=5000, help="training rows per group at most (SVM cost)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets:
        data = load_dataset(dataset, seed=0, data_dir=args.data_dir)
        config = preset_config(dataset, data.n_classes, [])
        runs = []
        for seed in args.seeds:
            for p in sorted({0.0, *args.fractions}):
                views, _ = remove_views_at_random(data.views, p, seed=seed)  # p 0: every view kept
                splits = prepare_splits(data.with_views(views), config, seed=seed)
                result = supervised_by_group(splits, max_train=args.max_train, seed=seed)
                runs.append({"fraction": p, "seed": seed, **result})
                print(f"{dataset} p={p:.1f} seed {seed}: supervised test ACC {result['acc']:.4f}", flush=True)
        summary = {
            str(p): float(np.mean([r["acc"] for r in runs if r["fraction"] == p]))
            for p in sorted({r["fraction"] for r in runs})
        }
        payload = {
            "dataset": dataset,
            "protocol": __doc__,
            "svm_c": SVM_C,
            "max_train": args.max_train,
            "environment": environment_info(),
            "runs": runs,
            "acc_mean_by_fraction": summary,
        }
        (out / f"incomplete_{dataset}_supervised.json").write_text(json.dumps(payload, indent=1))
        print(dataset, "mean supervised test ACC by p:", {k: round(v, 4) for k, v in summary.items()}, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
