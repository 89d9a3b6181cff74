"""Grassmann distance between SpecRaGE's embedding and the exact joint eigenvectors of
L-bar = sum_v L^(v) on the validation split, after every epoch (the paper's convergence figure).

    PYTHONPATH=. python experiments/grassmann_curve.py --dataset blobs
    PYTHONPATH=. python experiments/grassmann_curve.py --dataset bdgp --data-dir ../shared/datasets

Writes experiments/results/grassmann_<dataset>.json (per-epoch squared distance, k, the final
Y^T L^(v) Y / n) and a PNG beside it. The reference uses the same affinity inputs as training
(Siamese codes when the preset enables them) and at most --max-reference validation rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from specrage_jax.config import apply_overrides, preset
from specrage_jax.data import load_dataset
from specrage_jax.experiment import prepare_splits, pretrain, train_on_splits, with_n_components, write_json_atomic
from specrage_jax.monitor import SpectralMonitor, spectral_reference

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="blobs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--max-reference", type=int, default=2000, help="validation rows in the exact reference")
    parser.add_argument("--out", default=None, help="JSON path (default results/grassmann_<dataset>.json)")
    args = parser.parse_args(argv)
    data = load_dataset(args.dataset, seed=args.seed, data_dir=args.data_dir)
    config = with_n_components(apply_overrides(preset(args.dataset), ["train.progress=false", *args.overrides]),
                               data.n_classes)
    splits = prepare_splits(data, config, seed=args.seed)
    splits, codes, _ = pretrain(splits, config, seed=args.seed)
    rows = slice(0, min(args.max_reference, len(splits.val_labels)))
    reference = spectral_reference([v[rows] for v in splits.val], config.graph, config.model.n_components,
                                   codes=None if codes is None else [c[rows] for c in codes.val])
    monitor = SpectralMonitor(reference)
    train_on_splits(splits, config, seed=args.seed, codes=codes, on_epoch_end=monitor)
    k = config.model.n_components
    result = {
        "dataset": args.dataset, "seed": args.seed, "k": k, "overrides": args.overrides,
        "reference_rows": rows.stop, "epochs": [r["epoch"] for r in monitor.records],
        "grassmann_sq": monitor.grassmann_curve(),
        "final_quadratic_forms": np.asarray(monitor.records[-1]["quadratic_forms"]).tolist(),
        "final_mean_view_weights": np.asarray(monitor.records[-1]["mean_view_weights"]).tolist(),
    }
    out = Path(args.out) if args.out else RESULTS / f"grassmann_{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    plot(result, out.with_suffix(".png"))
    print(f"{args.dataset}: squared Grassmann distance {result['grassmann_sq'][0]:.3f} -> "
          f"{result['grassmann_sq'][-1]:.3f} (k = {k}; 0.1 k = {0.1 * k:.2f}); wrote {out}")
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(np.asarray(result["epochs"]) + 1, result["grassmann_sq"], "o-", ms=3)
    ax.axhline(0.1 * result["k"], color="grey", ls=":", label="0.1 k")
    ax.set(xlabel="epoch", ylabel="squared Grassmann distance", ylim=(0, result["k"]),
           title=f"{result['dataset']}: embedding vs exact eigenvectors of L-bar")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
