"""The spectra the data-aware rules read: above DENSE_SPECTRUM_MAX_ROWS the sparse path gives the
dense path's eigenvalues, including a zero eigenvalue repeated once per component."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specrage_jax.training.graph_probes import (
    DENSE_SPECTRUM_MAX_ROWS,
    bottom_normalized_spectrum,
    eigengap_score,
    mean_graph,
    present_neighbor_lists,
)


def _blob_graph(n: int, k: int, spread: float, l: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    centres = rng.standard_normal((k, 32)) * spread
    x = centres[labels] + rng.standard_normal((n, 32))
    return mean_graph(present_neighbor_lists([x], np.arange(n), l), n, l)


def _dense_spectrum(w, count: int) -> np.ndarray:
    degrees = np.asarray(w.sum(axis=1)).ravel()
    inv_sqrt = 1.0 / np.sqrt(degrees)
    laplacian = np.eye(w.shape[0]) - inv_sqrt[:, None] * w.toarray() * inv_sqrt[None, :]
    return np.clip(np.linalg.eigvalsh(laplacian)[:count], 0.0, 2.0)


@pytest.mark.parametrize(("spread", "components"), [(3.0, 10), (0.3, 1)])
def test_the_sparse_spectrum_equals_the_dense_one_and_counts_every_component(spread, components):
    """Ten separated blobs: zero ten times (Lanczos alone found six), so a graph in exactly k
    components scores +inf; overlapping blobs: one component, the same eigenvalues as eigvalsh."""
    n, k = DENSE_SPECTRUM_MAX_ROWS + 400, 10
    w = _blob_graph(n, k, spread, l=10)
    sparse = bottom_normalized_spectrum(w, k + 1)
    np.testing.assert_allclose(sparse, _dense_spectrum(w, k + 1), atol=1e-5)
    assert int(np.sum(sparse < 1e-8)) == components
    assert (eigengap_score(sparse, k) == math.inf) is (components == k)


def test_more_components_than_clusters_read_as_fragments_on_the_sparse_path():
    n = DENSE_SPECTRUM_MAX_ROWS + 400
    w = _blob_graph(n, 12, 3.0, l=10)
    assert eigengap_score(bottom_normalized_spectrum(w, 11), 10) == -math.inf
