"""The orthogonalization layer: R^-1 from the QR decomposition of the fused output.

Convention (``OrthoConfig.convention``): 'm_identity' makes Y^T Y = m I for the batch the
layer was fitted on, so that every column has unit mean square whatever the batch size
and an unseen sample's row has the same scale; 'identity' gives Y^T Y = I (the paper).

Numerics: R comes from the QR of the ridge-augmented matrix [Y~; eps I] (R^T R = Y~^T Y~ + eps^2 I),
so R is square and invertible even for m < k or a rank-deficient Y~; eps = rank_tol * ||Y~||_F
is far below the smallest singular value of any usable batch, so it does not disturb a full-rank
batch, and Y = Y~ R^-1 for the fitted batch is the top block of an orthonormal Q, so bounded
(|Y_ij| <= sqrt(m)) whatever Y~ is. For a well-conditioned batch a second pass on Y~ R^-1
(re-orthogonalization) removes the float32 error that grows with cond(Y~); it is skipped
for an ill-conditioned one. Signs are canonical: diag(R) > 0.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular


def _ridge(y: jax.Array, rank_tol: float) -> jax.Array:
    """eps = rank_tol * ||y||_F, with the norm floored at float eps so an all-zero y stays finite."""
    return rank_tol * jnp.maximum(jnp.linalg.norm(y), jnp.finfo(y.dtype).eps)


def _triangular_factor(y: jax.Array, rank_tol: float) -> jax.Array:
    """Upper-triangular R (k, k), diag(R) > 0, with R^T R = y^T y + eps^2 I (see ``_ridge``)."""
    m, k = y.shape
    eps = _ridge(y, rank_tol)
    augmented = jnp.concatenate([y, eps * jnp.eye(k, dtype=y.dtype)], axis=0)
    r = jnp.linalg.qr(augmented, mode="r")
    signs = jnp.where(jnp.diag(r) < 0, -1.0, 1.0).astype(r.dtype)
    return signs[:, None] * r


def _inverse_upper(r: jax.Array) -> jax.Array:
    return solve_triangular(r, jnp.eye(r.shape[0], dtype=r.dtype), lower=False)


def is_well_conditioned(r: jax.Array, y_tilde: jax.Array, rank_tol: float) -> jax.Array:
    """Whether min diag(R) > 10 eps, i.e. every direction of Y~ stands well above the ridge
    (cond(Y~) up to about 1/(10 rank_tol)); since |R_ii| >= sigma_min this is conservative.

    Only then is a second pass safe: on a (nearly) rank-deficient batch it would amplify the
    rounding noise in the missing directions by 1/eps a second time.
    """
    return jnp.min(jnp.abs(jnp.diag(r))) > 10.0 * _ridge(y_tilde, rank_tol)


def orthonormalizer(
    y_tilde: jax.Array, *, convention: str = "m_identity", rank_tol: float = 1e-5, refine: bool = True
) -> jax.Array:
    """R^-1 (k, k) such that Y = Y~ R^-1 satisfies the orthogonality convention.

    Args:
      y_tilde: (m, k) fused output of one batch; any m >= 1.
      convention: 'm_identity' (Y^T Y = m I) or 'identity' (Y^T Y = I).
      rank_tol: relative ridge that keeps R^-1 finite for a rank-deficient batch.
      refine: apply a second QR pass.

    Returns:
      (k, k) upper-triangular R^-1, finite for any finite input.
    """
    chex.assert_rank(y_tilde, 2)
    m = y_tilde.shape[0]
    r = _triangular_factor(y_tilde, rank_tol)
    r_inv = _inverse_upper(r)
    if refine:
        refined = r_inv @ _inverse_upper(_triangular_factor(y_tilde @ r_inv, rank_tol))
        r_inv = jnp.where(is_well_conditioned(r, y_tilde, rank_tol), refined, r_inv)
    if convention == "m_identity":
        return r_inv * jnp.sqrt(jnp.asarray(m, r_inv.dtype))
    if convention == "identity":
        return r_inv
    raise ValueError(f"convention must be 'm_identity' or 'identity', got {convention!r}")


def orthogonality_error(y: jax.Array | np.ndarray, convention: str = "m_identity") -> jax.Array:
    """max |Y^T Y / s - I| with s = m ('m_identity') or 1 ('identity'). y: (m, k) -> ()."""
    m, k = y.shape
    gram = y.T @ y
    if convention == "m_identity":
        gram = gram / m
    return jnp.max(jnp.abs(gram - jnp.eye(k, dtype=y.dtype)))
