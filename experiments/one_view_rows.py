"""Rows that arrive with one view: does each view's output land where the fused rows are?

    PYTHONPATH=. python experiments/one_view_rows.py --datasets handwritten bdgp --data-dir DATA

For each dataset and seed: ``SpecRaGE(n_clusters=k, random_state=seed)`` fitted on every row
(complete views), then k-means ACC over every row of

* ``full``: the embedding of the complete rows;
* ``share``: a seeded ``--share`` (30 %) of the rows given with view v only, the rest complete
  (one entry per view; the rows that keep one view are chosen anew per view);
* ``alone``: every row given with view v only;
* ``ceiling``: scikit-learn's SpectralEmbedding on view v alone (standardized, unit rows, the
  better of 10 and 30 neighbours), k-means on it: what that view's own graph reaches;
* ``unseen_full`` / ``unseen_alone``: the same estimator fitted on a seeded 80 % of the rows only,
  k-means ACC over the other 20 % given complete / with view v only (rows the model never saw).

``expected`` is (1 - share) full + share ceiling. Extra ``--set section.field=value`` settings
(the estimator's ``config_overrides``) compare training forms on the same rows.

Writes experiments/results/one_view_rows.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.manifold import SpectralEmbedding
from sklearn.preprocessing import StandardScaler, normalize

from specrage_jax import SpecRaGE
from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.runs.records import write_json_atomic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsuite import cpu_model

RESULTS = Path(__file__).resolve().parent / "results"
CEILING_NEIGHBOURS = (10, 30)


def one_view_mask(n: int, n_views: int, view: int, rows: np.ndarray) -> np.ndarray:
    """(n, V) bool: every view present, except that ``rows`` keep only ``view``."""
    mask = np.ones((n, n_views), bool)
    mask[rows] = False
    mask[rows, view] = True
    return mask


def view_ceiling(x: np.ndarray, labels: np.ndarray, n_clusters: int, seed: int) -> float:
    """k-means ACC of SpectralEmbedding on one view (standardized, unit rows), best over
    CEILING_NEIGHBOURS."""
    rows = normalize(StandardScaler().fit_transform(np.asarray(x, np.float64)))
    scores = []
    for neighbours in CEILING_NEIGHBOURS:
        embedding = SpectralEmbedding(
            n_components=n_clusters, affinity="nearest_neighbors", n_neighbors=neighbours, random_state=seed
        ).fit_transform(rows)
        scores.append(kmeans_metrics(embedding, labels, n_clusters=n_clusters, seed=seed)["acc"])
    return float(max(scores))


def one_run(name: str, seed: int, share: float, overrides: list[str], data_dir: str | None) -> dict[str, Any]:
    """The fit and every measure of one dataset and seed."""
    data = load_dataset(name, seed=seed, data_dir=data_dir)
    views = [np.asarray(v, np.float32) for v in data.views]
    labels, k, n = data.labels, int(data.n_classes), len(data.labels)
    start = time.perf_counter()
    estimator = SpecRaGE(n_clusters=k, random_state=seed, config_overrides=tuple(overrides)).fit(views)
    fit_seconds = time.perf_counter() - start

    def acc(mask: np.ndarray | None) -> float:
        return kmeans_metrics(estimator.transform(views, mask), labels, n_clusters=k, seed=seed)["acc"]

    full = acc(None)
    unseen = unseen_rows(views, labels, k, seed, overrides)
    rng = np.random.default_rng(seed)
    per_view = []
    for v in range(len(views)):
        rows = rng.choice(n, int(round(share * n)), replace=False)
        ceiling = view_ceiling(views[v], labels, k, seed)
        per_view.append(
            {
                "view": v,
                "share": acc(one_view_mask(n, len(views), v, rows)),
                "alone": acc(one_view_mask(n, len(views), v, np.arange(n))),
                "ceiling": ceiling,
                "expected": (1 - share) * full + share * ceiling,
                "unseen_alone": unseen["alone"][v],
            }
        )
    return {
        "dataset": name,
        "seed": seed,
        "full": full,
        "unseen_full": unseen["full"],
        "views": per_view,
        "fit_seconds": fit_seconds,
    }


def unseen_rows(views: list[np.ndarray], labels: np.ndarray, k: int, seed: int, overrides: list[str]) -> dict[str, Any]:
    """k-means ACC over a seeded 20 % of the rows, the estimator fitted on the other 80 %: the
    rows complete ("full") and with each view only ("alone", one entry per view)."""
    n = len(labels)
    order = np.random.default_rng([seed, 1]).permutation(n)
    fit_rows, test_rows = order[: int(0.8 * n)], order[int(0.8 * n) :]
    estimator = SpecRaGE(n_clusters=k, random_state=seed, config_overrides=tuple(overrides))
    estimator.fit([x[fit_rows] for x in views])
    test = [x[test_rows] for x in views]

    def acc(mask: np.ndarray | None) -> float:
        embedding = estimator.transform(test, mask)
        return kmeans_metrics(embedding, labels[test_rows], n_clusters=k, seed=seed)["acc"]

    alone = [acc(one_view_mask(len(test_rows), len(views), v, np.arange(len(test_rows)))) for v in range(len(views))]
    return {"full": acc(None), "alone": alone}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["handwritten", "bdgp"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--share", type=float, default=0.3)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=str(RESULTS / "one_view_rows.json"))
    args = parser.parse_args(argv)
    runs = []
    for name in args.datasets:
        for seed in args.seeds:
            run = one_run(name, seed, args.share, args.overrides, args.data_dir)
            runs.append(run)
            print(
                f"{name} seed {seed}: full {run['full']:.3f} ({run['fit_seconds']:.0f} s); unseen rows "
                f"{run['unseen_full']:.3f}",
                flush=True,
            )
            for view in run["views"]:
                print(
                    f"  view {view['view']}: {args.share:.0%} one-view {view['share']:.3f} (full - 0.05: "
                    f"{run['full'] - 0.05:.3f}), alone {view['alone']:.3f} (ceiling {view['ceiling']:.3f}); "
                    f"unseen rows alone {view['unseen_alone']:.3f}",
                    flush=True,
                )
    write_json_atomic(
        Path(args.out),
        {"command": " ".join(sys.argv), "overrides": args.overrides, "cpu_model": cpu_model(), "runs": runs},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
