"""How much of each set's kNN graph is decided by ties: distances equal at the l-th neighbour.

Binary or count views (a text view's word sets, a link view, a narrow view of a few discrete
values) give many rows the same distance, so which of the tied rows fill a row's last neighbour
slots is decided by tie-breaking, that is by row order and floating-point rounding. The loss reads
lists computed in the jitted graph in float32 (``ops.neighbors.batch_knn_lists``: the same search
compiled alone gives the same edges; run op by op it does not), which rank rows tied up to float32
rounding by row index (``ops.affinity.tie_keys``); the graph rules read the same lists
(``graph_probes.present_neighbor_lists``), the view-relation test a float64 search whose ties fall
by rounding (``as_trained=False``). On each set at seed 0, at the l and on the graph inputs the
defaults resolve (the training rows the estimator would fit on), this reports per view the share
of rows whose l-th and (l+1)-th neighbours tie, the number of distinct distances in the lists and
the largest share of the jitted lists' edges that move when the view's features are reordered
(three seeded orders: the float32 sums round otherwise, as on another CPU), and over the views
the share of directed edges in the float64 lists that the jitted lists do not hold.

    PYTHONPATH=. python experiments/knn_ties.py --data-dir DATA --out experiments/results/knn_ties.json
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.ops.neighbors import batch_knn_lists
from specrage_jax.training.defaults import FULL_BATCH_MAX
from specrage_jax.training.graph_probes import present_neighbor_lists

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_proxy import load_named, per_set_arguments, resolved_fit
from devsuite import cpu_model

TIE_RTOL = 1e-6  # two squared distances this close (relative) count as a tie


def tie_share(sq_dists: np.ndarray, l: int) -> float:
    """Share of rows whose l-th and (l+1)-th nearest squared distances (sq_dists (m, >= l + 1),
    nearest first) are equal within TIE_RTOL."""
    return float(np.mean(np.isclose(sq_dists[:, l - 1], sq_dists[:, l], rtol=TIE_RTOL, atol=1e-12)))


def edges_not_shared(host_index: np.ndarray, jitted_index: np.ndarray) -> int:
    """Directed edges (i, j) in the host's lists (m, l) that the jitted lists (m, l) lack."""
    return sum(len(set(a.tolist()) - set(b.tolist())) for a, b in zip(host_index, jitted_index))


FEATURE_ORDERS = 3


def edges_moved_by_feature_order(x: np.ndarray, reference: np.ndarray, seed: int) -> float:
    """The largest share over FEATURE_ORDERS seeded column orders of the jitted lists' directed
    edges (``reference`` (m, l), the lists of x (m, d)) that the lists of the reordered columns lack."""
    l = reference.shape[1]
    rng = np.random.default_rng(seed)
    moved = [
        edges_not_shared(reference, batch_knn_lists(x[:, rng.permutation(x.shape[1])], l)[1])
        for _ in range(FEATURE_ORDERS)
    ]
    return max(moved) / reference.size


def set_ties(name: str, data_dir: str, seed: int) -> dict[str, Any] | None:
    """Per view tie share and distinct distances, and the share of edges the two lists differ
    in, for one set at its resolved l; None for a training set larger than one batch."""
    data, paper = load_named(name, data_dir, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a view left out is not what this measures
        fit = resolved_fit(data, paper, seed)
    m = len(fit.labels)
    if m > FULL_BATCH_MAX:
        return None
    l = fit.config.graph.n_neighbors
    unreduced = fit.unreduced is not None and fit.config.data.graph_inputs == "unreduced"
    views = fit.unreduced if unreduced else fit.scaled.train
    host = present_neighbor_lists(views, np.arange(m), l + 1, distinct=True, as_trained=False)
    per_view, differ, total = [], 0, 0
    for (present, sq_dists, index), x in zip(host, views):
        entry = {"tie_share": tie_share(sq_dists, l), "distinct_distances": int(len(np.unique(sq_dists[:, :l])))}
        if len(present) == m:  # complete views: the jitted lists of the same rows
            jitted_index = batch_knn_lists(x, l, distinct=True)[1]
            differ += edges_not_shared(index[:, :l], jitted_index)
            total += m * l
            entry["moved_by_feature_order"] = edges_moved_by_feature_order(x, jitted_index, seed)
        per_view.append(entry)
    return {"rows": m, "l": l, "views": per_view, "edges_not_shared": differ / total if total else None}


def main() -> None:
    args = per_set_arguments(__doc__.splitlines()[0])
    results = {}
    for name in args.datasets:
        entry = set_ties(name, args.data_dir, args.seed)
        if entry is None:
            continue
        results[name] = entry
        ties = " ".join(f"{v['tie_share']:.2f}" for v in entry["views"])
        moved = " ".join(f"{v.get('moved_by_feature_order', float('nan')):.3f}" for v in entry["views"])
        print(
            f"{name:38s} rows {entry['rows']:5d} l {entry['l']:3d} ties {ties:24s} "
            f"edges {entry['edges_not_shared']} moved by a feature order {moved}"
        )
    payload = {"cpu": cpu_model(), "seed": args.seed, "tie_rtol": TIE_RTOL, "sets": results}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
