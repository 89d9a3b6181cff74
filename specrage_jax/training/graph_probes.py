"""Measurements of the training rows' graphs that the data-aware defaults read: seeded batches,
the views' nearest-neighbour lists, the mean kNN Gaussian graph of a batch (the training rule),
the bottom of its normalized and unnormalized Laplacian spectra, the relative eigengap, the views'
neighbour agreement and the normalized cut of a partition. The rules that decide from them are in
:mod:`specrage_jax.training.graph_rules`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from scipy.sparse.csgraph import connected_components

from specrage_jax.ops.neighbors import batch_knn_lists, knn_lists
from specrage_jax.ops.spectral import sparse_gaussian_graph
from specrage_jax.validation import missing_rows

DENSE_SPECTRUM_MAX_ROWS = 600  # up to here the spectrum is a dense eigvalsh, above it ARPACK
ZERO_EIGENVALUE = 1e-8  # normalized-Laplacian eigenvalues below this count as 0 (a component)


def bottom_normalized_spectrum(w: sp.csr_matrix, count: int) -> np.ndarray:
    """The ``count`` smallest eigenvalues of the normalized Laplacian I - D^-1/2 W D^-1/2 of a
    symmetric sparse graph w (n, n), ascending (an isolated row has eigenvalue 1). Dense up to
    DENSE_SPECTRUM_MAX_ROWS rows; above, each component's null vector D^1/2 1_C is known, so
    eigenvalue 0 counts the components exactly and ARPACK finds the rest on the operator with those
    directions removed. Lanczos alone does not resolve a repeated eigenvalue: on 10 separated blobs
    of 4,096 rows it returned 0 six times of ten, and a graph in exactly k components read an
    eigengap of about 1 instead of +inf."""
    degrees = np.asarray(w.sum(axis=1)).ravel()
    inv_sqrt = np.where(degrees > 0, 1.0 / np.sqrt(np.maximum(degrees, 1e-300)), 0.0)
    normalized = (sp.diags(inv_sqrt) @ w @ sp.diags(inv_sqrt)).tocsr()
    n = w.shape[0]
    if n <= DENSE_SPECTRUM_MAX_ROWS or count >= n - 1:
        top = np.linalg.eigvalsh(normalized.toarray())[::-1][:count]
        return np.clip(1.0 - top, 0.0, 2.0)
    _, component = connected_components(w, directed=False)
    if np.unique(component[degrees > 0]).size >= count:  # fragments: every eigenvalue asked for is 0
        return np.zeros(count)
    null = component_null_vectors(component, degrees)

    def deflated(x: np.ndarray) -> np.ndarray:
        return normalized @ x - null @ (null.T @ x)

    operator = sla.LinearOperator((n, n), matvec=deflated, dtype=np.float64)
    start = np.random.default_rng(0).standard_normal(n)
    rest = count - null.shape[1]
    top = np.sort(
        sla.eigsh(operator, k=rest, which="LA", v0=start, return_eigenvectors=False, tol=1e-6, maxiter=20 * n)
    )
    return np.concatenate([np.zeros(null.shape[1]), np.clip(1.0 - top[::-1], 0.0, 2.0)])


def component_null_vectors(component: np.ndarray, degrees: np.ndarray) -> np.ndarray:
    """(n, c) orthonormal: D^1/2 1_C (unit norm) for each of the c connected components C with
    edges (``component`` (n,) a graph's component labels, ``degrees`` (n,) its degrees), the
    eigenvectors of D^-1/2 W D^-1/2 with eigenvalue 1 (isolated rows have none)."""
    labels = np.unique(component[degrees > 0])
    vectors = np.zeros((component.size, labels.size))
    for j, label in enumerate(labels):
        inside = component == label
        vectors[inside, j] = np.sqrt(degrees[inside] / degrees[inside].sum())
    return vectors


def eigengap_score(spectrum: np.ndarray, n_clusters: int) -> float:
    """lambda_{k+1} / lambda_k of a normalized-Laplacian spectrum (ascending): how cleanly the
    graph splits into k groups. A graph with more than k components scores -inf (it splits
    the data into fragments, not clusters); exactly k components score +inf."""
    k = n_clusters
    if k >= len(spectrum):
        return -math.inf
    if spectrum[k] <= ZERO_EIGENVALUE:
        return -math.inf
    return math.inf if spectrum[k - 1] <= ZERO_EIGENVALUE else float(spectrum[k] / spectrum[k - 1])


def view_neighbor_agreement(neighbors: NeighborLists, m: int, l: int) -> float:
    """The share of their l nearest neighbours that two views' lists have in common (mean over
    view pairs, and over the batch's rows that have both views): 1 when the views see the same
    neighbourhoods, about l / m for unrelated views. NaN with fewer than two views.

    neighbors: per view (present positions in the m-row batch, squared distances, indices into
    the present rows), as :func:`present_neighbor_lists` gives them."""
    lists = []
    for present, _, idx in neighbors:
        if idx.shape[1] < l:
            return math.nan
        rows = np.full((m, l), -1, np.int64)
        rows[present] = present[idx[:, :l]]  # neighbours as batch positions
        lists.append((present, rows))
    shares = []
    for a in range(len(lists)):
        for b in range(a + 1, len(lists)):
            both = np.intersect1d(lists[a][0], lists[b][0])
            if both.size:
                left, right = lists[a][1][both], lists[b][1][both]  # (rows, l) each, no repeats in a row
                common = np.sum(left[:, :, None] == right[:, None, :], axis=(1, 2))
                shares.append(float(np.mean(common)) / l)
    return float(np.mean(shares)) if shares else math.nan


def seeded_rows(n: int, m: int, *, seed: int, stream: int) -> np.ndarray:
    """(min(m, n),) sorted row indices: a seeded batch of m of n rows (all of them when m >= n)."""
    return np.sort(np.random.default_rng([seed, stream]).choice(n, size=m, replace=False)) if m < n else np.arange(n)


NeighborLists = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def present_neighbor_lists(
    views: Sequence[np.ndarray], rows: np.ndarray, l: int, *, distinct: bool = True, as_trained: bool = True
) -> NeighborLists:
    """Per view with more than one present row among ``rows``: (its present positions in the
    batch, squared distances, indices) of each present row's min(l, present - 1) nearest present
    rows. A view's graph is built among the rows that have it, as in training, and with
    ``distinct`` a non-empty row's copies are not its neighbours (``graph.distinct_neighbors``).
    With ``as_trained`` the search is the jitted training graph's own (:func:`batch_knn_lists`):
    where rows tie at the l-th distance, the rules read the neighbours the loss will read (tied
    rows in index order); else it is the float64 search (:func:`knn_lists`) with ties left to
    rounding, an order the views do not share."""
    lists = []
    for x in views:
        batch = np.asarray(x)[rows]
        has_view = ~missing_rows(batch)
        present = np.flatnonzero(has_view)
        if len(present) > 1:
            count = min(l, len(present) - 1)
            if not as_trained:
                d2, idx = knn_lists(np.asarray(batch[present], np.float64), count, distinct=distinct, index_ties=False)
            elif len(present) == len(rows):
                d2, idx = batch_knn_lists(batch, count, distinct=distinct)
            else:
                d2, idx = present_rows_lists(
                    *batch_knn_lists(batch, count, present=has_view, distinct=distinct), present
                )
            lists.append((present, d2, idx))
    return lists


def present_rows_lists(d2: np.ndarray, idx: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lists (d2, idx (m, l), indices batch rows) of the ``present`` rows (p,), their indices
    turned into positions among the present rows: (p, l) each, +inf at a row's own position where
    it had no present neighbour left."""
    position = np.full(len(d2), -1)
    position[present] = np.arange(len(present))
    d2, idx = d2[present], position[idx[present]]
    return d2, np.where(np.isfinite(d2), idx, np.arange(len(present))[:, None])


def mean_graph(neighbors: NeighborLists, m: int, l: int) -> sp.csr_matrix:
    """The mean over views of the l-NN Gaussian graphs (the training rule) as one (m, m) graph."""
    graphs = [
        _graph_among(present, m, sparse_gaussian_graph(d2[:, :l], idx[:, :l], sigma_neighbor=min(l, idx.shape[1])))
        for present, d2, idx in neighbors
    ]
    return (sum(graphs[1:], graphs[0]) / len(graphs)).tocsr()


def batch_eigengap(
    views: Sequence[np.ndarray], rows: np.ndarray, l: int, n_clusters: int, *, distinct: bool = True
) -> float:
    """The relative eigengap lambda_k+1 / lambda_k (:func:`eigengap_score`) of the mean l-NN
    graph of the batch ``rows``, each view's graph among the rows that have it."""
    neighbors = present_neighbor_lists(views, rows, l, distinct=distinct)
    if not neighbors or n_clusters >= len(rows) - 1:
        return -math.inf
    return eigengap_score(bottom_normalized_spectrum(mean_graph(neighbors, len(rows), l), n_clusters + 1), n_clusters)


def _graph_among(rows: np.ndarray, m: int, graph: sp.csr_matrix) -> sp.csr_matrix:
    """``graph`` (len(rows), len(rows)) of the rows ``rows`` of an m-row batch as an (m, m) graph
    (the other rows isolated); ``graph`` itself when ``rows`` are all m."""
    if len(rows) == m:
        return graph
    coo = graph.tocoo()
    return sp.csr_matrix((coo.data, (rows[coo.row], rows[coo.col])), shape=(m, m))


def partition_ncut(w: sp.spmatrix, labels: np.ndarray, n_clusters: int) -> float:
    """The normalized cut sum_a cut(A, rest) / vol(A) of the partition ``labels`` (m,) of the
    symmetric graph w (m, m); empty and zero-volume parts add nothing."""
    onehot = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), labels)), shape=(len(labels), n_clusters))
    within = np.asarray((onehot.T @ sp.csr_matrix(w) @ onehot).diagonal()).ravel()
    volume = np.asarray(onehot.T @ np.asarray(w.sum(axis=1)).ravel()).ravel()
    parts = volume > 0
    return float(np.sum(np.maximum(volume[parts] - within[parts], 0.0) / volume[parts]))  # >= 0 despite rounding


