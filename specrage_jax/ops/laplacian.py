"""Graph Laplacians and the SpecRaGE spectral loss (Eqs. 1, 3 and 4 of the paper)."""

from __future__ import annotations

from typing import cast

import chex
import jax
import jax.numpy as jnp


def laplacian(w: jax.Array) -> jax.Array:
    """Unnormalized Laplacian L = D - W. w: (m, m) -> (m, m)."""
    chex.assert_rank(w, 2)
    return jnp.diag(jnp.sum(w, axis=1)) - w


def weighted_affinity(w: jax.Array, view_weights: jax.Array) -> jax.Array:
    """W~_ij = W_ij alpha_i alpha_j for one view. w: (m, m), view_weights: (m,) -> (m, m)."""
    chex.assert_rank([w, view_weights], [2, 1])
    return w * view_weights[:, None] * view_weights[None, :]


def fused_weighted_affinity(affinities: jax.Array, view_weights: jax.Array) -> jax.Array:
    """sum_v W~^(v): affinities (V, m, m), view_weights (m, V) -> (m, m)."""
    chex.assert_rank([affinities, view_weights], [3, 2])
    chex.assert_equal(affinities.shape[0], view_weights.shape[1])
    return jnp.einsum("vij,iv,jv->ij", affinities, view_weights, view_weights)


def weighted_rayleigh_trace(y: jax.Array, w: jax.Array, view_weights: jax.Array) -> jax.Array:
    """tr(Y^T L~ Y) for the weighted affinity W~ = W o alpha alpha^T, without forming W~.

    Uses sum_i d~_i |y_i|^2 - sum_ij W~_ij y_i.y_j with the degrees of the symmetric part
    (W~ + W~^T)/2, so 2 tr(Y^T L~ Y) = sum_ij W~_ij ||y_i - y_j||^2 holds for a directed kNN
    graph too. One (m, m) x (m, k + 1) product and one (m, m) x (m,) product; no m x m x k tensor.

    y: (m, k), w: (m, m), view_weights: (m,) -> ().
    """
    chex.assert_rank([y, w, view_weights], [2, 2, 1])
    k = y.shape[1]
    weighted_y = view_weights[:, None] * y
    products = w @ jnp.concatenate([weighted_y, view_weights[:, None]], axis=1)  # (m, k + 1)
    cross = jnp.sum(weighted_y * products[:, :k])
    degrees = 0.5 * view_weights * (products[:, k] + w.T @ view_weights)
    return jnp.sum(degrees * jnp.sum(y * y, axis=1)) - cross


def rayleigh_trace(y: jax.Array, w: jax.Array) -> jax.Array:
    """tr(Y^T L Y) for L = D - W of the symmetric part of w. y: (m, k), w: (m, m) -> ()."""
    return weighted_rayleigh_trace(y, w, jnp.ones((w.shape[0],), y.dtype))


def weighted_laplacian_loss(
    y: jax.Array,
    affinities: jax.Array,
    view_weights: jax.Array | None = None,
    *,
    mass_normalized: bool = False,
    present: jax.Array | None = None,
) -> jax.Array:
    """Eq. 4 through its Laplacian form (Eq. 3): 2/(m^2 V) sum_v tr(Y^T L~^(v) Y).

    With ``mass_normalized`` each view's term is divided by its weighted edge mass
    (a_v^T W^(v) a_v) / (1^T W^(v) 1): the energy per unit of edge weight, so lowering every
    alpha (or giving neighbours disjoint views) no longer lowers the loss; only moving weight
    away from high-energy (e.g. corrupted) edges does. Uniform alpha gives Eq. 1 exactly.

    With ``present`` (views missing for some samples) view v's term is a mean over the pairs of
    samples that both have v: 2/V sum_v tr(Y^T L~^(v) Y) / m_v^2, m_v the rows present in v
    (:func:`present_pair_counts`), so a sparsely present view is not down-weighted by its
    absence. ``present=None`` is the complete-data formula, computed as before.

    Args:
      y: (m, k) orthogonalized fused output.
      affinities: (V, m, m) per-view affinities W^(v) (zero on rows where v is missing).
      view_weights: (m, V) per-sample view weights alpha; None gives Eq. 1/3 (all ones).
      present: (m, V) bool, True where the sample has the view; None: every view present.

    Returns:
      The scalar loss.
    """
    chex.assert_rank([y, affinities], [2, 3])
    n_views, m, _ = affinities.shape
    if view_weights is None:
        view_weights = jnp.ones((m, n_views), y.dtype)
    chex.assert_shape(view_weights, (m, n_views))
    # View by view: a fused sum_v W~^(v) would need an (m, m, V) contraction that XLA CPU runs slowly.
    terms = [weighted_rayleigh_trace(y, affinities[v], view_weights[:, v]) for v in range(n_views)]
    if mass_normalized:
        terms = [t / _relative_edge_mass(affinities[v], view_weights[:, v]) for v, t in enumerate(terms)]
    if present is not None:
        return _mean_over_present_pairs(terms, present)
    return cast(jax.Array, 2.0 * sum(terms) / (m * m * n_views))


