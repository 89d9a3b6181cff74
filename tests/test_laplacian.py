"""Tests for specrage_jax.ops.laplacian: Eq. 1 = Eq. 3, Eq. 4 both ways, against float64 NumPy."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.laplacian import (
    fused_weighted_affinity,
    laplacian,
    pairwise_spectral_loss,
    rayleigh_trace,
    weighted_affinity,
    weighted_laplacian_loss,
)

M, K, V = 32, 4, 3


def numpy_pairwise_loss(y: np.ndarray, affinities: np.ndarray, alpha: np.ndarray | None = None) -> float:
    """Eq. 1 / Eq. 4 in float64: 1/(m^2 V) sum_v sum_ij W_ij a_iv a_jv ||y_i - y_j||^2."""
    y = np.asarray(y, np.float64)
    affinities = np.asarray(affinities, np.float64)
    n_views, m, _ = affinities.shape
    sq = ((y[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    total = 0.0
    for v in range(n_views):
        w = affinities[v] if alpha is None else affinities[v] * np.outer(alpha[:, v], alpha[:, v])
        total += (w * sq).sum()
    return total / (m * m * n_views)


@pytest.fixture(scope="module")
def problem() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y (M, K), affinities (V, M, M) symmetric kNN graphs of V random views, alpha (M, V) softmax)."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((M, K)).astype(np.float32)
    affinities = np.stack(
        [
            np.asarray(knn_gaussian_affinity(jnp.asarray(rng.standard_normal((M, 4)), jnp.float32), 5, None))
            for _ in range(V)
        ]
    )
    logits = rng.standard_normal((M, V))
    alpha = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32)
    return y, affinities, alpha


def test_eq1_equals_eq3(problem):
    y, affinities, _ = problem
    literal = float(pairwise_spectral_loss(jnp.asarray(y), jnp.asarray(affinities)))
    laplacian_form = float(weighted_laplacian_loss(jnp.asarray(y), jnp.asarray(affinities)))
    assert literal > 0
    assert laplacian_form == pytest.approx(literal, rel=1e-5)
    assert literal == pytest.approx(numpy_pairwise_loss(y, affinities), rel=1e-5)


def test_eq3_matches_numpy_trace(problem):
    y, affinities, _ = problem
    y64, w64 = y.astype(np.float64), affinities.astype(np.float64)
    lap_sum = sum(np.diag(w.sum(1)) - w for w in w64)
    want = 2.0 * np.trace(y64.T @ lap_sum @ y64) / (M * M * V)
    assert float(weighted_laplacian_loss(jnp.asarray(y), jnp.asarray(affinities))) == pytest.approx(want, rel=1e-5)


def test_eq4_both_ways(problem):
    y, affinities, alpha = problem
    args = (jnp.asarray(y), jnp.asarray(affinities), jnp.asarray(alpha))
    literal = float(pairwise_spectral_loss(*args))
    laplacian_form = float(weighted_laplacian_loss(*args))
    want = numpy_pairwise_loss(y, affinities, alpha)
    assert literal == pytest.approx(want, rel=1e-5)
    assert laplacian_form == pytest.approx(want, rel=1e-5)
    # The weights matter: Eq. 4 is not Eq. 1.
    assert want != pytest.approx(numpy_pairwise_loss(y, affinities), rel=1e-2)


def test_unit_view_weights_give_eq1(problem):
    y, affinities, _ = problem
    ones = jnp.ones((M, V))
    assert float(weighted_laplacian_loss(jnp.asarray(y), jnp.asarray(affinities), ones)) == pytest.approx(
        float(weighted_laplacian_loss(jnp.asarray(y), jnp.asarray(affinities))), rel=1e-6
    )


def test_jitted_loss_matches_eager(problem):
    y, affinities, alpha = problem
    args = (jnp.asarray(y), jnp.asarray(affinities), jnp.asarray(alpha))
    assert float(jax.jit(weighted_laplacian_loss)(*args)) == pytest.approx(
        float(weighted_laplacian_loss(*args)), rel=1e-6
    )


def test_pairwise_sum_is_twice_rayleigh_trace(problem):
    y, affinities, _ = problem
    w = affinities[0]
    y64, w64 = y.astype(np.float64), w.astype(np.float64)
    pairwise = (w64 * ((y64[:, None] - y64[None]) ** 2).sum(-1)).sum()
    lap = np.asarray(laplacian(jnp.asarray(w)), np.float64)
    np.testing.assert_allclose(lap, np.diag(w64.sum(1)) - w64, atol=1e-6)
    np.testing.assert_allclose(lap.sum(axis=1), 0.0, atol=1e-5)
    assert 2.0 * np.trace(y64.T @ lap @ y64) == pytest.approx(pairwise, rel=1e-5)
    assert 2.0 * float(rayleigh_trace(jnp.asarray(y), jnp.asarray(w))) == pytest.approx(pairwise, rel=1e-5)


def test_loss_is_invariant_to_permuting_the_batch(problem):
    y, affinities, alpha = problem
    perm = np.random.default_rng(1).permutation(M)
    assert not (perm == np.arange(M)).all()
    original = float(weighted_laplacian_loss(jnp.asarray(y), jnp.asarray(affinities), jnp.asarray(alpha)))
    permuted = float(
        weighted_laplacian_loss(
            jnp.asarray(y[perm]), jnp.asarray(affinities[:, perm][:, :, perm]), jnp.asarray(alpha[perm])
        )
    )
    assert permuted == pytest.approx(original, rel=1e-5)
    # Permuting y alone breaks the pairing with the graph.
    mismatched = float(weighted_laplacian_loss(jnp.asarray(y[perm]), jnp.asarray(affinities), jnp.asarray(alpha)))
    assert mismatched != pytest.approx(original, rel=1e-3)


def test_weighted_affinity_is_w_times_outer_alpha(problem):
    _, affinities, alpha = problem
    got = np.asarray(weighted_affinity(jnp.asarray(affinities[0]), jnp.asarray(alpha[:, 0])))
    np.testing.assert_allclose(got, affinities[0] * np.outer(alpha[:, 0], alpha[:, 0]), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got, got.T, atol=1e-8)


def test_fused_weighted_affinity_sums_the_views(problem):
    _, affinities, alpha = problem
    got = np.asarray(fused_weighted_affinity(jnp.asarray(affinities), jnp.asarray(alpha)))
    want = sum(affinities[v] * np.outer(alpha[:, v], alpha[:, v]) for v in range(V))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_eq1_equals_eq3_for_directed_knn_graph(problem):
    y, _, _ = problem
    x = jnp.asarray(np.random.default_rng(2).standard_normal((M, 3)), jnp.float32)
    w = knn_gaussian_affinity(x, 5, 1.0, symmetrize_how="none")[None]
    assert float(weighted_laplacian_loss(jnp.asarray(y), w)) == pytest.approx(
        float(pairwise_spectral_loss(jnp.asarray(y), w)), rel=1e-5
    )


jitted_rayleigh_trace = jax.jit(rayleigh_trace)


@settings(max_examples=25, deadline=None)
@given(
    m=st.sampled_from([3, 7]),
    data=st.data(),
)
def test_property_pairwise_sum_identity(m, data):
    k = data.draw(st.sampled_from([1, 3]))
    finite = st.floats(-4, 4, allow_nan=False, width=32)
    a = data.draw(hnp.arrays(np.float32, (m, m), elements=st.floats(0, 2, width=32)))
    y = data.draw(hnp.arrays(np.float32, (m, k), elements=finite))
    w = 0.5 * (a + a.T)
    np.fill_diagonal(w, 0.0)
    y64, w64 = y.astype(np.float64), w.astype(np.float64)
    pairwise = (w64 * ((y64[:, None] - y64[None]) ** 2).sum(-1)).sum()
    got = 2.0 * float(jitted_rayleigh_trace(jnp.asarray(y), jnp.asarray(w)))
    # float32 cancellation: tolerance relative to the size of the terms, not of the result.
    scale = (np.abs(w64).sum(1) * (y64**2).sum(1)).sum()
    assert abs(got - pairwise) <= 1e-5 * scale + 1e-6
    assert got >= -1e-5 * scale - 1e-6  # L is PSD for a symmetric non-negative W


def test_mass_normalized_loss_is_eq1_at_uniform_weights_and_blind_to_a_common_scale():
    rng = np.random.default_rng(7)
    m, k, n_views = 20, 3, 2
    y = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
    w = rng.uniform(0.0, 1.0, (n_views, m, m)).astype(np.float32)
    w = jnp.asarray((w + np.transpose(w, (0, 2, 1))) / 2)
    uniform = jnp.full((m, n_views), 0.5, jnp.float32)
    eq1 = weighted_laplacian_loss(y, w)
    np.testing.assert_allclose(weighted_laplacian_loss(y, w, uniform, mass_normalized=True), eq1, rtol=1e-5)
    alpha = jnp.asarray(rng.uniform(0.1, 1.0, (m, n_views)), jnp.float32)
    a = weighted_laplacian_loss(y, w, alpha, mass_normalized=True)
    b = weighted_laplacian_loss(y, w, 0.01 * alpha, mass_normalized=True)
    np.testing.assert_allclose(a, b, rtol=1e-4)  # shrinking every weight no longer lowers the loss
    assert float(weighted_laplacian_loss(y, w, 0.01 * alpha)) < 0.01 * float(weighted_laplacian_loss(y, w, alpha))
    zero_view = alpha.at[:, 1].set(0.0)
    assert np.isfinite(float(weighted_laplacian_loss(y, w, zero_view, mass_normalized=True)))


def test_ritz_basis_diagonalizes_the_sum_and_off_diagonal_ratio():
    """ops.diagnostics: the Ritz basis spans the same subspace, is orthonormal, and makes
    Z^T L-bar Z diagonal; for commuting Laplacians it diagonalizes every view."""
    from specrage_jax.ops.diagnostics import (
        grassmann_distance_sq,
        off_diagonal_ratio,
        ritz_basis,
    )

    rng = np.random.default_rng(0)
    n, k = 30, 4
    basis, _ = np.linalg.qr(rng.standard_normal((n, n)))
    laplacians = np.stack([basis @ np.diag(rng.uniform(0, 5, n)) @ basis.T for _ in range(2)])  # commuting
    span = basis[:, :k] @ rng.standard_normal((k, k))  # the joint eigenvectors, mixed
    z = ritz_basis(span, laplacians.sum(axis=0))
    np.testing.assert_allclose(z.T @ z, np.eye(k), atol=1e-10)
    assert grassmann_distance_sq(z, span) < 1e-10
    for lap in laplacians:
        assert off_diagonal_ratio(z.T @ lap @ z) < 1e-8
        assert off_diagonal_ratio((span / np.linalg.norm(span, axis=0)).T @ lap @ span) > 0.05  # mixed basis
    assert off_diagonal_ratio(np.diag([1.0, 2.0])) == 0.0
    assert off_diagonal_ratio(np.ones((2, 2))) == pytest.approx(np.sqrt(0.5))
    assert off_diagonal_ratio(np.zeros((3, 3))) == 0.0
