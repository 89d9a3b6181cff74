"""Tests for specrage_jax.ops.ortho: the QR orthogonalization layer R^-1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.ops.ortho import orthogonality_error, orthonormalizer

CONVENTIONS = ["m_identity", "identity"]


def with_condition_number(m: int, k: int, cond: float, seed: int, spectrum: str = "log") -> np.ndarray:
    """A random (m, k) float32 matrix of condition number ``cond`` built from its SVD.

    spectrum 'log': singular values log-spaced from 3 down to 3 / cond; 'one_small': all 3 but
    the last, 3 / cond (one nearly missing direction).
    """
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((m, k)))
    v, _ = np.linalg.qr(rng.standard_normal((k, k)))
    if spectrum == "log":
        s = 3.0 * np.logspace(0.0, -np.log10(cond), k)
    else:
        s = 3.0 * np.r_[np.ones(k - 1), 1.0 / cond]
    return ((u * s) @ v.T).astype(np.float32)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_random_batch_is_orthonormalized(convention):
    y_tilde = jnp.asarray(np.random.default_rng(0).standard_normal((1024, 10)) + 0.5, jnp.float32)
    r_inv = orthonormalizer(y_tilde, convention=convention)
    assert float(orthogonality_error(y_tilde @ r_inv, convention)) < 1e-4
    # The other convention's scale is off by a factor m, so the check itself can fail.
    other = CONVENTIONS[1 - CONVENTIONS.index(convention)]
    assert float(orthogonality_error(y_tilde @ r_inv, other)) > 0.5


def check_orthonormalized(cond: float, convention: str) -> None:
    for spectrum in ("log", "one_small"):
        for seed in range(3):
            y_tilde = with_condition_number(1024, 10, cond, seed, spectrum)
            assert np.linalg.cond(y_tilde.astype(np.float64)) == pytest.approx(cond, rel=1e-2)
            r_inv = orthonormalizer(jnp.asarray(y_tilde), convention=convention)
            error = float(orthogonality_error(jnp.asarray(y_tilde) @ r_inv, convention))
            assert error < 1e-4, f"{spectrum} spectrum, seed {seed}: error {error:.2e}"


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("cond", [1e1, 1e2])
def test_ill_conditioned_batch_is_orthonormalized(convention, cond):
    check_orthonormalized(cond, convention)


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_condition_number_1e3_is_orthonormalized(convention):
    check_orthonormalized(1e3, convention)


def test_r_inv_is_upper_triangular_with_positive_diagonal():
    y_tilde = jnp.asarray(with_condition_number(1024, 10, 1e2, 3))
    for convention in CONVENTIONS:
        r_inv = np.asarray(orthonormalizer(y_tilde, convention=convention))
        np.testing.assert_array_equal(np.tril(r_inv, -1), 0.0)
        assert (np.diag(r_inv) > 0).all()
    # Canonical signs: flipping a column of Y~ flips the same column of Y, nothing else.
    flipped = y_tilde.at[:, 2].multiply(-1.0)
    y = y_tilde @ orthonormalizer(y_tilde)
    y_flipped = flipped @ orthonormalizer(flipped)
    np.testing.assert_allclose(np.asarray(y_flipped[:, 2]), -np.asarray(y[:, 2]), atol=1e-4)
    np.testing.assert_allclose(np.asarray(y_flipped[:, :2]), np.asarray(y[:, :2]), atol=1e-4)


def test_refine_improves_float32_accuracy():
    y_tilde = jnp.asarray(with_condition_number(1024, 10, 1e2, 4))
    coarse = float(orthogonality_error(y_tilde @ orthonormalizer(y_tilde, refine=False)))
    fine = float(orthogonality_error(y_tilde @ orthonormalizer(y_tilde, refine=True)))
    assert fine < 1e-5
    assert fine <= coarse


def test_m_identity_is_sqrt_m_times_identity_convention():
    y_tilde = jnp.asarray(np.random.default_rng(5).standard_normal((1024, 10)), jnp.float32)
    np.testing.assert_allclose(
        np.asarray(orthonormalizer(y_tilde, convention="m_identity")),
        32.0 * np.asarray(orthonormalizer(y_tilde, convention="identity")),
        rtol=1e-5,
    )


def test_unknown_convention_raises():
    with pytest.raises(ValueError, match="convention"):
        orthonormalizer(jnp.ones((1024, 10)), convention="unit")


def rank_deficient_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    return {
        "duplicated_columns": np.concatenate([x[:, :5], x[:, :5]], axis=1),
        "constant_rows": np.tile(x[:1], (64, 1)),
        "one_nonzero_column": np.concatenate([x[:, :1], np.zeros((64, 9), np.float32)], axis=1),
        "m_less_than_k": x[:3],
        "single_row": x[:1],
    }


@pytest.mark.parametrize("name", list(rank_deficient_inputs()))
@pytest.mark.parametrize("refine", [True, False])
def test_rank_deficient_input_gives_finite_bounded_output(name, refine):
    y_tilde = rank_deficient_inputs()[name]
    m = y_tilde.shape[0]
    r_inv = np.asarray(orthonormalizer(jnp.asarray(y_tilde), refine=refine))
    y = y_tilde @ r_inv
    assert np.isfinite(r_inv).all()
    assert np.isfinite(y).all()
    assert np.abs(y).max() <= np.sqrt(m) + 1e-3
    np.testing.assert_array_equal(np.tril(r_inv, -1), 0.0)


def test_m_less_than_k_spans_the_batch():
    y_tilde = rank_deficient_inputs()["m_less_than_k"]
    y = y_tilde @ np.asarray(orthonormalizer(jnp.asarray(y_tilde)))
    # Three rows in R^10: Y Y^T = m I on the row space (the QR of the ridge-augmented matrix).
    np.testing.assert_allclose(y @ y.T / 3.0, np.eye(3), atol=1e-3)


@pytest.mark.parametrize("m", [3, 64])
def test_all_zero_input_gives_finite_output(m):
    y_tilde = np.zeros((m, 10), np.float32)
    r_inv = np.asarray(orthonormalizer(jnp.asarray(y_tilde)))
    assert np.isfinite(r_inv).all()
    assert np.isfinite(y_tilde @ r_inv).all()


def test_gradient_through_orthonormalizer_is_finite_and_nonzero():
    y_tilde = jnp.asarray(with_condition_number(128, 5, 1e1, 7))
    probe = jnp.asarray(np.random.default_rng(8).standard_normal((128, 5)), jnp.float32)

    @jax.jit
    def objective(y):
        return jnp.sum(probe * (y @ orthonormalizer(y)))

    grad = np.asarray(jax.jit(jax.grad(objective))(y_tilde))
    assert np.isfinite(grad).all()
    assert np.abs(grad).max() > 1e-3
    # A finite-difference check along one direction.
    direction = jnp.asarray(np.random.default_rng(9).standard_normal((128, 5)), jnp.float32)
    step = 1e-2
    numeric = (float(objective(y_tilde + step * direction)) - float(objective(y_tilde - step * direction))) / (2 * step)
    assert float(jnp.sum(grad * direction)) == pytest.approx(numeric, rel=2e-2, abs=1e-2)
