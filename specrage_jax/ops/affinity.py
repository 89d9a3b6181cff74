"""kNN Gaussian affinities of a batch (the paper's affinity equation).

    W_ij = exp(-||x_i - x_j||^2 / (c * sigma^2))  if x_j is one of the l nearest neighbours of x_i,
           0                                       otherwise,

with c = 2 in the paper (c = 1 in the published code). Pure jax.numpy; jit-able with
``n_neighbors`` and the option strings static.

Copies (``distinct``): the rows at zero distance from a non-empty row (identical documents,
repeated records) take one of its neighbour slots between them, as one point. Otherwise a group
of more than l copies is its own component of the kNN graph, and groups of fewer take most of
their members' edges: the bottom eigenvectors then pick out copy groups instead of clusters. A
pair of copies still links. All-zero rows (empty documents in a unit-row view) keep each other
as neighbours.

Ties: squared distances within ``ROUNDING_TOLERANCE`` of the batch's mean squared distance are
equal up to float32 rounding. The neighbours are ranked on that grid (:func:`tie_keys`), tied
rows by index, so on count and binary views, where many rows lie at the same distance, the graph
does not follow the rounding of the float32 sums (the order of the features, the CPU's vector
width).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp


def pairwise_sq_distances(x: jax.Array) -> jax.Array:
    """Squared Euclidean distances. x: (m, d) -> (m, m), non-negative, zero diagonal.

    The batch is centred first: distances do not change, and the float32 cancellation in
    |x|^2 + |y|^2 - 2 x.y stays small for features far from the origin.
    """
    chex.assert_rank(x, 2)
    x = x - jnp.mean(x, axis=0, keepdims=True)
    sq_norms = jnp.sum(x * x, axis=1)
    d2 = sq_norms[:, None] + sq_norms[None, :] - 2.0 * (x @ x.T)
    d2 = jnp.maximum(d2, 0.0)
    return d2 * (1.0 - jnp.eye(x.shape[0], dtype=d2.dtype))


ROUNDING_TOLERANCE = 1e-5  # squared distances this close, relative to the mean, are equal in float32


def mean_off_diagonal(d2: jax.Array) -> jax.Array:
    """The mean finite off-diagonal entry of d2 (m, m); 0 where there is none."""
    finite = ~jnp.eye(d2.shape[0], dtype=bool) & jnp.isfinite(d2)
    return jnp.sum(jnp.where(finite, d2, 0.0)) / jnp.maximum(jnp.sum(finite), 1)


def tie_keys(d2: jax.Array) -> jax.Array:
    """d2 (m, m) in steps of ``ROUNDING_TOLERANCE`` times its mean off-diagonal entry, rounded to
    the nearest step: distances equal up to float32 rounding get one key, so the nearest neighbours
    are ranked by row index among them (``lax.top_k`` puts the lower index first). Order is kept
    otherwise; +inf stays +inf."""
    step = ROUNDING_TOLERANCE * mean_off_diagonal(d2)
    return jnp.where(step > 0, jnp.round(d2 / jnp.where(step > 0, step, 1.0)), d2)


def copy_pairs(x: jax.Array, d2: jax.Array) -> jax.Array:
    """(m, m) bool: i != j, row i not all zero, and d2_ij at most ROUNDING_TOLERANCE times the
    mean finite off-diagonal squared distance (exact copies, up to float32 rounding).
    x: (m, d) the rows d2 (m, m) was computed from."""
    chex.assert_rank([x, d2], [2, 2])
    finite = ~jnp.eye(x.shape[0], dtype=bool) & jnp.isfinite(d2)
    non_empty = jnp.any(x != 0, axis=1)
    return finite & (d2 <= ROUNDING_TOLERANCE * mean_off_diagonal(d2)) & non_empty[:, None]


def without_copies(x: jax.Array, d2: jax.Array) -> jax.Array:
    """d2 (m, m) with the pairs of :func:`copy_pairs` at +inf except each row's first copy (the
    lowest index): a row's copies take one neighbour slot between them."""
    copies = copy_pairs(x, d2)
    first = jnp.argmax(copies, axis=1)  # the lowest-index copy (0 where a row has none: masked below)
    kept = jnp.zeros_like(copies).at[jnp.arange(copies.shape[0]), first].set(True) & copies
    return jnp.where(copies & ~kept, jnp.inf, d2)


def neighbor_sq_distances(x: jax.Array, *, present: jax.Array | None = None, distinct: bool = False) -> jax.Array:
    """The squared distances the l nearest neighbours are picked from: x (m, d) -> (m, m), +inf
    between rows of which one lacks the view (``present`` (m,) bool) and, with ``distinct``,
    between a row and all but its first copy (:func:`without_copies`)."""
    if present is None:
        d2 = pairwise_sq_distances(x)
    else:
        chex.assert_shape(present, (x.shape[0],))
        both = present[:, None] & present[None, :]
        d2 = jnp.where(both, pairwise_sq_distances(jnp.where(present[:, None], x, 0.0)), jnp.inf)
    return without_copies(x, d2) if distinct else d2