def bottom_laplacian_eigenvectors(w: sp.spmatrix, count: int) -> np.ndarray:
    """(m, count) eigenvectors of the unnormalized Laplacian D - W of a symmetric graph w (m, m)
    with the smallest eigenvalues, ascending: what the network's loss is minimized by."""
    return bottom_laplacian_eigenpairs(w, count)[1]


def bottom_laplacian_eigenpairs(w: sp.spmatrix, count: int) -> tuple[np.ndarray, np.ndarray]:
    """((count,) eigenvalues ascending, (m, count) eigenvectors) of the unnormalized Laplacian
    D - W of a symmetric graph w (m, m), the smallest ones. Dense eigh up to
    DENSE_SPECTRUM_MAX_ROWS rows, else ARPACK in shift-invert mode."""
    degrees = np.asarray(w.sum(axis=1)).ravel()
    laplacian = sp.diags(degrees) - sp.csr_matrix(w)
    m = w.shape[0]
    if m <= DENSE_SPECTRUM_MAX_ROWS or count >= m - 1:
        values, vectors = np.linalg.eigh(laplacian.toarray())
        return values[:count], vectors[:, :count]
    shift = -1e-3 * max(float(degrees.mean()), 1e-12)  # below 0: L - shift I is positive definite
    start = np.random.default_rng(0).standard_normal(m)
    values, vectors = sla.eigsh(laplacian.tocsc(), k=count, sigma=shift, which="LM", v0=start)
    order = np.argsort(values)
    return values[order], vectors[:, order]
