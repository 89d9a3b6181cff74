"""The exact (transductive) solution SpecRaGE approximates: bottom-k eigenvectors of the
summed kNN Gaussian Laplacian of a whole sample set, with the same graph settings."""

from __future__ import annotations

from typing import Sequence

import jax.numpy as jnp
import numpy as np

from specrage_jax.config import GraphConfig
from specrage_jax.ops.affinity import knn_gaussian_affinity


def full_graph_affinities(codes: Sequence[np.ndarray], graph: GraphConfig) -> np.ndarray:
    """W^(v) of the whole set (no batching), sigma from the set itself: -> (V, n, n) float64."""
    affinities = []
    for x in codes:
        w = knn_gaussian_affinity(jnp.asarray(x, jnp.float32), graph.n_neighbors, None,
                                  scale_neighbor=graph.sigma_neighbor, bandwidth_factor=graph.bandwidth_factor,
                                  include_self=graph.include_self, symmetrize_how=graph.symmetrize)
        affinities.append(np.asarray(w, np.float64))
    return np.stack(affinities)


def mean_laplacian_eigenvectors(codes: Sequence[np.ndarray], n_components: int, graph: GraphConfig) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues (k,), eigenvectors (n, k)) of L-bar = sum_v L^(v), smallest first (NumPy eigh).

    The sum and the mean of the Laplacians share eigenvectors; this is Eq. 3's exact minimizer
    under Y^T Y = I on the given set.
    """
    l_bar = sum(laplacian_np(w) for w in full_graph_affinities(codes, graph))
    values, vectors = np.linalg.eigh(l_bar)
    return values[:n_components], vectors[:, :n_components]


def laplacian_np(w: np.ndarray) -> np.ndarray:
    """L = D - W in float64 NumPy. w: (n, n) -> (n, n)."""
    return np.diag(w.sum(axis=1)) - w