def present_pair_counts(present: jax.Array) -> jax.Array:
    """m_v^2 per view, floored at 1: the number of ordered pairs of samples (i, j) that both have
    view v. present: (m, V) bool -> (V,) float32."""
    chex.assert_rank(present, 2)
    counts = jnp.sum(present.astype(jnp.float32), axis=0)
    return jnp.maximum(counts * counts, 1.0)


def _mean_over_present_pairs(terms: list[jax.Array], present: jax.Array) -> jax.Array:
    """2/V sum_v terms[v] / m_v^2: each view's energy averaged over its present pairs."""
    chex.assert_shape(present, (present.shape[0], len(terms)))
    pairs = present_pair_counts(present)
    return cast(jax.Array, 2.0 * sum(t / pairs[v] for v, t in enumerate(terms)) / len(terms))


def _relative_edge_mass(w: jax.Array, alpha: jax.Array) -> jax.Array:
    """(a^T W a) / (1^T W 1) for w (m, m), alpha (m,); floored at 1e-6 so a view whose weights
    are all zero (its energy is then 0 too) stays finite."""
    ratio = (alpha @ (w @ alpha)) / jnp.maximum(jnp.sum(w), jnp.finfo(w.dtype).tiny)
    return jnp.maximum(ratio, 1e-6)


def pairwise_spectral_loss(y: jax.Array, affinities: jax.Array, view_weights: jax.Array | None = None) -> jax.Array:
    """Eq. 1 (or Eq. 4 with weights) literally: 1/(m^2 V) sum_v sum_ij W~_ij ||y_i - y_j||^2.

    The reference form, for tests and diagnostics. y: (m, k), affinities: (V, m, m).
    """
    n_views, m, _ = affinities.shape
    sq = jnp.sum((y[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    if view_weights is not None:
        affinities = affinities * (view_weights.T[:, :, None] * view_weights.T[:, None, :])
    return jnp.sum(affinities * sq[None]) / (m * m * n_views)


def edge_laplacian_loss(
    y: jax.Array,
    senders: jax.Array,
    receivers: jax.Array,
    edge_weights: jax.Array,
    view_weights: jax.Array | None = None,
    *,
    mass_normalized: bool = False,
    present: jax.Array | None = None,
) -> jax.Array:
    """:func:`weighted_laplacian_loss` of graphs given as edge lists (the same value, in O(E k)).

    1/(m^2 V) sum_v sum_e W_e alpha_iv alpha_jv ||y_i - y_j||^2 over each view's listed edges
    e = (i, j): every ordered pair with its W_ij, or (half the work) each unordered pair once with
    W_ij + W_ji. Padding edges have weight 0.

    Args:
      y: (m, k) orthogonalized fused output.
      senders, receivers: (V, E) int row indices of each view's edges.
      edge_weights: (V, E) W^(v)_ij of each edge.
      view_weights: (m, V) per-sample view weights alpha; None gives Eq. 1 (all ones).
      present: (m, V) bool where views are missing (each view's term over its present pairs).
    """
    chex.assert_rank([y, senders, receivers, edge_weights], [2, 2, 2, 2])
    chex.assert_equal_shape([senders, receivers, edge_weights])
    n_views = senders.shape[0]
    m = y.shape[0]
    if view_weights is None:
        view_weights = jnp.ones((m, n_views), y.dtype)
    chex.assert_shape(view_weights, (m, n_views))
    terms = []
    for v in range(n_views):
        i, j, w = senders[v], receivers[v], edge_weights[v]
        pair = view_weights[i, v] * view_weights[j, v]
        energy = jnp.sum(w * pair * jnp.sum(jnp.square(y[i] - y[j]), axis=1))
        if mass_normalized:
            mass = jnp.sum(w * pair) / jnp.maximum(jnp.sum(w), jnp.finfo(w.dtype).tiny)
            energy = energy / jnp.maximum(mass, 1e-6)
        terms.append(energy)
    if present is not None:  # the edge energy is 2 tr(Y^T L Y): halve it for the shared formula
        return _mean_over_present_pairs([0.5 * t for t in terms], present)
    return cast(jax.Array, sum(terms) / (m * m * n_views))
