"""Approximate joint diagonalization (the paper's Y^T L^(v) Y heatmaps): after training, for each
view, the k x k matrix Y^T L^(v) Y / n of the embedding Y of the validation rows.

    PYTHONPATH=. python experiments/view_forms.py --dataset bdgp --data-dir DATA

L^(v) is the kNN Gaussian Laplacian of view v's affinity inputs (Siamese codes when the preset
enables them) on at most --max-reference validation rows, as in experiments/grassmann_curve.py,
with the density-matched l by default (monitor.density_matched_graph: l scaled by
n_reference / batch size, as dense as a training batch's graph); --reference-graph train keeps l.
Two bases of the learned subspace are shown: the network's own columns (Y / sqrt(n)), and the
Rayleigh-Ritz basis Z of the same subspace (Z^T L-bar Z diagonal; see ops.diagnostics.ritz_basis).
The loss is blind to rotations within the subspace, so only the second says whether the subspace
jointly diagonalizes the views; the exact bottom-k eigenvectors of L-bar give the floor (their
per-view off-diagonal part is the views' non-commutativity). Writes
experiments/results/view_forms_<dataset>.json (matrices, off-diagonal ratios
||M - diag M||_F / ||M||_F) and a PNG of heatmaps beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.evaluation.monitor import density_matched_graph, spectral_reference
from specrage_jax.nets.embed import embed
from specrage_jax.ops.diagnostics import (
    grassmann_distance_sq,
    laplacian_quadratic_forms,
    off_diagonal_ratio,
    ritz_basis,
)
from specrage_jax.runs.evaluate import evaluate_state
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.plots import figure_script_parser, save_figure, view_label
from specrage_jax.runs.prepare import prepare_run
from specrage_jax.runs.records import write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results"
BASES = ("network", "ritz", "exact")


def quadratic_form_report(y: np.ndarray, laplacians: np.ndarray, eigenvectors: np.ndarray) -> dict[str, Any]:
    """Y^T L^(v) Y in the three bases (network columns / sqrt(n), Ritz, exact eigenvectors of
    L-bar) with their off-diagonal ratios. y (n, k), laplacians (V, n, n), eigenvectors (n, k)."""
    n = y.shape[0]
    bases = {
        "network": np.asarray(y, np.float64) / np.sqrt(n),
        "ritz": ritz_basis(y, laplacians.sum(axis=0)),
        "exact": np.asarray(eigenvectors, np.float64),
    }
    report: dict[str, Any] = {}
    for name, basis in bases.items():
        forms = laplacian_quadratic_forms(basis, laplacians)
        report[name] = {"forms": forms.tolist(), "off_diagonal_ratio": [off_diagonal_ratio(f) for f in forms]}
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = figure_script_parser(__doc__, dataset="bdgp")
    parser.add_argument("--max-reference", type=int, default=2000, help="validation rows in the reference")
    parser.add_argument(
        "--reference-graph",
        choices=("matched", "train"),
        default="matched",
        help="matched: l scaled to the reference size (default); train: the training l",
    )
    parser.add_argument("--out", default=None, help="JSON path (default results/view_forms_<dataset>.json)")
    args = parser.parse_args(argv)
    run = prepare_run(args.dataset, seed=args.seed, data_dir=args.data_dir, overrides=args.overrides)
    config, splits, codes = run.config, run.splits, run.codes
    state, history = train_on_splits(splits, config, seed=args.seed, codes=codes)
    rows = slice(0, min(args.max_reference, len(splits.val_labels)))
    graph = config.graph
    if args.reference_graph == "matched":
        graph = density_matched_graph(graph, rows.stop, min(config.train.batch_size, len(splits.train_labels)))
    reference = spectral_reference(
        [v[rows] for v in splits.val],
        graph,
        config.model.n_components,
        codes=None if codes is None else [c[rows] for c in codes.val],
    )
    y, alpha = embed(state, reference.views)
    metrics = evaluate_state(state, splits, config, seed=args.seed).metrics
    result = {
        "dataset": args.dataset,
        "seed": args.seed,
        "k": config.model.n_components,
        "overrides": args.overrides,
        "reference_rows": rows.stop,
        "reference_n_neighbors": graph.n_neighbors,
        "reference_scale_neighbor": graph.sigma_neighbor,
        "epochs": len(history.epochs),
        "view_names": list(run.data.view_names),
        "grassmann_sq": grassmann_distance_sq(y, reference.eigenvectors),
        "mean_view_weights": np.asarray(alpha).mean(axis=0).tolist(),
        "test_kmeans_acc": metrics["kmeans"]["acc"],
        **quadratic_form_report(np.asarray(y), reference.laplacians, reference.eigenvectors),
    }
    out = Path(args.out) if args.out else RESULTS / f"view_forms_{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    plot(result, out.with_suffix(".png"))
    for name in BASES:
        ratios = ", ".join(f"{r:.3f}" for r in result[name]["off_diagonal_ratio"])
        print(f"{name:8s} basis: off-diagonal ratio per view {ratios}")
    print(f"squared Grassmann distance {result['grassmann_sq']:.3f} (k = {result['k']}); wrote {out}")
    return result


def plot(result: dict, path: Path) -> None:
    """Heatmaps: one row per view, one column per basis (network, Ritz); shared colour scale per view."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = ("network", "ritz")
    titles = {"network": "network basis Y/sqrt(n)", "ritz": "Ritz basis of span Y"}
    n_views = len(result[shown[0]]["forms"])
    fig, axes = plt.subplots(n_views, len(shown), figsize=(4.2 * len(shown), 3.6 * n_views), squeeze=False)
    for v in range(n_views):
        scale = max(np.abs(np.asarray(result[b]["forms"][v])).max() for b in shown)
        for col, basis in enumerate(shown):
            ax = axes[v, col]
            image = ax.imshow(np.asarray(result[basis]["forms"][v]), cmap="RdBu_r", vmin=-scale, vmax=scale)
            name = view_label(result["view_names"], v)
            ax.set_title(
                f"{name}: {titles[basis]}\noff-diag ratio {result[basis]['off_diagonal_ratio'][v]:.2f}", fontsize=9
            )
            ax.set_xticks(range(result["k"]))
            ax.set_yticks(range(result["k"]))
            fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle(
        f"{result['dataset']}: Y^T L^(v) Y on {result['reference_rows']} validation rows "
        f"(l = {result['reference_n_neighbors']})",
        fontsize=10,
    )
    save_figure(fig, path)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
