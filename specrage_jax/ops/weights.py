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


def weight_balance_penalty(view_weights: jax.Array) -> jax.Array:
    """KL(mean_i alpha_i || uniform): view_weights (m, V), rows on the simplex -> () >= 0."""
    chex.assert_rank(view_weights, 2)
    return _kl_to_uniform(jnp.mean(view_weights, axis=0))


def weight_entropy_penalty(view_weights: jax.Array) -> jax.Array:
    """mean_i KL(alpha_i || uniform) = log V - mean_i H(alpha_i): (m, V) -> () >= 0."""
    chex.assert_rank(view_weights, 2)
    return jnp.mean(_kl_to_uniform(view_weights))


def view_weight_regularizer(view_weights: jax.Array, *, balance: float = 0.0, entropy: float = 0.0) -> jax.Array:
    """balance * :func:`weight_balance_penalty` + entropy * :func:`weight_entropy_penalty`.

    view_weights: (m, V). A zero coefficient drops its term from the graph (not multiplied by 0),
    so with both 0 the result is the constant 0.
    """
    chex.assert_rank(view_weights, 2)
    total = jnp.zeros((), view_weights.dtype)
    if balance:
        total = total + balance * weight_balance_penalty(view_weights)
    if entropy:
        total = total + entropy * weight_entropy_penalty(view_weights)
    return total
