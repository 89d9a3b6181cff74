"""Training diagnostics against the exact solution on a fixed (validation) set: after every
epoch, the squared Grassmann distance between the embedding and the bottom-k eigenvectors of
L-bar = sum_v L^(v), and the matrices Y^T L^(v) Y per view (near-diagonal when the embedding
jointly diagonalizes the views' Laplacians). Pass a :class:`SpectralMonitor` as
``train.fit(..., on_epoch_end=monitor)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specrage_jax.config import GraphConfig
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.ops.diagnostics import (
    grassmann_distance_sq,
    laplacian_quadratic_forms,
)
from specrage_jax.ops.spectral import full_graph_affinities, laplacian_np
from specrage_jax.validation import as_view_arrays


@dataclass(frozen=True)
class SpectralReference:
    """The exact problem on a fixed set of n samples.

    views: the model's inputs, V arrays (n, d_v); laplacians: (V, n, n) L^(v) of the affinity
    inputs (raw views or Siamese codes); eigenvalues (k,) and eigenvectors (n, k) of their sum.
    """

    views: tuple[np.ndarray, ...]
    laplacians: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray


def density_matched_graph(graph: GraphConfig, n_reference: int, batch_size: int) -> GraphConfig:
    """``graph`` with l and the sigma neighbour scaled by n_reference / batch_size (each at least 1,
    at most n_reference - 1), so each reference point links to the same fraction of the set as a
    point of a training batch does.

    A kNN graph with the training l on a small reference set is far denser than the in-batch graphs
    (BDGP: l = 100 of 200 validation rows, against 100 of a 1024-row batch); its eigenvectors answer
    a different problem than the one training approximates.
    """
    ratio = n_reference / max(batch_size, 1)

    def scaled(count: int) -> int:
        return int(min(max(round(count * ratio), 1), max(n_reference - 1, 1)))

    l_ref = scaled(graph.n_neighbors)
    return dataclasses.replace(graph, n_neighbors=l_ref, scale_neighbor=min(scaled(graph.sigma_neighbor), l_ref))


def spectral_reference(
    views: Sequence[np.ndarray], graph: GraphConfig, n_components: int, codes: Sequence[np.ndarray] | None = None
) -> SpectralReference:
    """Exact bottom-``n_components`` eigenvectors of L-bar on these samples (dense eigh: keep n
    to a few thousand). ``codes`` are the affinity inputs when they differ from ``views``."""
    views = as_view_arrays(views, what="monitor views")
    codes = views if codes is None else as_view_arrays(codes, what="monitor codes")
    laplacians = np.stack([laplacian_np(w) for w in full_graph_affinities(codes, graph)])
    values, vectors = np.linalg.eigh(laplacians.sum(axis=0))
    return SpectralReference(
        views=views, laplacians=laplacians, eigenvalues=values[:n_components], eigenvectors=vectors[:, :n_components]
    )


@dataclass
class SpectralMonitor:
    """An ``on_epoch_end`` callback recording, per epoch, ``grassmann_sq`` (in [0, k]) and
    ``quadratic_forms`` (V, k, k) = Y^T L^(v) Y / n of the embedding of the reference set."""

    reference: SpectralReference
    records: list[dict[str, Any]] = field(default_factory=list)

    def measure(self, state: SpecRaGEState) -> dict[str, Any]:
        y, alpha = embed(state, self.reference.views)
        n = y.shape[0]
        return {
            "grassmann_sq": grassmann_distance_sq(y, self.reference.eigenvectors),
            "quadratic_forms": laplacian_quadratic_forms(y.astype(np.float64) / np.sqrt(n), self.reference.laplacians),
            "mean_view_weights": alpha.mean(axis=0),
        }

    def __call__(self, state: SpecRaGEState, record: Any) -> None:
        self.records.append({"epoch": int(record.epoch), **self.measure(state)})

    def grassmann_curve(self) -> list[float]:
        return [r["grassmann_sq"] for r in self.records]
