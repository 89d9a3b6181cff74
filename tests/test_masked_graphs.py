"""Graphs and losses over the rows that have each view: the masked kNN affinity and Eq. 4 against
NumPy references, the exact spectral embedding on present pairs, and the degree- and view-count-
balanced affinities."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.laplacian import edge_laplacian_loss, weighted_laplacian_loss
from specrage_jax.ops.objective import edge_graph
from specrage_jax.ops.spectral import present_pairs_laplacian_eigenvectors
from specrage_jax.ops.weights import weight_balance_penalty, weight_entropy_penalty
from tests.fixed_sections import fixed_graph
from tests.synthetic import points


def numpy_masked_affinity(x: np.ndarray, present: np.ndarray, l: int, c: float = 2.0) -> np.ndarray:
    """The graph among the present rows, written out: each present row's l nearest present
    others (fewer if there are fewer), sigma the median distance to the l-th (or farthest)
    present neighbour, exp(-d^2 / (c sigma^2)), then (W + W^T) / 2; absent rows have no edges."""
    m = len(x)
    rows = np.flatnonzero(present)
    w = np.zeros((m, m))
    if len(rows) < 2:
        return w
    d2 = ((x[rows, None, :] - x[None, rows, :]) ** 2).sum(-1).astype(np.float64)
    np.fill_diagonal(d2, np.inf)
    keep = min(l, len(rows) - 1)
    order = np.argsort(d2, axis=1, kind="stable")[:, :keep]
    near = np.take_along_axis(d2, order, axis=1)
    sigma = np.median(np.sqrt(near[:, keep - 1]))
    for a, i in enumerate(rows):
        w[i, rows[order[a]]] = np.exp(-near[a] / (c * sigma**2))
    return (w + w.T) / 2


def numpy_masked_loss(y: np.ndarray, w: np.ndarray, alpha: np.ndarray | None, present: np.ndarray) -> float:
    """1/V sum_v sum_ij W~_ij ||y_i - y_j||^2 / m_v^2 (= 2/V sum_v tr(Y^T L~ Y) / m_v^2)."""
    n_views = w.shape[0]
    sq = ((y[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    total = 0.0
    for v in range(n_views):
        wv = w[v] if alpha is None else w[v] * np.outer(alpha[:, v], alpha[:, v])
        total += (wv * sq).sum() / max(present[:, v].sum(), 1) ** 2
    return total / n_views


@pytest.mark.parametrize("present_count", [24, 15, 6, 4, 2])
def test_masked_affinity_matches_the_numpy_graph_among_present_rows(present_count):
    x = points(24, 3, 0)
    present = np.zeros(24, bool)
    present[np.random.default_rng(1).permutation(24)[:present_count]] = True
    w = np.asarray(knn_gaussian_affinity(jnp.asarray(x), 5, present=jnp.asarray(present)))
    np.testing.assert_allclose(w, numpy_masked_affinity(x, present, 5), rtol=2e-5, atol=1e-7)
    assert not w[~present].any() and not w[:, ~present].any()


def test_masked_affinity_with_every_row_present_equals_the_complete_graph():
    x = jnp.asarray(points(32, 4, 2))
    full = knn_gaussian_affinity(x, 6)
    np.testing.assert_allclose(knn_gaussian_affinity(x, 6, present=jnp.ones(32, bool)), full, rtol=1e-6, atol=1e-8)
    scale = jnp.float32(0.9)  # a global sigma, too
    np.testing.assert_allclose(
        knn_gaussian_affinity(x, 6, scale, present=jnp.ones(32, bool)), knn_gaussian_affinity(x, 6, scale), rtol=1e-6
    )


@pytest.mark.parametrize("present_count", [1, 0])
def test_a_view_on_fewer_than_two_rows_has_no_edges(present_count):
    present = np.arange(16) < present_count
    w = knn_gaussian_affinity(jnp.asarray(points(16, 2, 3)), 5, present=jnp.asarray(present))
    assert np.isfinite(np.asarray(w)).all() and not np.asarray(w).any()


def test_masked_loss_matches_the_numpy_reference_dense_and_as_edge_lists():
    m, k = 20, 3
    rng = np.random.default_rng(4)
    present = rng.random((m, 2)) < 0.6
    present[~present.any(axis=1), 0] = True
    views = [points(m, 3, 5), points(m, 2, 6)]
    w = np.stack([numpy_masked_affinity(x, present[:, v], 4) for v, x in enumerate(views)])
    y = rng.normal(size=(m, k))
    alpha = rng.random((m, 2)) * present
    alpha /= alpha.sum(axis=1, keepdims=True)
    for weights in (None, alpha):
        expected = numpy_masked_loss(y, w, weights, present)
        jw = None if weights is None else jnp.asarray(weights, jnp.float32)
        dense = weighted_laplacian_loss(jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32), jw, present=present)
        edges = edge_graph(w.astype(np.float32))
        listed = edge_laplacian_loss(
            jnp.asarray(y, jnp.float32), edges.senders, edges.receivers, edges.weights, jw, present=jnp.asarray(present)
        )
        np.testing.assert_allclose(float(dense), expected, rtol=1e-5)
        np.testing.assert_allclose(float(listed), expected, rtol=1e-5)


def test_a_sparsely_present_view_is_not_down_weighted_by_its_absence():
    """The same graph on half the rows (the other half absent) gives the same per-view term as
    on a batch of only those rows: the mean over present pairs, not over all m^2 pairs."""
    x, y = points(20, 3, 7), points(20, 2, 8)
    present = np.repeat([[True], [False]], 10, axis=0)
    w = knn_gaussian_affinity(jnp.asarray(x), 4, present=jnp.asarray(present[:, 0]))[None]
    half = weighted_laplacian_loss(jnp.asarray(y), w, present=jnp.asarray(present))
    alone = weighted_laplacian_loss(jnp.asarray(y[:10]), knn_gaussian_affinity(jnp.asarray(x[:10]), 4)[None])
    np.testing.assert_allclose(float(half), float(alone), rtol=1e-5)


def test_weight_regularizers_measure_against_each_samples_present_views():
    alpha = jnp.asarray([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    present = jnp.asarray([[True, False, False], [True, True, False], [True, True, True]])
    per_sample = np.array([0.0, 0.0, sum(p * np.log(3 * p) for p in (0.2, 0.3, 0.5))])
    np.testing.assert_allclose(float(weight_entropy_penalty(alpha, present)), per_sample.mean(), rtol=1e-6)
    # balance: the batch mean against the mean of each sample's uniform-over-present weights
    target = np.mean([[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]], axis=0)
    at_target = jnp.asarray(np.tile(target, (3, 1)), jnp.float32)
    np.testing.assert_allclose(float(weight_balance_penalty(at_target, present)), 0.0, atol=1e-6)
    assert float(weight_balance_penalty(at_target, None)) > 0.05  # against 1/V it would be penalized


def test_exact_se_on_present_pairs_equals_the_dense_sum_of_present_graphs():
    views = [points(40, 3, 16), points(40, 2, 17)]
    present = np.ones((40, 2), bool)
    present[:12, 0] = False
    present[30:, 1] = False
    graph = fixed_graph(n_neighbors=5)
    values, vectors = present_pairs_laplacian_eigenvectors(views, present, 3, graph)
    total = np.zeros((40, 40))
    for v, x in enumerate(views):
        w = numpy_masked_affinity(x, present[:, v], 5)
        total += np.diag(w.sum(axis=1)) - w
    expected = np.linalg.eigvalsh(total)[:3]
    np.testing.assert_allclose(values, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(vectors.T @ total @ vectors, np.diag(expected), atol=1e-5)


def test_degree_normalized_affinities_match_the_numpy_formula_and_keep_edgeless_rows_empty():
    from specrage_jax.ops.affinity import degree_normalized_affinities

    rng = np.random.default_rng(3)
    w = rng.random((2, 7, 7)).astype(np.float32)
    w = (w + w.transpose(0, 2, 1)) / 2
    w[0, 2, :] = w[0, :, 2] = 0.0  # sample 2 lacks view 0
    w[:, 5, :] = w[:, :, 5] = 0.0  # sample 5 has no edge at all
    degrees = w.sum(axis=(0, 2)).astype(np.float64)
    has = degrees > 0
    inv = np.where(has, 1.0 / np.sqrt(np.where(has, degrees, 1.0)), 0.0)
    expected = w * np.outer(inv, inv)[None] * degrees[has].mean()
    got = np.asarray(degree_normalized_affinities(jnp.asarray(w)))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert not got[:, 5].any() and not got[:, :, 5].any()
    np.testing.assert_allclose(got, got.transpose(0, 2, 1), rtol=1e-6)
    # a sample with fewer edges is no longer the cheap one: summed degrees move towards their mean
    new_degrees = got.sum(axis=(0, 2))[has]
    assert np.std(new_degrees) / np.mean(new_degrees) < np.std(degrees[has]) / np.mean(degrees[has])


def test_view_count_balanced_affinities_match_the_numpy_formula():
    from specrage_jax.ops.affinity import view_count_balanced_affinities

    rng = np.random.default_rng(4)
    w = rng.random((3, 8, 8)).astype(np.float32)
    w = (w + w.transpose(0, 2, 1)) / 2
    present = np.ones((8, 3), bool)
    present[1, 0] = present[4, [0, 2]] = present[6, 2] = False
    for v in range(3):
        w[v, ~present[:, v], :] = w[v, :, ~present[:, v]] = 0.0
    mean_degree = np.array([w[v].sum(axis=1)[present[:, v]].mean() for v in range(3)], np.float64)
    scale = np.sqrt(mean_degree.sum() / (present * mean_degree).sum(axis=1))
    expected = w * np.outer(scale, scale)[None]
    got = np.asarray(view_count_balanced_affinities(jnp.asarray(w), jnp.asarray(present)))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    complete = np.flatnonzero(present.all(axis=1))
    np.testing.assert_allclose(got[:, complete][:, :, complete], w[:, complete][:, :, complete], rtol=1e-6)
    # the one-view sample, whose neighbours mostly have every view, rises to about the geometric
    # mean of its summed degree and a complete sample's
    complete_degree = w[:, present.all(axis=1)].sum(axis=(0, 2)).mean()
    assert got[:, 4].sum() == pytest.approx(np.sqrt(w[:, 4].sum() * complete_degree), rel=0.05)
    full = np.ones_like(present)
    np.testing.assert_allclose(
        np.asarray(view_count_balanced_affinities(jnp.asarray(w), jnp.asarray(full))), w, rtol=1e-6
    )


@pytest.mark.parametrize("how", ["views", "samples"])
def test_missing_view_balancing_applies_only_where_views_are_missing(how):
    from specrage_jax.ops.objective import batch_affinities

    codes = [jnp.asarray(points(30, 3, 0)), jnp.asarray(points(30, 2, 1))]
    graph = fixed_graph(n_neighbors=5, scale_mode="batch", missing_view_degrees="none")
    balanced = dataclasses.replace(graph, missing_view_degrees=how)
    scales = jnp.ones((2,))
    np.testing.assert_array_equal(batch_affinities(codes, scales, balanced), batch_affinities(codes, scales, graph))
    mask = np.ones((30, 2), bool)
    mask[:10, 1] = False
    plain = batch_affinities(codes, scales, graph, jnp.asarray(mask))
    scaled = batch_affinities(codes, scales, balanced, jnp.asarray(mask))
    assert not np.allclose(plain, scaled)
    assert not np.asarray(scaled)[1, :10].any()  # still no edge where view 1 is missing


def test_missing_view_degrees_defaults_to_views_and_rejects_unknown_values():
    assert fixed_graph().missing_view_degrees == "views"
    with pytest.raises(ValueError, match="missing_view_degrees"):
        fixed_graph(missing_view_degrees="degree")
    from specrage_jax.ops.objective import missing_view_balanced

    with pytest.raises(ValueError, match="views, samples, none; got 'degree'"):
        missing_view_balanced(jnp.zeros((2, 4, 4)), jnp.ones((4, 2), bool), "degree")