def nearest_neighbors(d2: jax.Array, n_neighbors: int, *, include_self: bool = False) -> tuple[jax.Array, jax.Array]:
    """The l nearest neighbours of every row by squared distance.

    Args:
      d2: (m, m) squared distances.
      n_neighbors: l; with ``include_self`` the point itself is the first of the l.

    Returns:
      (sq_dists, indices), both (m, l), sorted nearest first; rows at distances equal up to
      float32 rounding (:func:`tie_keys`) in index order.
    """
    m = d2.shape[0]
    limit = m if include_self else m - 1
    if not 1 <= n_neighbors <= limit:
        raise ValueError(f"n_neighbors={n_neighbors} needs a batch of more than {n_neighbors} samples, got m={m}")
    if not include_self:
        d2 = d2 + jnp.diag(jnp.full((m,), jnp.inf, d2.dtype))
    _, idx = jax.lax.top_k(-tie_keys(d2), n_neighbors)  # lax.top_k: fast on XLA CPU, unlike a full sort
    return jnp.take_along_axis(d2, idx, axis=1), idx


def median_neighbor_scale(knn_sq_dists: jax.Array, scale_neighbor: int) -> jax.Array:
    """sigma: median over rows of the distance to the ``scale_neighbor``-th neighbour (1-based).

    Zero distances (exact duplicates) and infinite ones (no such neighbour) are ignored; if none
    is left, sigma = 1, which is harmless: then all those neighbours have distance 0 and affinity
    1, or none, for any sigma.
    knn_sq_dists: (m, l) -> () scalar.
    """
    chex.assert_rank(knn_sq_dists, 2)
    dist = jnp.sqrt(knn_sq_dists[:, scale_neighbor - 1])
    positive = jnp.where((dist > 0) & jnp.isfinite(dist), dist, jnp.nan)
    sigma = jnp.nanmedian(positive)
    return jnp.where(jnp.isnan(sigma), 1.0, sigma)


def present_neighbor_scale(knn_sq_dists: jax.Array, present: jax.Array, scale_neighbor: int) -> jax.Array:
    """sigma of a view present on only some rows: the median over the present rows of the distance
    to their ``scale_neighbor``-th present neighbour, or to their farthest present one when fewer
    are present. Zero and infinite distances are ignored; sigma = 1 when none is left.

    knn_sq_dists: (m, l) squared distances, nearest first, inf where no present neighbour is left;
    present: (m,) bool -> () scalar.
    """
    chex.assert_rank([knn_sq_dists, present], [2, 1])
    others = jnp.sum(present) - 1  # every present row has the same number of present others
    column = jnp.clip(jnp.minimum(scale_neighbor, others), 1, knn_sq_dists.shape[1]) - 1
    dist = jnp.sqrt(jnp.take(knn_sq_dists, column, axis=1))
    usable = present & jnp.isfinite(dist) & (dist > 0)
    sigma = jnp.nanmedian(jnp.where(usable, dist, jnp.nan))
    return jnp.where(jnp.isnan(sigma), 1.0, sigma)


def symmetrize(w: jax.Array, how: str) -> jax.Array:
    """(m, m) -> (m, m): 'mean' (W + W^T)/2, 'max' elementwise max, 'none' unchanged."""
    if how == "mean":
        return 0.5 * (w + w.T)
    if how == "max":
        return jnp.maximum(w, w.T)
    if how == "none":
        return w
    raise ValueError(f"symmetrize must be 'mean', 'max' or 'none', got {how!r}")


