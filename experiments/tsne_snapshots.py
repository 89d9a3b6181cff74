"""t-SNE snapshots of the validation embedding during training (the paper's t-SNE figures, at
chosen epochs): how the clusters form.

    PYTHONPATH=. python experiments/tsne_snapshots.py --dataset bdgp --data-dir DATA
    PYTHONPATH=. python experiments/tsne_snapshots.py --dataset blobs --epochs 1,5,20,60

After each epoch listed in --epochs (1-based: "after epoch N"), the validation rows are embedded
with the current state; after training each snapshot gets a 2-D t-SNE (sklearn, through
specrage_jax.runs.plots.two_d_projection; PCA above its size limit) and a k-means ACC on the
validation labels. Writes experiments/results/tsne_<dataset>.json (epochs, ACCs, 2-D
coordinates, labels) and a PNG grid beside it. Epochs past the end of training (early stop) are
skipped and listed in "missed_epochs".
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.runs.evaluate import split_clusters
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.plots import figure_script_parser, save_figure, two_d_projection
from specrage_jax.runs.prepare import prepare_run
from specrage_jax.runs.records import write_json_atomic

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class EmbeddingSnapshots:
    """An ``on_epoch_end`` callback keeping the embedding (n, k) of ``views`` after the listed
    epochs (1-based). ``snapshots`` maps epoch -> (n, k) array."""

    views: tuple[np.ndarray, ...]
    epochs: frozenset[int]
    snapshots: dict[int, np.ndarray] = field(default_factory=dict)

    def __call__(self, state: SpecRaGEState, record: Any) -> None:
        epoch = int(record.epoch) + 1
        if epoch in self.epochs:
            self.snapshots[epoch] = np.array(embed(state, self.views)[0])


def parse_epochs(text: str) -> list[int]:
    """'1,5,20' -> [1, 5, 20] (sorted, unique, each >= 1)."""
    epochs = sorted({int(e) for e in text.split(",") if e.strip()})
    if not epochs or epochs[0] < 1:
        raise ValueError(f"--epochs needs 1-based epoch numbers, got {text!r}")
    return epochs


def snapshot_report(
    snapshots: dict[int, np.ndarray], labels: np.ndarray, *, seed: int, n_clusters: int
) -> list[dict[str, Any]]:
    """Per snapshot (ascending epoch): the 2-D projection, its method and the k-means ACC of the
    embedding itself (not of the projection)."""
    out = []
    for epoch in sorted(snapshots):
        y = snapshots[epoch]
        xy, method = two_d_projection(y, seed=seed)
        acc = kmeans_metrics(y, labels, n_clusters=n_clusters, seed=seed)["acc"]
        out.append(
            {
                "epoch": epoch,
                "method": method,
                "kmeans_acc": float(acc),
                "xy": np.round(np.asarray(xy, np.float64), 4).tolist(),
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    parser = figure_script_parser(__doc__, dataset="bdgp")
    parser.add_argument("--epochs", default="1,3,10,60", help="1-based epochs to snapshot, comma-separated")
    parser.add_argument("--out", default=None, help="JSON path (default results/tsne_<dataset>.json)")
    args = parser.parse_args(argv)
    wanted = parse_epochs(args.epochs)
    run = prepare_run(args.dataset, seed=args.seed, data_dir=args.data_dir, overrides=args.overrides)
    config, splits, codes = run.config, run.splits, run.codes
    callback = EmbeddingSnapshots(views=tuple(splits.val), epochs=frozenset(wanted))
    _, history = train_on_splits(splits, config, seed=args.seed, codes=codes, on_epoch_end=callback)
    snapshots = snapshot_report(
        callback.snapshots, splits.val_labels, seed=args.seed, n_clusters=split_clusters(splits)
    )
    result = {
        "dataset": args.dataset,
        "seed": args.seed,
        "overrides": args.overrides,
        "epochs_trained": len(history.epochs),
        "epochs": [s["epoch"] for s in snapshots],
        "missed_epochs": [e for e in wanted if e not in callback.snapshots],
        "val_rows": int(len(splits.val_labels)),
        "labels": splits.val_labels.astype(int).tolist(),
        "snapshots": snapshots,
    }
    out = Path(args.out) if args.out else RESULTS / f"tsne_{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    plot(result, out.with_suffix(".png"))
    print(", ".join(f"epoch {s['epoch']}: val ACC {s['kmeans_acc']:.3f}" for s in snapshots) + f"; wrote {out}")
    return result


def plot(result: dict, path: Path) -> None:
    """One panel per snapshot, points coloured by true class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    snaps = result["snapshots"]
    fig, axes = plt.subplots(1, max(len(snaps), 1), figsize=(3.6 * max(len(snaps), 1), 3.6), squeeze=False)
    labels = np.asarray(result["labels"])
    for ax, snap in zip(axes[0], snaps):
        xy = np.asarray(snap["xy"])
        ax.scatter(xy[:, 0], xy[:, 1], c=labels, cmap="tab10", s=6, alpha=0.8)
        ax.set_title(f"epoch {snap['epoch']} ({snap['method']}), val ACC {snap['kmeans_acc']:.2f}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{result['dataset']}: validation embedding during training", fontsize=10)
    save_figure(fig, path)


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
