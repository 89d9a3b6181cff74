"""Grassmann distance between SpecRaGE's embedding and the exact joint eigenvectors of
L-bar = sum_v L^(v) on the validation split, after every epoch (the paper's convergence figure).

    PYTHONPATH=. python experiments/grassmann_curve.py --dataset blobs
    PYTHONPATH=. python experiments/grassmann_curve.py --dataset bdgp --data-dir DATA

Writes experiments/results/grassmann_<dataset>.json (per-epoch squared distance, the untrained
network's as "initial_grassmann_sq", k, the final Y^T L^(v) Y / n) and a PNG beside it (epoch 0 =
untrained). The reference uses the same affinity inputs as training
(Siamese codes when the preset enables them) and at most --max-reference validation rows.

A kNN graph with the training l on the (small) validation set is much denser than the in-batch
graphs training sees (BDGP: l = 100 of 200 validation rows, against 100 of a 1024-row batch), so
its eigenvectors answer a different problem. The script therefore also tracks a density-matched
reference ("density_matched" in the JSON): l and the sigma neighbour scaled by
n_reference / batch size, so each point links to the same fraction of the set as in training.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from specrage_jax.evaluation.monitor import (
    SpectralMonitor,
    density_matched_graph,
    spectral_reference,
)
from specrage_jax.nets.state import create_state
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.plots import figure_script_parser, save_figure
from specrage_jax.runs.prepare import prepare_run
from specrage_jax.runs.records import write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> dict:
    parser = figure_script_parser(__doc__, dataset="blobs")
    parser.add_argument("--max-reference", type=int, default=2000, help="validation rows in the exact reference")
    parser.add_argument("--out", default=None, help="JSON path (default results/grassmann_<dataset>.json)")
    args = parser.parse_args(argv)
    run = prepare_run(args.dataset, seed=args.seed, data_dir=args.data_dir, overrides=args.overrides)
    config, splits, codes = run.config, run.splits, run.codes
    rows = slice(0, min(args.max_reference, len(splits.val_labels)))
    ref_views = [v[rows] for v in splits.val]
    ref_codes = None if codes is None else [c[rows] for c in codes.val]
    k = config.model.n_components
    monitor = SpectralMonitor(spectral_reference(ref_views, config.graph, k, codes=ref_codes))
    batch = min(config.train.batch_size, len(splits.train_labels))
    matched_graph = density_matched_graph(config.graph, rows.stop, batch)
    matched = SpectralMonitor(spectral_reference(ref_views, matched_graph, k, codes=ref_codes))

    def on_epoch_end(state, record) -> None:
        monitor(state, record)
        matched(state, record)

    untrained = create_state(
        [v.shape[1] for v in splits.train],
        config.model,
        config.graph,
        config.ortho,
        learning_rate=config.train.learning_rate,
        seed=args.seed,
        view_scales=np.ones(len(splits.train)),
    )  # train_on_splits' initial parameters
    initial = [float(m.measure(untrained)["grassmann_sq"]) for m in (monitor, matched)]
    train_on_splits(splits, config, seed=args.seed, codes=codes, on_epoch_end=on_epoch_end)
    result = {
        "dataset": args.dataset,
        "seed": args.seed,
        "k": k,
        "overrides": args.overrides,
        "reference_rows": rows.stop,
        "n_neighbors": config.graph.n_neighbors,
        "epochs": [r["epoch"] for r in monitor.records],
        "grassmann_sq": monitor.grassmann_curve(),
        "initial_grassmann_sq": initial[0],
        "final_quadratic_forms": np.asarray(monitor.records[-1]["quadratic_forms"]).tolist(),
        "final_mean_view_weights": np.asarray(monitor.records[-1]["mean_view_weights"]).tolist(),
        "mean_view_weights": [np.asarray(r["mean_view_weights"]).tolist() for r in monitor.records],
        "density_matched": {
            "n_neighbors": matched_graph.n_neighbors,
            "scale_neighbor": matched_graph.sigma_neighbor,
            "grassmann_sq": matched.grassmann_curve(),
            "initial_grassmann_sq": initial[1],
        },
    }
    out = Path(args.out) if args.out else RESULTS / f"grassmann_{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    plot(result, out.with_suffix(".png"))
    curve = result["density_matched"]["grassmann_sq"]
    print(
        f"{args.dataset}: squared Grassmann distance untrained {initial[0]:.3f}, epoch 1 "
        f"{result['grassmann_sq'][0]:.3f} -> {result['grassmann_sq'][-1]:.3f} (l = {config.graph.n_neighbors}); "
        f"density-matched (l = {matched_graph.n_neighbors}) untrained {initial[1]:.3f}, epoch 1 {curve[0]:.3f} -> "
        f"{curve[-1]:.3f} (k = {k}; 0.1 k = {0.1 * k:.2f}); wrote {out}"
    )
    return result


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))

    def with_start(curve: dict | None, values: list[float]) -> tuple[np.ndarray, list[float]]:
        """Epoch 0 = the untrained network, when recorded."""
        epochs = list(np.asarray(result["epochs"]) + 1)
        start = (curve or {}).get("initial_grassmann_sq")
        return (np.asarray([0, *epochs]), [start, *values]) if start is not None else (np.asarray(epochs), values)

    ax.plot(
        *with_start(result, result["grassmann_sq"]), "o-", ms=3, label=f"reference l = {result.get('n_neighbors', '?')}"
    )
    matched = result.get("density_matched")
    if matched:
        ax.plot(
            *with_start(matched, matched["grassmann_sq"]),
            "s-",
            ms=3,
            label=f"density-matched l = {matched['n_neighbors']}",
        )
    ax.axhline(0.1 * result["k"], color="grey", ls=":", label="0.1 k")
    ax.set(
        xlabel="epoch",
        ylabel="squared Grassmann distance",
        ylim=(0, result["k"]),
        title=f"{result['dataset']}: embedding vs exact eigenvectors of L-bar",
    )
    ax.legend()
    save_figure(fig, path)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