def knn_gaussian_neighbors(
    x: jax.Array,
    n_neighbors: int,
    scale: jax.Array | float | None = None,
    *,
    scale_neighbor: int | None = None,
    bandwidth_factor: float = 2.0,
    include_self: bool = False,
    present: jax.Array | None = None,
    distinct: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """Each row's l nearest neighbours in one view of a batch and their kNN Gaussian weights: the
    rows of the directed graph :func:`knn_gaussian_affinity` scatters and symmetrizes.

    Args: as :func:`knn_gaussian_affinity` (x (m, d), l, sigma or None for this batch's).

    Returns:
      (indices (m, l) int, weights (m, l)): W_ij = exp(-d_ij^2 / (c sigma^2)) for j the l nearest
      rows of i, nearest first; 0 for i itself (``include_self``) and for neighbours that are not
      there (absent rows, removed copies).
    """
    chex.assert_rank(x, 2)
    m = x.shape[0]
    d2 = neighbor_sq_distances(x, present=present, distinct=distinct)
    knn_d2, idx = nearest_neighbors(d2, n_neighbors, include_self=include_self)  # absent rows: at inf
    if scale is None:
        scale = (
            median_neighbor_scale(knn_d2, scale_neighbor or n_neighbors)
            if present is None
            else present_neighbor_scale(knn_d2, present, scale_neighbor or n_neighbors)
        )
    values = jnp.exp(-knn_d2 / (bandwidth_factor * jnp.square(scale))).astype(x.dtype)
    self_loops = idx == jnp.arange(m)[:, None]  # self-loops do not change the Laplacian
    return idx, jnp.where(self_loops, jnp.zeros((), x.dtype), values)


def knn_gaussian_affinity(
    x: jax.Array,
    n_neighbors: int,
    scale: jax.Array | float | None = None,
    *,
    scale_neighbor: int | None = None,
    bandwidth_factor: float = 2.0,
    include_self: bool = False,
    symmetrize_how: str = "mean",
    present: jax.Array | None = None,
    distinct: bool = False,
) -> jax.Array:
    """The kNN Gaussian affinity of one view of a batch.

    With ``present`` (m,) bool (a view only some rows have) the graph is built among the present
    rows alone: an absent row has no edges (zero row and column) and is nobody's neighbour, and a
    per-batch sigma is measured on present rows (:func:`present_neighbor_scale`). A present row
    with fewer than l present others keeps the ones there are; a view present on fewer than two
    rows has no edges at all. With every row present the graph is the same as without.

    Args:
      x: (m, d) inputs of one view (raw features or Siamese codes); absent rows may hold anything
        finite (e.g. zeros).
      n_neighbors: l.
      scale: sigma; None takes it from this batch (median distance to the
        ``scale_neighbor``-th neighbour).
      scale_neighbor: which neighbour sets a per-batch sigma; None means l.
      bandwidth_factor: c in exp(-d^2 / (c sigma^2)).
      include_self: count the point itself among its l neighbours.
      symmetrize_how: 'mean', 'max' or 'none' (directed kNN graph).
      present: (m,) bool, True where the row has this view; None: every row has it.
      distinct: a non-empty row's copies (:func:`copy_pairs`) take one neighbour slot between
        them (:func:`without_copies`); a row with fewer than l others left keeps the ones there are.

    Returns:
      W: (m, m), non-negative, zero diagonal (and zero on absent rows and columns), symmetric
      unless 'none'.
    """
    idx, values = knn_gaussian_neighbors(
        x,
        n_neighbors,
        scale,
        scale_neighbor=scale_neighbor,
        bandwidth_factor=bandwidth_factor,
        include_self=include_self,
        present=present,
        distinct=distinct,
    )
    m = x.shape[0]
    w = jnp.zeros((m, m), x.dtype).at[jnp.arange(m)[:, None], idx].set(values)
    return symmetrize(w, symmetrize_how)


def degree_normalized_affinities(affinities: jax.Array) -> jax.Array:
    """W^(v)_ij / sqrt(d_i d_j) * mean_i d_i for every view, d_i = sum_v sum_j W^(v)_ij the degree
    of sample i in the views' summed graph (rows without an edge keep none; the mean is over the
    rows with one). A sample seen through fewer views has fewer edges, and the unnormalized
    Laplacian then splits it off cheaply; after scaling the rows' summed degrees lie closer to
    their mean. affinities: (V, m, m) symmetric -> (V, m, m)."""
    chex.assert_rank(affinities, 3)
    degrees = jnp.sum(affinities, axis=(0, 2))
    has_edges = degrees > 0
    inv_sqrt = jnp.where(has_edges, jax.lax.rsqrt(jnp.where(has_edges, degrees, 1.0)), 0.0)
    mean_degree = jnp.sum(degrees) / jnp.maximum(jnp.sum(has_edges), 1)
    return affinities * (inv_sqrt[:, None] * inv_sqrt[None, :])[None] * mean_degree


def view_count_balanced_affinities(affinities: jax.Array, present: jax.Array) -> jax.Array:
    """W^(v)_ij s_i s_j for every view, s_i = sqrt(D / D_i): D the sum over the views of their mean
    degree (over the rows that have the view), D_i that sum over sample i's own views.

    A sample seen through fewer views loses the edges of the views it lacks, and the unnormalized
    Laplacian then splits it off cheaply. The scale at both ends keeps the graph symmetric: an edge
    between two samples that lack the same views regains the full factor D / D_i, an edge to a
    complete neighbour sqrt(D / D_i), so a one-view sample among complete ones reaches about the
    geometric mean of its own degree and a complete sample's. Nothing else changes: a sample's
    edges keep their relative weights, and every s_i is 1 where no view is missing (hubs and
    outliers keep their degrees, unlike :func:`degree_normalized_affinities`).
    affinities: (V, m, m), present: (m, V) bool -> (V, m, m).
    """
    chex.assert_rank([affinities, present], [3, 2])
    chex.assert_equal(affinities.shape[0], present.shape[1])
    has_view = present.T.astype(affinities.dtype)  # (V, m)
    degrees = jnp.sum(affinities, axis=2)  # (V, m)
    mean_degree = jnp.sum(degrees * has_view, axis=1) / jnp.maximum(jnp.sum(has_view, axis=1), 1.0)
    expected = mean_degree @ has_view  # (m,): D_i
    has_edges = expected > 0
    scale = jnp.where(has_edges, jnp.sqrt(jnp.sum(mean_degree) / jnp.where(has_edges, expected, 1.0)), 0.0)
    return affinities * (scale[:, None] * scale[None, :])[None]
