"""A complete batch's graphs as directed kNN edge lists (``ops.objective.knn_edge_graph``): Eq. 4
and its gradient equal the dense graphs' wherever ``reads_as_edges`` holds, and the training
step takes the edge lists exactly there."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.ops.affinity import knn_gaussian_neighbors
from specrage_jax.ops.objective import (
    EdgeGraph,
    batch_affinities,
    batch_graph,
    knn_edge_graph,
    reads_as_edges,
    spectral_objective,
)
from tests.fixed_sections import fixed_graph

M = 120


@pytest.fixture(scope="module")
def batch() -> tuple[list[jax.Array], jax.Array, jax.Array, jax.Array]:
    """(codes of two views (one with an exact copy), output y (M, 4), weights alpha (M, 2), scales)."""
    rng = np.random.default_rng(0)
    first = rng.standard_normal((M, 5)).astype(np.float32)
    first[5] = first[7]
    codes = [jnp.asarray(first), jnp.asarray(rng.standard_normal((M, 3)).astype(np.float32))]
    y = jnp.asarray(rng.standard_normal((M, 4)).astype(np.float32))
    alpha = jax.nn.softmax(jnp.asarray(rng.standard_normal((M, 2)).astype(np.float32)))
    return codes, y, alpha, jnp.asarray([1.3, 0.7])


SETTINGS = list(itertools.product(("mean", "none"), (True, False), (True, False), (True, False), ("batch", "global")))


NAMES = ("symmetrize", "weights_in_affinity", "mass_normalized", "include_self", "scale_mode")


@pytest.mark.parametrize(NAMES, SETTINGS)
def test_edge_lists_give_the_dense_graphs_loss_and_gradient(
    batch, symmetrize, weights_in_affinity, mass_normalized, include_self, scale_mode
):
    codes, y, alpha, scales = batch
    graph = fixed_graph(
        n_neighbors=10,
        symmetrize=symmetrize,
        weights_in_affinity=weights_in_affinity,
        mass_normalized=mass_normalized,
        include_self=include_self,
        distinct_neighbors=include_self,  # both switches, on half the cases
        scale_mode=scale_mode,
    )
    assert reads_as_edges(graph, None)

    def loss(out: jax.Array, graphs: jax.Array | EdgeGraph) -> jax.Array:
        return spectral_objective(out, alpha, graphs, graph)

    dense, edges = batch_affinities(codes, scales, graph), knn_edge_graph(codes, scales, graph)
    assert edges.senders.shape == (2, M * 10)
    np.testing.assert_allclose(loss(y, edges), loss(y, dense), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(loss)(y, edges), jax.grad(loss)(y, dense), rtol=1e-4, atol=1e-7)


def test_the_neighbour_weights_are_the_gaussian_of_each_rows_nearest_rows(batch):
    """Checked against a NumPy brute force: the 8 nearest other rows, sigma the median distance to
    the 8th, W = exp(-d^2 / (2 sigma^2))."""
    x = np.asarray(batch[0][1], np.float64)
    idx, weights = knn_gaussian_neighbors(jnp.asarray(x, jnp.float32), 8)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1) + np.diag(np.full(M, np.inf))
    nearest = np.argsort(d2, axis=1)[:, :8]
    sigma = np.median(np.sqrt(np.take_along_axis(d2, nearest[:, 7:], axis=1)))
    np.testing.assert_array_equal(np.sort(np.asarray(idx), axis=1), np.sort(nearest, axis=1))
    expected = np.exp(-np.take_along_axis(d2, np.asarray(idx), axis=1) / (2 * sigma**2))
    np.testing.assert_allclose(weights, expected, rtol=1e-4)
    _, with_self = knn_gaussian_neighbors(jnp.asarray(x, jnp.float32), 8, include_self=True)
    assert float(jnp.max(jnp.abs(with_self[:, 0]))) == 0.0  # the row itself comes first and weighs nothing


@pytest.mark.parametrize(
    ("change", "masked"),
    [({"symmetrize": "max"}, False), ({"degree_normalization": "samples"}, False), ({}, True)],
)
def test_dense_graphs_where_edge_lists_would_differ(batch, change, masked):
    """The union of kNN graphs, degree-normalized graphs and batches with missing views keep the dense form."""
    codes, _, _, scales = batch
    graph = fixed_graph(n_neighbors=10, **change)
    mask = jnp.ones((M, 2), bool).at[:10, 1].set(False) if masked else None
    assert not reads_as_edges(graph, mask)
    assert batch_graph(codes, scales, graph, mask).shape == (2, M, M)
    assert isinstance(batch_graph(codes, scales, fixed_graph(n_neighbors=10), None), EdgeGraph)
