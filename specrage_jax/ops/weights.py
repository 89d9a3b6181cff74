"""Regularizers on the per-sample view weights alpha (not in the paper; off by default).

Both are KL divergences to the uniform distribution u = 1/V, so both are >= 0 and 0 exactly at
uniform weights:

* :func:`weight_balance_penalty` — KL(mean_i alpha_i || u) of the *batch mean*: forbids a global
  collapse onto one view, yet leaves every sample free to move its weights as long as others
  move the other way (e.g. contaminated view-0 samples down, contaminated view-1 samples up).
* :func:`weight_entropy_penalty` — mean_i KL(alpha_i || u) = log V - mean_i H(alpha_i): pulls
  *each* sample towards 1/V, so samples on which the spectral loss has no preference (clean
  ones, whose views agree) sit at 1/V, and only a loss gradient (a contaminated view) moves a
  sample away from it.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


def _kl_to_uniform(p: jax.Array) -> jax.Array:
    """sum_v p_v log(V p_v) over the last axis, with 0 log 0 = 0. p: (..., V) -> (...)."""
    n_views = p.shape[-1]
    safe = jnp.where(p > 0, p, 1.0)
    return jnp.sum(jnp.where(p > 0, p * jnp.log(n_views * safe), 0.0), axis=-1)


# With every view present the penalties keep _kl_to_uniform's arithmetic (V p, not p / (1/V)), so
# complete data trains bitwise as before; _kl serves the per-sample targets of incomplete data.
def _kl(p: jax.Array, q: jax.Array) -> jax.Array:
    """sum_v p_v log(p_v / q_v) over the last axis, with 0 log 0 = 0. p, q: (..., V) -> (...)."""
    positive = p > 0
    ratio = jnp.where(positive, p, 1.0) / jnp.where(positive, q, 1.0)
    return jnp.sum(jnp.where(positive, p * jnp.log(ratio), 0.0), axis=-1)


def uniform_over_present(view_weights: jax.Array, present: jax.Array) -> jax.Array:
    """Each sample's uniform weights over the views it has: (m, V), 1/V_i on its V_i present
    views (``present`` (m, V) bool) and 0 elsewhere."""
    chex.assert_equal_shape([view_weights, present])
    mask = present.astype(view_weights.dtype)
    return mask / jnp.maximum(jnp.sum(mask, axis=-1, keepdims=True), 1.0)


def weight_balance_penalty(view_weights: jax.Array, present: jax.Array | None = None) -> jax.Array:
    """KL(mean_i alpha_i || mean_i u_i), u_i uniform over sample i's present views (1/V with every
    view present): view_weights (m, V), rows on the simplex -> () >= 0."""
    chex.assert_rank(view_weights, 2)
    if present is None:
        return _kl_to_uniform(jnp.mean(view_weights, axis=0))
    target = jnp.mean(uniform_over_present(view_weights, present), axis=0)
    return _kl(jnp.mean(view_weights, axis=0), target)


def weight_entropy_penalty(view_weights: jax.Array, present: jax.Array | None = None) -> jax.Array:
    """mean_i KL(alpha_i || u_i) = mean_i (log V_i - H(alpha_i)), u_i uniform over sample i's
    V_i present views: (m, V) -> () >= 0. A sample with one view present costs nothing."""
    chex.assert_rank(view_weights, 2)
    if present is None:
        return jnp.mean(_kl_to_uniform(view_weights))
    return jnp.mean(_kl(view_weights, uniform_over_present(view_weights, present)))


def view_weight_regularizer(
    view_weights: jax.Array, *, balance: float = 0.0, entropy: float = 0.0, present: jax.Array | None = None
) -> jax.Array:
    """balance * :func:`weight_balance_penalty` + entropy * :func:`weight_entropy_penalty`.

    view_weights: (m, V); present: (m, V) bool where views are missing. A zero coefficient drops
    its term from the graph (not multiplied by 0), so with both 0 the result is the constant 0.
    """
    chex.assert_rank(view_weights, 2)
    total = jnp.zeros((), view_weights.dtype)
    if balance:
        total = total + balance * weight_balance_penalty(view_weights, present)
    if entropy:
        total = total + entropy * weight_entropy_penalty(view_weights, present)
    return total
