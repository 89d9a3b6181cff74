"""The exact SE-on-L-bar baseline: the sparse (ARPACK) path agrees with the dense one."""

import dataclasses

import numpy as np
import pytest

from specrage_jax.config import GraphConfig
from specrage_jax.ops import spectral as baselines
from specrage_jax.ops.diagnostics import grassmann_distance_sq


def _views(n: int = 400, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=2.5, size=(4, 5))
    labels = rng.integers(0, 4, n)
    return [
        (centres[labels] + rng.normal(size=(n, 5))).astype(np.float32),
        (centres[labels][:, ::-1] + rng.normal(size=(n, 5))).astype(np.float32),
    ]


@pytest.mark.parametrize("symmetrize", ["mean", "max"])
@pytest.mark.parametrize("include_self", [False, True])
def test_sparse_path_matches_dense(monkeypatch, symmetrize, include_self):
    views = _views()
    graph = dataclasses.replace(GraphConfig(), n_neighbors=10, symmetrize=symmetrize, include_self=include_self)
    dense_values, dense_vectors = baselines.mean_laplacian_eigenvectors(views, 4, graph)
    monkeypatch.setattr(baselines, "DENSE_EIGH_MAX_ROWS", 100)
    sparse_values, sparse_vectors = baselines.mean_laplacian_eigenvectors(views, 4, graph)
    np.testing.assert_allclose(sparse_values, dense_values, atol=1e-6, rtol=1e-5)
    assert grassmann_distance_sq(sparse_vectors, dense_vectors) < 1e-6


def test_sparse_affinity_is_symmetric_with_zero_diagonal():
    w = baselines.sparse_knn_affinity(_views()[0], dataclasses.replace(GraphConfig(), n_neighbors=7))
    assert abs(w - w.T).max() < 1e-12
    assert np.all(w.diagonal() == 0)
    assert w.min() >= 0 and w.max() <= 1
