"""Does the weighting net reach the per-sample view weights the loss itself asks for?

    PYTHONPATH=. python experiments/weight_optimum.py --dataset bdgp --kind noise --data-dir DATA
    PYTHONPATH=. python experiments/weight_optimum.py --dataset blobs --kind outliers --data-dir DATA

With the weights in the fusion only (the default, ``graph.weights_in_affinity=false``), sample i's
share of Eq. 1 with every other sample held fixed is d_i ||y_i - y*_i||^2 plus a constant: d_i its
degree summed over the views' graphs, y*_i = sum_v sum_j W^(v)_ij y_j / d_i the mean of its
neighbours' outputs. Its fused output is y_i = sum_v alpha_iv p_iv, p_iv = (view v's net output) R^-1,
so the loss's own best weights for i are the point of the simplex whose combination of the p_iv
lies nearest y*_i. This script fits the default estimator as ``robustness_default.py`` does (the
dataset contaminated before the split, fitted on the 80 % training rows), computes those weights on
the training rows and sets them beside the learned ones, per group of rows (clean, each view
contaminated alone; ``weight_histogram.weight_summary``), with the share of the loss they would
recover and how far apart the views' points lie against their distance to y*.

Writes experiments/results/weight_optimum_<dataset>_<kind>.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from specrage_jax.api.pipeline import model_inputs
from specrage_jax.data import load_dataset
from specrage_jax.data.preprocess import graph_input_views
from specrage_jax.ops.spectral import full_graph_affinities, laplacian_np
from specrage_jax.runs.records import write_json_atomic
from specrage_jax.runs.robustness import KINDS, ContaminationSpec, contaminate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsuite import cpu_model
from weight_histogram import default_estimator_on_split, weight_summary

RESULTS = Path(__file__).resolve().parent / "results"
PROJECTED_STEPS = 500  # projected-gradient steps per sample; the problem is a small convex QP
FUSION_TOLERANCE = 1e-3  # how closely sum_v alpha_v p_v must reproduce the model's fused output


def simplex_projection(v: np.ndarray) -> np.ndarray:
    """Each row of v (m, V) projected onto the probability simplex (Euclidean; sort-based)."""
    u = -np.sort(-v, axis=1)
    cumulative = np.cumsum(u, axis=1) - 1.0
    ranks = np.arange(1, v.shape[1] + 1)
    support = u - cumulative / ranks > 0
    last = v.shape[1] - 1 - np.argmax(support[:, ::-1], axis=1)
    theta = cumulative[np.arange(v.shape[0]), last] / (last + 1)
    return np.maximum(v - theta[:, None], 0.0)


def nearest_combination(points: np.ndarray, targets: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Weights alpha (m, V) on the simplex minimizing ||sum_v alpha_v points[v, i] - targets[i]||^2
    per sample: points (V, m, k), targets (m, k), start (m, V) a feasible first guess. Projected
    gradient with each sample's step 1 / (its Gram matrix's largest eigenvalue)."""
    gram = np.einsum("vik,uik->ivu", points, points)  # (m, V, V)
    linear = np.einsum("vik,ik->iv", points, targets)  # (m, V)
    step = 1.0 / np.maximum(np.linalg.eigvalsh(gram)[:, -1], 1e-12)
    alpha = simplex_projection(np.asarray(start, np.float64))
    for _ in range(PROJECTED_STEPS):
        gradient = np.einsum("ivu,iu->iv", gram, alpha) - linear
        alpha = simplex_projection(alpha - step[:, None] * gradient)
    return alpha


def neighbour_targets(summed: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y* (m, k), degrees d (m,)) of outputs y (m, k) over the views' graphs summed (m, m): y*_i
    the degree-weighted mean of i's neighbours' outputs over every view, d_i its summed degree."""
    degrees = summed.sum(axis=1)
    return summed @ y / np.maximum(degrees, 1e-12)[:, None], degrees


def graph_rows(estimator: Any, views: list[np.ndarray], inputs: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """The rows the fit built its kNN graphs from: the Siamese codes where the nets are on, the
    unreduced preprocessed views where ``data.graph_inputs=unreduced`` and a view was projected,
    else the network's inputs."""
    if estimator.siamese_nets_ is not None:
        return [np.asarray(net.encode(x)) for net, x in zip(estimator.siamese_nets_, inputs)]
    if estimator.config_.data.graph_inputs == "unreduced":
        unreduced = graph_input_views(estimator.scalers_, views)
        if unreduced is not None:
            return [np.asarray(x) for x in unreduced]
    return [np.asarray(x) for x in inputs]


