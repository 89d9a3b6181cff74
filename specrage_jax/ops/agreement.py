"""How far each view's output lies from the fused embedding (``graph.view_alignment``; not in the
paper).

Under Eq. 4 alone the view nets may split the embedding between them: the fused output
Y = sum_v alpha_v Y^(v) is right while no single Y^(v) is, so a sample that arrives with one view
lands off, and no per-sample weight can leave out a view without losing the other's share. The
disagreement D measures that split in units of the embedding itself:

    D = sum_v sum_i p_iv ||Y^(v)_i - Y_i||^2 / sum_i ||Y_i||^2

over each sample's present views (p_iv = 1 where sample i has view v), so D = 0 where every view's
output is the fused one, and D grows as the views hold different parts of it.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


def view_disagreement(view_outputs: jax.Array, fused: jax.Array, present: jax.Array | None = None) -> jax.Array:
    """D of the view outputs Y^(v) (V, m, k) around the fused output Y (m, k), both through the
    same R^-1; ``present`` (m, V) bool (None: every view): a missing view's row does not count.
    Returns a scalar >= 0; the fused output is the target as it is (callers hold it constant)."""
    chex.assert_rank([view_outputs, fused], [3, 2])
    chex.assert_equal(view_outputs.shape[1:], fused.shape)
    squared = jnp.sum((view_outputs - fused[None]) ** 2, axis=-1)  # (V, m)
    if present is not None:
        chex.assert_shape(present, (fused.shape[0], view_outputs.shape[0]))
        squared = jnp.where(jnp.transpose(present), squared, 0.0)
    return jnp.sum(squared) / jnp.maximum(jnp.sum(fused**2), jnp.finfo(fused.dtype).tiny)


def aligned_objective(
    loss: jax.Array, view_outputs: jax.Array, fused: jax.Array, strength: float, present: jax.Array | None = None
) -> jax.Array:
    """Eq. 4 ``loss`` plus the views' disagreement priced relative to it: loss + mu sg(loss) D, mu
    = ``strength``, with the fused output held constant as D's target. Its gradient is
    loss x grad(log loss + mu D): a unit of relative disagreement costs mu units of relative loss,
    whatever the graph's scale. Only the view nets are pulled (towards the fused point); the fused
    output and the view weights move by Eq. 4 alone. ``strength`` 0 returns ``loss`` unchanged."""
    if strength == 0:
        return loss
    disagreement = view_disagreement(view_outputs, jax.lax.stop_gradient(fused), present)
    return loss + strength * jax.lax.stop_gradient(loss) * disagreement
