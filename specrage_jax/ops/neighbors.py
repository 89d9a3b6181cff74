"""Host-side kNN lists (NumPy, scikit-learn) under the training graph's neighbour rule.

The rules that read a graph before training (the data-aware defaults) and the exact spectral
solution build the same kNN graph the jitted affinity builds in a batch
(:func:`specrage_jax.ops.affinity.knn_gaussian_affinity`), including its treatment of copies.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

from specrage_jax.ops.affinity import COPY_TOLERANCE


def copy_tolerance(x: np.ndarray) -> float:
    """COPY_TOLERANCE times the mean off-diagonal squared distance of the rows of x (n, d)
    (2 n / (n - 1) times their mean squared distance to the centroid)."""
    n = x.shape[0]
    centred = x - x.mean(axis=0, keepdims=True)
    mean_d2 = 2.0 * float(np.sum(centred * centred)) / max(n - 1, 1)
    return COPY_TOLERANCE * mean_d2


def knn_lists(x: np.ndarray, n_neighbors: int, *, distinct: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(squared distances, indices), both (n, l), of each row's l nearest other rows, nearest
    first. With ``distinct`` a non-empty row's copies (squared distance at most
    :func:`copy_tolerance`) take one slot between them: the lowest-index copy stays, the others
    are skipped (as :func:`specrage_jax.ops.affinity.without_copies`); a row with fewer than l
    others left is padded with +inf distances at its own index (no edge)."""
    x = np.asarray(x, np.float64)
    n, l = x.shape[0], n_neighbors
    if not 1 <= l <= n - 1:
        raise ValueError(f"n_neighbors={l} needs more than {l} rows, got {n}")
    search = NearestNeighbors(algorithm="brute").fit(x)
    if not distinct:
        dist, idx = search.kneighbors(n_neighbors=l)
        return np.square(dist), idx
    tol = copy_tolerance(x)
    non_empty = np.any(x != 0, axis=1)
    queried = l
    while True:
        dist, idx = search.kneighbors(n_neighbors=queried)
        d2 = np.square(dist)
        copies = (d2 <= tol) & non_empty[:, None]
        needed = l + int(copies.sum(axis=1).max())
        if needed <= queried or queried == n - 1:
            break
        queried = min(n - 1, needed)
    first = np.where(copies, idx, n).min(axis=1)  # each row's lowest-index copy (n: none)
    skipped = copies & (idx != first[:, None])
    order = np.argsort(skipped, axis=1, kind="stable")[:, :l]  # the rows kept first, nearest first
    d2 = np.take_along_axis(np.where(skipped, np.inf, d2), order, axis=1)
    idx = np.take_along_axis(idx, order, axis=1)
    return d2, np.where(np.isfinite(d2), idx, np.arange(n)[:, None])
