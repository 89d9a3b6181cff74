"""The figure a run writes: the test embedding in 2-D beside the per-sample view weights."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def principal_projection(y: np.ndarray, n_dims: int = 2) -> np.ndarray:
    """Projection of y (n, k) onto its top principal directions: -> (n, n_dims)."""
    centered = y - y.mean(axis=0)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    return centered @ vt[:n_dims].T


def two_d_projection(y: np.ndarray, *, seed: int = 0, max_tsne: int = 5000) -> tuple[np.ndarray, str]:
    """A 2-D view of y (n, k): t-SNE (as the paper's figures) up to ``max_tsne`` samples, PCA above."""
    if y.shape[0] <= max_tsne and y.shape[0] > 5:
        from sklearn.manifold import TSNE

        perplexity = float(min(30.0, (y.shape[0] - 1) / 3.0))
        return TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(y), "t-SNE"
    return principal_projection(y), "PCA"


def plot_embedding(
    y: np.ndarray,
    labels: np.ndarray,
    view_weights: np.ndarray,
    path: str | Path,
    *,
    title: str,
    view_names: Sequence[str] | None = None,
) -> Path:
    """Writes a PNG: left, a 2-D projection of y (n, k) coloured by true class; right, the
    distribution of each view's weight alpha (n, V) over the samples."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    names = list(view_names) if view_names else [f"view {v}" for v in range(view_weights.shape[1])]
    fig, (ax_emb, ax_w) = plt.subplots(1, 2, figsize=(11, 4.6))
    xy, method = two_d_projection(y)
    scatter = ax_emb.scatter(xy[:, 0], xy[:, 1], c=labels, cmap="tab10", s=8, alpha=0.8)
    ax_emb.set(
        title=f"{title}: test embedding ({method} of k={y.shape[1]})", xlabel=f"{method} 1", ylabel=f"{method} 2"
    )
    ax_emb.legend(*scatter.legend_elements(), title="class", fontsize=7, loc="best", markerscale=0.8)
    bins = np.linspace(0.0, 1.0, 41)
    for v, name in enumerate(names):
        ax_w.hist(view_weights[:, v], bins=bins, alpha=0.6, label=f"{name} (mean {view_weights[:, v].mean():.2f})")
    ax_w.set(title="per-sample view weights alpha", xlabel="weight", ylabel="samples")
    ax_w.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save_figure(fig, path: str | Path, *, dpi: int = 120) -> None:
    """Lays out, writes and closes a matplotlib figure (PNG by the path's suffix)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def view_label(view_names: Sequence[str], v: int) -> str:
    """The name of view v, or "view v" when the data set names fewer views."""
    return view_names[v] if v < len(view_names) else f"view {v}"


def figure_script_parser(doc: str | None, *, dataset: str) -> argparse.ArgumentParser:
    """The arguments every figure script under experiments/ shares: --dataset, --seed,
    --data-dir and repeatable --set KEY=VALUE config overrides (dest ``overrides``)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=dataset)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)"
    )
    return parser
