"""The SpecRaGE objective of one batch: per-view graphs W^(v) built from the batch's affinity
inputs (:func:`batch_affinities`, balanced where views are missing), or given as a sparse
:class:`EdgeGraph`, and Eq. 4 of the orthogonalized output over them with the per-sample view
weights, plus the optional view-weight regularizers (:func:`spectral_objective`).

Pure functions (jit-able; :func:`edge_graph` is the host-side conversion of a fixed batch's
graph); the jitted training steps (:mod:`specrage_jax.training.steps`) call them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from specrage_jax.config import MISSING_VIEW_DEGREES, GraphConfig
from specrage_jax.ops.affinity import (
    degree_normalized_affinities,
    knn_gaussian_affinity,
    knn_gaussian_neighbors,
    view_count_balanced_affinities,
)
from specrage_jax.ops.laplacian import edge_laplacian_loss, weighted_laplacian_loss
from specrage_jax.ops.weights import view_weight_regularizer


class EdgeGraph(NamedTuple):
    """Per-view sparse graphs of one batch as padded edge lists: senders, receivers, weights,
    each (V, E); padding edges weigh 0. The loss sums w_e ||y_i - y_j||^2 over the listed edges,
    so a pair may be listed once with the weight of both directions."""

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array


def edge_graph(affinities: Any) -> EdgeGraph:
    """Dense per-view affinities (V, m, m) as an :class:`EdgeGraph` (host-side, once per fixed
    batch): each unordered pair i < j once, weighted W_ij + W_ji, which leaves
    sum_ij W_ij ||y_i - y_j||^2 and the edge mass unchanged (the diagonal is zero) at half the edges."""
    dense = np.asarray(affinities)
    dense = dense + np.swapaxes(dense, 1, 2)
    per_view = [np.nonzero(np.triu(w, k=1)) for w in dense]
    size = max(1, max(len(i) for i, _ in per_view))
    senders = np.zeros((len(dense), size), np.int32)
    receivers = np.zeros((len(dense), size), np.int32)
    weights = np.zeros((len(dense), size), dense.dtype)
    for v, (i, j) in enumerate(per_view):
        senders[v, : len(i)], receivers[v, : len(i)], weights[v, : len(i)] = i, j, dense[v][i, j]
    return EdgeGraph(jnp.asarray(senders), jnp.asarray(receivers), jnp.asarray(weights))


def neighbor_options(graph: GraphConfig) -> dict[str, Any]:
    """The kNN Gaussian weights' options ``graph`` sets (sigma's neighbour, c, self, copies)."""
    return {
        "scale_neighbor": graph.sigma_neighbor,
        "bandwidth_factor": graph.bandwidth_factor,
        "include_self": graph.include_self,
        "distinct": graph.distinct_neighbors,
    }


def batch_affinities(
    codes: Sequence[jax.Array], view_scales: jax.Array, graph: GraphConfig, mask: jax.Array | None = None
) -> jax.Array:
    """W^(v) for every view of a batch: V arrays (m, c_v) -> (V, m, m); complete batches scaled
    as ``graph.degree_normalization`` says (:func:`complete_batch_degrees`); with ``mask`` (m, V)
    each view's graph among the rows that have it, then balanced for the edges missing views
    take away as ``graph.missing_view_degrees`` says (:func:`missing_view_balanced`)."""
    per_batch = graph.scale_mode == "batch"
    if graph.scale_mode not in ("batch", "global"):
        raise ValueError(f"graph.scale_mode must be 'global' or 'batch', got {graph.scale_mode!r}")
    affinities = jnp.stack(
        [
            knn_gaussian_affinity(
                x,
                graph.n_neighbors,
                None if per_batch else view_scales[v],
                symmetrize_how=graph.symmetrize,
                present=None if mask is None else mask[:, v],
                **neighbor_options(graph),
            )
            for v, x in enumerate(codes)
        ]
    )
    if mask is None:
        return complete_batch_degrees(affinities, graph.degree_normalization)
    return missing_view_balanced(affinities, mask, graph.missing_view_degrees)


def reads_as_edges(graph: GraphConfig, mask: jax.Array | None) -> bool:
    """Whether Eq. 4 of a batch equals its value over each view's directed kNN edges
    (:func:`knn_edge_graph`): every view present (``mask`` None), a symmetrization Eq. 4 cannot
    tell from the directed graph ('mean' or 'none': the loss reads only W's symmetric part
    (W + W^T)/2, and sum_ij W_ij f_ij = sum_ij (W + W^T)_ij f_ij / 2 for symmetric f) and no degree
    normalization (which needs the symmetrized degrees)."""
    return mask is None and graph.symmetrize in ("mean", "none") and graph.degree_normalization == "none"


def knn_edge_graph(codes: Sequence[jax.Array], view_scales: jax.Array, graph: GraphConfig) -> EdgeGraph:
    """Every view's directed kNN graph of a complete batch as an :class:`EdgeGraph` of m * l edges:
    (i, j) for j among the l nearest rows of i, weighted W_ij (:func:`knn_gaussian_neighbors`).
    Where :func:`reads_as_edges` holds, Eq. 4 over it equals Eq. 4 over :func:`batch_affinities`'
    dense (V, m, m) graphs, at O(m l k) instead of O(m^2 k) and without the m x m scatter."""
    per_batch = graph.scale_mode == "batch"
    senders, receivers, weights = [], [], []
    for v, x in enumerate(codes):
        idx, values = knn_gaussian_neighbors(
            x, graph.n_neighbors, None if per_batch else view_scales[v], **neighbor_options(graph)
        )
        senders.append(jnp.repeat(jnp.arange(x.shape[0], dtype=idx.dtype), graph.n_neighbors))
        receivers.append(idx.reshape(-1))
        weights.append(values.reshape(-1))
    return EdgeGraph(jnp.stack(senders), jnp.stack(receivers), jnp.stack(weights))


def batch_graph(
    codes: Sequence[jax.Array], view_scales: jax.Array, graph: GraphConfig, mask: jax.Array | None = None
) -> jax.Array | EdgeGraph:
    """The graphs Eq. 4 reads for a batch built from its affinity inputs: directed kNN edge lists
    (:func:`knn_edge_graph`) where they give the same loss (:func:`reads_as_edges`), else the
    dense (V, m, m) :func:`batch_affinities`."""
    if reads_as_edges(graph, mask):
        if graph.scale_mode not in ("batch", "global"):
            raise ValueError(f"graph.scale_mode must be 'global' or 'batch', got {graph.scale_mode!r}")
        return knn_edge_graph(codes, view_scales, graph)
    return batch_affinities(codes, view_scales, graph, mask)


def complete_batch_degrees(affinities: jax.Array, how: str) -> jax.Array:
    """Per-view graphs (V, m, m) of a complete batch as ``graph.degree_normalization`` says:
    'samples' (:func:`degree_normalized_affinities`) or 'none' (as built)."""
    if how == "samples":
        return degree_normalized_affinities(affinities)
    if how == "none":
        return affinities
    raise ValueError(
        f"graph.degree_normalization must be 'none' or 'samples' when a batch's graph is built; got {how!r} "
        "('auto' is resolved by SpecRaGE.fit, `specrage train` or specrage_jax.training.defaults.resolve_defaults)"
    )


def missing_view_balanced(affinities: jax.Array, mask: jax.Array, how: str) -> jax.Array:
    """Per-view graphs (V, m, m) of a batch with missing views (mask (m, V)) made up for the edges
    the missing views take away: 'views' (:func:`view_count_balanced_affinities`), 'samples'
    (:func:`degree_normalized_affinities`) or 'none' (as built)."""
    if how == "views":
        return view_count_balanced_affinities(affinities, mask)
    if how == "samples":
        return degree_normalized_affinities(affinities)
    if how == "none":
        return affinities
    raise ValueError(f"graph.missing_view_degrees must be one of {', '.join(MISSING_VIEW_DEGREES)}; got {how!r}")


def spectral_objective(
    y: jax.Array,
    alpha: jax.Array,
    affinities: jax.Array | EdgeGraph,
    graph: GraphConfig,
    mask: jax.Array | None = None,
) -> jax.Array:
    """Eq. 4 of the orthogonalized output y (m, k) over the batch's graphs (dense (V, m, m) or an
    :class:`EdgeGraph`), the view weights alpha (m, V) in the affinity when
    ``graph.weights_in_affinity``, plus the view-weight regularizers (``graph.weight_balance``,
    ``graph.weight_entropy``; both 0 by default). ``mask`` (m, V): the present views."""
    loss_weights = alpha if graph.weights_in_affinity else None
    if isinstance(affinities, EdgeGraph):
        loss = edge_laplacian_loss(
            y,
            affinities.senders,
            affinities.receivers,
            affinities.weights,
            loss_weights,
            mass_normalized=graph.mass_normalized,
            present=mask,
        )
    else:
        loss = weighted_laplacian_loss(y, affinities, loss_weights, mass_normalized=graph.mass_normalized, present=mask)
    # static coefficients: with both 0 the regularizer is the constant 0 (no terms in the graph)
    return loss + view_weight_regularizer(
        alpha, balance=graph.weight_balance, entropy=graph.weight_entropy, present=mask
    )
