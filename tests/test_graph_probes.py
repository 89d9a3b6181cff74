"""The graphs the data-aware rules read: their kNN lists are the loss's own, ties included, and
above DENSE_SPECTRUM_MAX_ROWS the sparse path gives the dense path's eigenvalues, including a zero
eigenvalue repeated once per component."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
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


def _tied_rows(n: int, seed: int = 0) -> np.ndarray:
    """Binary rows of 6 features: most rows tie with several others at their l-th distance."""
    return np.random.default_rng(seed).integers(0, 2, (n, 6)).astype(np.float64)


def _support_of_lists(neighbors, m: int, l: int) -> np.ndarray:
    """(V, m, m) bool: i ~ j where j is among i's first l neighbours or i among j's (a symmetrized
    graph's edges), from per-view lists with indices among the view's present rows."""
    support = np.zeros((len(neighbors), m, m), bool)
    for v, (present, d2, idx) in enumerate(neighbors):
        rows = np.repeat(present, l)
        cols = present[idx[:, :l]].ravel()
        kept = np.isfinite(d2[:, :l]).ravel()
        support[v, rows[kept], cols[kept]] = True
    return support | support.transpose(0, 2, 1)


def _loss_graph_support(views, l: int, mask=None) -> np.ndarray:
    """(V, m, m) bool: the edges of the graph whole-set training builds (jitted, as in training)."""
    from specrage_jax.config import GraphConfig
    from specrage_jax.ops.objective import batch_affinities

    codes = tuple(jnp.asarray(np.nan_to_num(v), jnp.float32) for v in views)
    present = None if mask is None else jnp.asarray(mask)
    graph = jax.jit(batch_affinities, static_argnums=2)(
        codes, jnp.ones(len(views)), GraphConfig(n_neighbors=l, degree_normalization="none"), present
    )
    return np.asarray(graph) > 0


def test_the_rules_read_the_edges_the_loss_reads_where_distances_tie():
    """On binary rows (ties at the l-th distance on most rows) the rules' lists give exactly the
    edges of the graph whole-set training builds, for the largest candidate l and its prefixes."""
    n = 80
    views = [_tied_rows(n, 0), _tied_rows(n, 1)]
    lists = present_neighbor_lists(views, np.arange(n), 12)
    sq_dists = np.stack([d2 for _, d2, _ in lists])
    assert np.mean(np.isclose(sq_dists[:, :, 4], sq_dists[:, :, 5], rtol=1e-5)) > 0.5  # ties decide the 5th slot
    for l in (5, 12):
        np.testing.assert_array_equal(_support_of_lists(lists, n, l), _loss_graph_support(views, l))


def test_a_view_missing_on_some_rows_is_searched_among_the_rows_that_have_it():
    """Rows lacking a view (NaN) are nobody's neighbour in it; the lists' indices are positions
    among the rows that have the view, and the edges are those of training's masked graph."""
    n, l = 40, 5
    has_view = np.random.default_rng(3).random(n) > 0.3
    views = [_tied_rows(n, 1), np.where(has_view[:, None], _tied_rows(n, 2), np.nan)]
    lists = present_neighbor_lists(views, np.arange(n), l)
    np.testing.assert_array_equal(lists[1][0], np.flatnonzero(has_view))
    mask = np.stack([np.ones(n, bool), has_view], axis=1)
    np.testing.assert_array_equal(_support_of_lists(lists, n, l), _loss_graph_support(views, l, mask))
