"""Tests for specrage_jax.ops.affinity: the kNN Gaussian affinity against a NumPy reference."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specrage_jax.ops.affinity import (
    knn_gaussian_affinity,
    median_neighbor_scale,
    nearest_neighbors,
    neighbor_sq_distances,
    pairwise_sq_distances,
    symmetrize,
)
from tests.fixed_sections import fixed_graph


def reference_affinity(
    x: np.ndarray, n_neighbors: int, sigma: float, *, bandwidth_factor: float, include_self: bool, how: str
) -> np.ndarray:
    """The paper's affinity in float64 NumPy, kNN by a full argsort of each row."""
    x = np.asarray(x, np.float64)
    m = x.shape[0]
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    w = np.zeros((m, m))
    for i in range(m):
        others = [j for j in np.argsort(d2[i], kind="stable") if j != i]
        # With include_self the point itself is the first of its l neighbours; its self-loop is dropped.
        neighbours = others[: n_neighbors - 1] if include_self else others[:n_neighbors]
        for j in neighbours:
            w[i, j] = np.exp(-d2[i, j] / (bandwidth_factor * sigma**2))
    if how == "mean":
        return 0.5 * (w + w.T)
    if how == "max":
        return np.maximum(w, w.T)
    return w


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((40, 5)).astype(np.float32)


@pytest.mark.parametrize("how", ["mean", "max", "none"])
@pytest.mark.parametrize("include_self", [False, True])
@pytest.mark.parametrize("bandwidth_factor", [1.0, 2.0])
def test_matches_numpy_reference(points, how, include_self, bandwidth_factor):
    sigma = 1.3
    got = knn_gaussian_affinity(
        jnp.asarray(points), 6, sigma, bandwidth_factor=bandwidth_factor, include_self=include_self, symmetrize_how=how
    )
    want = reference_affinity(points, 6, sigma, bandwidth_factor=bandwidth_factor, include_self=include_self, how=how)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


