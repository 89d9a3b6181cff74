"""kNN lists on the host under the training graph's neighbour rule, including its treatment of
copies (:func:`specrage_jax.ops.affinity.knn_gaussian_affinity`).

Two searches: :func:`batch_knn_lists` runs the jitted training graph's own search on a batch, so
the rules that read a graph before training (the data-aware defaults) see the very edges the loss
will read, ties at the l-th distance included; :func:`knn_lists` (scikit-learn, float64, any
number of rows) serves the exact spectral solution of a whole set.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.neighbors import NearestNeighbors

from specrage_jax.ops.affinity import ROUNDING_TOLERANCE, nearest_neighbors, neighbor_sq_distances


def rounding_step(x: np.ndarray) -> float:
    """ROUNDING_TOLERANCE times the mean off-diagonal squared distance of the rows of x (n, d)
    (2 n / (n - 1) times their mean squared distance to the centroid): the step of the grid on
    which distances tie, and the distance within which rows are copies."""
    n = x.shape[0]
    centred = x - x.mean(axis=0, keepdims=True)
    mean_d2 = 2.0 * float(np.sum(centred * centred)) / max(n - 1, 1)
    return ROUNDING_TOLERANCE * mean_d2


TIE_QUERY_GROWTH = 8  # cost bound: ties at the l-th distance are looked for among at most 8 l rows


def knn_lists(
    x: np.ndarray, n_neighbors: int, *, distinct: bool = True, index_ties: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(squared distances, indices), both (n, l), of each row's l nearest other rows, nearest
    first. With ``index_ties`` rows at distances equal on the grid of :func:`rounding_step` are
    ranked by index, as the jitted graph ranks them (:func:`~specrage_jax.ops.affinity.tie_keys`);
    a tie group running past ``TIE_QUERY_GROWTH`` times the rows needed is ranked by index among
    those (memory (n, 8 l)). Without, float64 rounding orders them. With ``distinct`` a non-empty
    row's copies (squared distance at most :func:`rounding_step`) take one slot between them: the
    lowest-index copy stays, the others are skipped (as
    :func:`specrage_jax.ops.affinity.without_copies`); a row with fewer than l others left is
    padded with +inf distances at its own index (no edge)."""
    x = np.asarray(x, np.float64)
    n, l = x.shape[0], n_neighbors
    if not 1 <= l <= n - 1:
        raise ValueError(f"n_neighbors={l} needs more than {l} rows, got {n}")
    search = NearestNeighbors(algorithm="brute").fit(x)
    step = rounding_step(x)
    non_empty = np.any(x != 0, axis=1)
    queried = l
    while True:
        dist, idx = search.kneighbors(n_neighbors=queried)
        d2 = np.square(dist)
        copies = (d2 <= step) & non_empty[:, None] if distinct else np.zeros_like(d2, bool)
        first = np.where(copies, idx, n).min(axis=1)  # each row's lowest-index copy (n: none)
        d2 = np.where(copies & (idx != first[:, None]), np.inf, d2)
        if index_ties:
            keys = np.round(d2 / step) if step > 0 else d2
            order = np.lexsort((idx, keys), axis=1)  # by key, then by index
        else:
            keys = d2
            order = np.argsort(keys, axis=1, kind="stable")  # the search's own order among equals
        d2, idx, keys = (np.take_along_axis(a, order, axis=1) for a in (d2, idx, keys))
        needed = l + int(copies.sum(axis=1).max())  # the copies skipped take no slot
        if queried == n - 1 or (not index_ties and needed <= queried):
            break
        farthest = np.max(np.where(np.isfinite(d2), keys, -np.inf), axis=1)  # rows not queried: at least this
        if needed <= queried and np.all(keys[:, l - 1] < farthest):  # no row left out could tie with the l-th
            break
        if index_ties and queried >= TIE_QUERY_GROWTH * needed:
            break  # a tie group running past this is ranked by index among the rows queried
        queried = min(n - 1, max(needed, 2 * queried if index_ties else needed))
    d2, idx = d2[:, :l], idx[:, :l]
    return d2, np.where(np.isfinite(d2), idx, np.arange(n)[:, None])


@functools.partial(jax.jit, static_argnames=("n_neighbors", "distinct"))
def _batch_lists(
    x: jax.Array, present: jax.Array | None, n_neighbors: int, distinct: bool
) -> tuple[jax.Array, jax.Array]:
    """The jitted training graph's neighbour search: x (m, d) float32 -> (sq_dists, indices) (m, l)."""
    return nearest_neighbors(neighbor_sq_distances(x, present=present, distinct=distinct), n_neighbors)


def batch_knn_lists(
    x: np.ndarray, n_neighbors: int, *, present: np.ndarray | None = None, distinct: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(squared distances float64, indices), both (m, l): each row's l nearest other rows of one
    view of a batch exactly as the loss reads them, computed in float32 by the functions that build
    the training graph (:func:`~specrage_jax.ops.affinity.neighbor_sq_distances`,
    :func:`~specrage_jax.ops.affinity.nearest_neighbors`). Rows at the same distance from a row (a
    binary or count view) are then ranked as in training, not by float64 rounding. ``present``
    (m,) bool: rows lacking the view are nobody's neighbour; a row left with fewer than l others
    is padded with +inf distances at its own index (no edge), as :func:`knn_lists`.

    Cost: (m, m) float32 distances, as in a training step: 64 MiB a matrix at the 4,096-row
    batches the rules read, 256 MiB at the 8,192 rows a batch with missing views may grow to."""
    rows = np.asarray(x, np.float32)
    mask = None if present is None else jnp.asarray(present, bool)
    if present is not None:  # training's graph inputs hold 0 where a view is missing
        rows = np.where(np.asarray(present, bool)[:, None], rows, np.float32(0.0))
    d2, idx = jax.device_get(_batch_lists(jnp.asarray(rows), mask, n_neighbors, distinct))
    d2 = np.asarray(d2, np.float64)
    return d2, np.where(np.isfinite(d2), np.asarray(idx), np.arange(len(rows))[:, None])