def weight_optimum(estimator: Any, views: list[np.ndarray]) -> dict[str, np.ndarray]:
    """On complete ``views`` (the fit's rows): learned weights, the loss's per-sample optimum,
    each sample's share of the loss at either, and the views' points' spread; (m, V) / (m,) arrays."""
    if estimator.config_.graph.weights_in_affinity or estimator.config_.model.fusion != "weighting":
        raise ValueError("weight_optimum: needs the weighting fusion with the weights in the fusion only")
    m, n_views = views[0].shape[0], len(views)
    inputs, _ = model_inputs(
        views, np.ones((m, n_views), bool), scalers=estimator.scalers_, encoders=estimator.autoencoders_
    )
    state = estimator.state_
    model = state.model()
    jax_inputs = [jnp.asarray(x) for x in inputs]
    outputs = model.present_view_outputs(jax_inputs, None)
    fused, alpha = model.fuse_outputs(jax_inputs, outputs, None)
    r_inv = np.asarray(state.r_inv, np.float64)
    points = np.asarray(outputs, np.float64) @ r_inv  # (V, m, k)
    alpha = np.asarray(alpha, np.float64)
    y = np.asarray(fused, np.float64) @ r_inv
    gap = np.max(np.abs(np.einsum("iv,vik->ik", alpha, points) - y)) / max(np.max(np.abs(y)), 1e-12)
    if gap > FUSION_TOLERANCE:
        raise ValueError(f"weight_optimum: the fused output is not sum_v alpha_v p_v (relative gap {gap:.2e})")
    summed = full_graph_affinities(graph_rows(estimator, views, inputs), estimator.config_.graph).sum(axis=0)
    targets, degrees = neighbour_targets(summed, y)
    best = nearest_combination(points, targets, alpha)

    def share(weights: np.ndarray) -> np.ndarray:
        return degrees * np.sum((np.einsum("iv,vik->ik", weights, points) - targets) ** 2, axis=1)

    spread = np.max(np.linalg.norm(points[:, None] - points[None], axis=-1), axis=(0, 1))
    return {
        "learned": alpha,
        "optimal": best,
        "learned_cost": share(alpha),
        "optimal_cost": share(best),
        "points_spread": spread,
        "distance_to_target": np.linalg.norm(y - targets, axis=1),
        "loss": np.array(np.trace(y.T @ laplacian_np(summed) @ y)),  # 1/2 sum_v sum_ij W_ij ||y_i - y_j||^2
    }


def group_medians(values: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """Median of a per-sample value over the clean rows and over the contaminated ones."""
    clean = ~mask.any(axis=1)
    return {"clean": float(np.median(values[clean])), "contaminated": float(np.median(values[~clean]))}


def summarize(found: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, Any]:
    """Per view, the learned and the optimal weights' group means; the recoverable loss share."""
    strip = ("histogram",)

    def means(weights: np.ndarray) -> list[dict[str, Any]]:
        return [
            {g: {k: v for k, v in entry.items() if k not in strip} for g, entry in view.items() if g != "view"}
            for view in weight_summary(weights, mask)
        ]

    return {
        "learned": means(found["learned"]),
        "optimal": means(found["optimal"]),
        "recoverable_loss_share": float((found["learned_cost"] - found["optimal_cost"]).sum() / found["loss"]),
        "points_spread_median": group_medians(found["points_spread"], mask),
        "distance_to_target_median": group_medians(found["distance_to_target"], mask),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bdgp")
    parser.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    parser.add_argument("--kind", default="noise", choices=KINDS)
    parser.add_argument("--fraction", type=float, default=None, help="share contaminated (blobs 0.2, else 0.4)")
    parser.add_argument("--outlier-view", type=int, default=None, help="the outliers' view (default: every view)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    fraction = args.fraction if args.fraction is not None else (0.2 if args.dataset == "blobs" else 0.4)
    data = load_dataset(args.dataset, seed=args.seed, data_dir=args.data_dir)
    spec = ContaminationSpec(outlier_view=args.outlier_view)
    contaminated, mask = contaminate(data, args.kind, fraction, seed=args.seed, spec=spec)
    estimator, test = default_estimator_on_split(contaminated, list(args.overrides), seed=args.seed)
    train = np.setdiff1d(np.arange(data.n_samples), test)  # the rows the estimator was fitted on
    views = [np.asarray(v, np.float32)[train] for v in contaminated.views]
    summary = summarize(weight_optimum(estimator, views), mask[train])
    for v, (learned, optimal) in enumerate(zip(summary["learned"], summary["optimal"])):
        row = ", ".join(f"{g} {learned[g]['mean']:.3f} / {optimal[g]['mean']:.3f}" for g in learned if learned[g]["n"])
        print(f"view {v} weight, learned / loss optimum: {row}")
    print(
        f"loss share the optimum recovers: {summary['recoverable_loss_share']:.4f}; views' points apart "
        f"(median, clean / contaminated) {summary['points_spread_median']['clean']:.3f} / "
        f"{summary['points_spread_median']['contaminated']:.3f}, fused output from its neighbours' mean "
        f"{summary['distance_to_target_median']['clean']:.3f} / "
        f"{summary['distance_to_target_median']['contaminated']:.3f}"
    )
    result = {
        "dataset": args.dataset,
        "kind": args.kind,
        "fraction": fraction,
        "outlier_view": args.outlier_view,
        "seed": args.seed,
        "overrides": list(args.overrides),
        "rows": "training rows (the 80 % the estimator was fitted on)",
        "cpu": cpu_model(),
        **summary,
    }
    out = Path(args.out) if args.out else RESULTS / f"weight_optimum_{args.dataset}_{args.kind}.json"
    write_json_atomic(out, result)
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