def test_per_batch_scale_is_median_distance_to_scale_neighbor(points):
    d2 = ((points[:, None].astype(np.float64) - points[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    sigma = np.median(np.sqrt(np.sort(d2, axis=1)[:, 2]))  # 3rd neighbour
    got = knn_gaussian_affinity(jnp.asarray(points), 6, None, scale_neighbor=3, bandwidth_factor=2.0)
    want = reference_affinity(points, 6, sigma, bandwidth_factor=2.0, include_self=False, how="mean")
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("how", ["mean", "max"])
def test_symmetric_nonnegative_zero_diagonal(points, how):
    w = np.asarray(knn_gaussian_affinity(jnp.asarray(points), 7, None, symmetrize_how=how))
    np.testing.assert_array_equal(w, w.T)
    assert (w >= 0).all()
    np.testing.assert_array_equal(np.diag(w), 0.0)
    assert (w > 0).any()


@pytest.mark.parametrize("include_self", [False, True])
def test_directed_graph_has_l_neighbours_per_row(points, include_self):
    n_neighbors = 7
    # A sigma far above every distance: no exp underflows, so non-zeros are exactly the kNN edges.
    w = np.asarray(
        knn_gaussian_affinity(jnp.asarray(points), n_neighbors, 100.0, include_self=include_self, symmetrize_how="none")
    )
    expected = n_neighbors - 1 if include_self else n_neighbors
    np.testing.assert_array_equal((w > 0).sum(axis=1), expected)
    np.testing.assert_array_equal(np.diag(w), 0.0)


def test_mean_symmetrization_counts(points):
    m, n_neighbors = points.shape[0], 7
    w = np.asarray(knn_gaussian_affinity(jnp.asarray(points), n_neighbors, 100.0, symmetrize_how="mean"))
    nonzero = w > 0
    assert (nonzero.sum(axis=1) >= n_neighbors).all()
    assert m * n_neighbors <= nonzero.sum() <= 2 * m * n_neighbors
    # Union of the directed graph and its transpose, nothing more.
    directed = np.asarray(knn_gaussian_affinity(jnp.asarray(points), n_neighbors, 100.0, symmetrize_how="none")) > 0
    np.testing.assert_array_equal(nonzero, directed | directed.T)


def test_pairwise_sq_distances_matches_numpy(points):
    want = ((points[:, None].astype(np.float64) - points[None]) ** 2).sum(-1)
    got = np.asarray(pairwise_sq_distances(jnp.asarray(points)))
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-5)
    np.testing.assert_array_equal(np.diag(got), 0.0)
    assert (got >= 0).all()


def test_affinity_is_translation_invariant(points):
    w = knn_gaussian_affinity(jnp.asarray(points), 6, 1.0)
    shifted = knn_gaussian_affinity(jnp.asarray(points + np.float32(100.0)), 6, 1.0)
    np.testing.assert_allclose(np.asarray(shifted), np.asarray(w), atol=1e-4, rtol=0)


def test_median_neighbor_scale_ignores_zero_distances():
    # Column 1 (the 2nd neighbour) holds two duplicates (0) and squared distances 1, 4, 9, 16, 25.
    col = np.array([0.0, 1.0, 0.0, 4.0, 9.0, 16.0, 25.0], np.float32)
    knn_sq = np.stack([np.zeros_like(col), col], axis=1)
    assert float(median_neighbor_scale(jnp.asarray(knn_sq), 2)) == pytest.approx(3.0)  # median of 1..5
    # The zeros would have pulled an unfiltered median down to 2.
    assert float(median_neighbor_scale(jnp.asarray(knn_sq), 1)) == 1.0  # every one is zero


def test_median_neighbor_scale_of_all_duplicates_is_one():
    assert float(median_neighbor_scale(jnp.zeros((5, 3)), 3)) == 1.0
    w = np.asarray(knn_gaussian_affinity(jnp.ones((40, 5)), 6, None, symmetrize_how="none"))
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(axis=1), 6.0)  # every neighbour at distance 0 has affinity 1


@pytest.mark.parametrize("n_neighbors, include_self", [(10, False), (11, False), (11, True)])
def test_nearest_neighbors_rejects_too_many_neighbours(n_neighbors, include_self):
    d2 = pairwise_sq_distances(jnp.asarray(np.random.default_rng(1).standard_normal((10, 2)), jnp.float32))
    with pytest.raises(ValueError, match="n_neighbors"):
        nearest_neighbors(d2, n_neighbors, include_self=include_self)


def test_nearest_neighbors_limits_are_usable():
    d2 = pairwise_sq_distances(jnp.asarray(np.random.default_rng(1).standard_normal((10, 2)), jnp.float32))
    dists, idx = nearest_neighbors(d2, 9)
    assert idx.shape == (10, 9)
    assert not (np.asarray(idx) == np.arange(10)[:, None]).any()
    assert (np.diff(np.asarray(dists), axis=1) >= 0).all()
    _, idx_self = nearest_neighbors(d2, 10, include_self=True)
    np.testing.assert_array_equal(np.asarray(idx_self)[:, 0], np.arange(10))


def test_symmetrize_rejects_unknown_mode():
    with pytest.raises(ValueError, match="symmetrize"):
        symmetrize(jnp.eye(3), "min")


jitted_affinity = jax.jit(knn_gaussian_affinity, static_argnums=(1,), static_argnames=("symmetrize_how",))


@settings(max_examples=25, deadline=None)
@given(
    # Few distinct shapes: each new one costs a compilation.
    x=hnp.arrays(
        np.float32,
        st.tuples(st.sampled_from([4, 8]), st.sampled_from([1, 3])),
        elements=st.integers(-8, 8).map(lambda v: v / 4.0),
    ),
    data=st.data(),
    how=st.sampled_from(["mean", "max"]),
)
def test_property_symmetric_nonnegative(x, data, how):
    # A coarse grid of values makes duplicates and ties common.
    n_neighbors = data.draw(st.integers(1, x.shape[0] - 1))
    w = np.asarray(jitted_affinity(jnp.asarray(x), n_neighbors, None, symmetrize_how=how))
    assert np.isfinite(w).all()
    np.testing.assert_array_equal(w, w.T)
    assert (w >= 0).all() and (w <= 1).all()
    np.testing.assert_array_equal(np.diag(w), 0.0)


def test_complete_batches_are_degree_normalized_only_where_the_graph_config_says():
    from specrage_jax.ops.affinity import degree_normalized_affinities
    from specrage_jax.ops.objective import batch_affinities

    rng = np.random.default_rng(3)
    codes = [jnp.asarray(rng.normal(size=(24, 3)), jnp.float32), jnp.asarray(rng.normal(size=(24, 2)), jnp.float32)]
    scales = jnp.ones((2,))
    plain = np.asarray(batch_affinities(codes, scales, fixed_graph(n_neighbors=4, scale_mode="batch")))
    scaled = np.asarray(
        batch_affinities(codes, scales, fixed_graph(n_neighbors=4, scale_mode="batch", degree_normalization="samples"))
    )
    # the formula itself: tests/test_incomplete_training.py; here, that complete batches are routed to it
    np.testing.assert_allclose(scaled, np.asarray(degree_normalized_affinities(jnp.asarray(plain))), rtol=1e-6)
    np.testing.assert_array_equal(scaled > 0, plain > 0)  # the same edges, reweighted
    # the samples' summed degrees move toward their mean: a low-degree sample is no longer cheap to cut off
    degrees, scaled_degrees = plain.sum(axis=(0, 2)), scaled.sum(axis=(0, 2))
    assert degrees.std() / degrees.mean() > 0.05
    assert scaled_degrees.std() / scaled_degrees.mean() < degrees.std() / degrees.mean()  # 0.34 -> 0.17 here
    with pytest.raises(ValueError, match="'auto' is resolved by SpecRaGE.fit"):
        batch_affinities(codes, scales, fixed_graph(n_neighbors=4, scale_mode="batch", degree_normalization="auto"))
    with pytest.raises(ValueError, match="degree_normalization"):
        fixed_graph(degree_normalization="rows")


def sparse_documents(n: int, vocabulary: int, rate: float, seed: int) -> np.ndarray:
    """(n, vocabulary) unit rows of Poisson term counts: most pairs share no term, so many rows
    lie at the same distance (sqrt 2) from a row."""
    counts = np.random.default_rng(seed).poisson(rate, size=(n, vocabulary)).astype(np.float32)
    counts[:, 0] += counts.sum(axis=1) == 0
    return counts / np.linalg.norm(counts, axis=1, keepdims=True)


@pytest.mark.parametrize("rate", [0.005, 0.02])
def test_neighbours_do_not_follow_the_feature_order(rate: float) -> None:
    """Reordering the features reorders the float32 sums; the neighbour lists stay the same."""
    x = sparse_documents(60, 2000, rate, seed=0)
    lists = jax.jit(lambda v: nearest_neighbors(neighbor_sq_distances(v, distinct=True), 8)[1])
    reference = np.sort(np.asarray(lists(jnp.asarray(x))), axis=1)
    for seed in range(3):
        order = np.random.default_rng(seed + 1).permutation(x.shape[1])
        np.testing.assert_array_equal(np.sort(np.asarray(lists(jnp.asarray(x[:, order]))), axis=1), reference)


def test_rows_at_one_distance_are_ranked_by_index() -> None:
    """One-hot rows are all sqrt 2 apart: every row's neighbours are the lowest other indices,
    and the distances returned are the unrounded ones."""
    x = np.eye(20, dtype=np.float32)[np.random.default_rng(0).permutation(20)]
    d2, idx = jax.jit(lambda v: nearest_neighbors(pairwise_sq_distances(v), 8))(jnp.asarray(x))
    for i, row in enumerate(np.asarray(idx)):
        np.testing.assert_array_equal(row, [j for j in range(20) if j != i][:8])
    np.testing.assert_allclose(np.asarray(d2), 2.0, rtol=1e-6)
