"""The exact (transductive) solution SpecRaGE approximates: bottom-k eigenvectors of the
summed kNN Gaussian Laplacian of a whole sample set, with the same graph settings."""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from specrage_jax.config import GraphConfig
from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.neighbors import knn_lists


def full_graph_affinities(codes: Sequence[np.ndarray], graph: GraphConfig) -> np.ndarray:
    """W^(v) of the whole set (no batching), sigma from the set itself: -> (V, n, n) float64."""
    affinities = []
    for x in codes:
        w = knn_gaussian_affinity(
            jnp.asarray(x, jnp.float32),
            graph.n_neighbors,
            None,
            scale_neighbor=graph.sigma_neighbor,
            bandwidth_factor=graph.bandwidth_factor,
            include_self=graph.include_self,
            symmetrize_how=graph.symmetrize,
            distinct=graph.distinct_neighbors,
        )
        affinities.append(np.asarray(w, np.float64))
    return np.stack(affinities)


DENSE_EIGH_MAX_ROWS = 4000  # above this, a sparse kNN graph and ARPACK instead of dense (n, n) matrices


def mean_laplacian_eigenvectors(
    codes: Sequence[np.ndarray], n_components: int, graph: GraphConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues (k,), eigenvectors (n, k)) of L-bar = sum_v L^(v), smallest first.

    The sum and the mean of the Laplacians share eigenvectors; this is Eq. 3's exact minimizer
    under Y^T Y = I on the given set. Dense NumPy eigh up to DENSE_EIGH_MAX_ROWS rows, else the
    same graph as a sparse matrix and ARPACK in shift-invert mode (memory O(n l)).
    """
    if len(codes[0]) > DENSE_EIGH_MAX_ROWS:
        return sparse_bottom_eigenvectors(
            sum(sparse_laplacian(sparse_knn_affinity(x, graph)) for x in codes), n_components
        )
    l_bar = sum(laplacian_np(w) for w in full_graph_affinities(codes, graph))
    values, vectors = np.linalg.eigh(l_bar)
    return values[:n_components], vectors[:, :n_components]


def present_pairs_laplacian_eigenvectors(
    codes: Sequence[np.ndarray], present: np.ndarray, n_components: int, graph: GraphConfig
) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues (k,), eigenvectors (n, k)) of L-bar = sum_v L^(v) on incomplete data: each
    view's kNN graph (:func:`sparse_knn_affinity`) is built among the rows that have the view
    (``present`` (n, V) bool; the other rows have no edges in it). The exact, transductive
    counterpart of training with missing views. Dense eigh up to DENSE_EIGH_MAX_ROWS rows, else ARPACK.

    Raises:
      ValueError: naming a view present on no more than ``graph.n_neighbors`` rows.
    """
    n = len(codes[0])
    total = sp.csr_matrix((n, n))
    for v, x in enumerate(codes):
        rows = np.flatnonzero(present[:, v])
        if len(rows) <= graph.n_neighbors:
            raise ValueError(f"view {v} is present on {len(rows)} rows, too few for {graph.n_neighbors} neighbours")
        part = sparse_knn_affinity(np.asarray(x)[rows], graph).tocoo()
        w = sp.csr_matrix((part.data, (rows[part.row], rows[part.col])), shape=(n, n))
        total = total + sparse_laplacian(w)
    if n > DENSE_EIGH_MAX_ROWS:
        return sparse_bottom_eigenvectors(total, n_components)
    values, vectors = np.linalg.eigh(total.toarray())
    return values[:n_components], vectors[:, :n_components]


def sparse_knn_affinity(x: np.ndarray, graph: GraphConfig) -> sp.csr_matrix:
    """W of one view of the whole set as a sparse (n, n) float64 matrix, by the rule of
    `ops.affinity.knn_gaussian_affinity` (sigma from the set itself, zero distances ignored).
    A directed graph ('none') is returned as is; `sparse_laplacian` uses its symmetric part."""
    n, l = len(x), graph.n_neighbors
    others = l - 1 if graph.include_self else l
    sq_dists, idx = knn_lists(x, others, distinct=graph.distinct_neighbors)  # excludes each point itself
    if graph.include_self:
        sq_dists = np.concatenate([np.zeros((n, 1)), sq_dists], axis=1)
        idx = np.concatenate([np.arange(n)[:, None], idx], axis=1)
    return sparse_gaussian_graph(
        sq_dists,
        idx,
        sigma_neighbor=graph.sigma_neighbor,
        bandwidth_factor=graph.bandwidth_factor,
        symmetrize=graph.symmetrize,
    )


def sparse_gaussian_graph(
    sq_dists: np.ndarray,
    index: np.ndarray,
    *,
    sigma_neighbor: int,
    bandwidth_factor: float = 2.0,
    symmetrize: str = "mean",
) -> sp.csr_matrix:
    """The kNN Gaussian graph from each row's neighbours: sq_dists, index (n, l), nearest first.

    sigma = median over rows of the distance to the ``sigma_neighbor``-th neighbour (zero and
    infinite distances ignored; 1 if none is left), W_ij = exp(-d_ij^2 / (c sigma^2)), no self-loops; symmetrized
    'mean' (W + W^T)/2, 'max', or 'none' (directed). -> (n, n) float64 CSR.
    """
    n, l = index.shape
    scale_dist = np.sqrt(sq_dists[:, sigma_neighbor - 1])
    usable = scale_dist[(scale_dist > 0) & np.isfinite(scale_dist)]
    sigma = float(np.median(usable)) if usable.size else 1.0
    values = np.exp(-np.asarray(sq_dists, np.float64) / (bandwidth_factor * sigma**2))
    w = sp.csr_matrix((values.ravel(), (np.repeat(np.arange(n), l), index.ravel())), shape=(n, n))
    w.setdiag(0.0)
    w.eliminate_zeros()
    if symmetrize == "mean":
        return ((w + w.T) / 2).tocsr()
    if symmetrize == "max":
        return w.maximum(w.T).tocsr()
    return w


def sparse_laplacian(w: sp.spmatrix) -> sp.csr_matrix:
    """L = D - W of the symmetric part of W: (n, n) sparse."""
    sym = (w + w.T) / 2
    return (sp.diags(np.asarray(sym.sum(axis=1)).ravel()) - sym).tocsr()


def sparse_bottom_eigenvectors(laplacian: sp.spmatrix, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """The k smallest eigenpairs of a sparse PSD Laplacian by ARPACK shift-invert just below 0."""
    shift = -1e-6 * max(float(laplacian.diagonal().mean()), 1e-12)
    start = np.random.default_rng(0).standard_normal(laplacian.shape[0])
    values, vectors = sla.eigsh(laplacian.tocsc(), k=n_components, sigma=shift, which="LM", v0=start)
    order = np.argsort(values)
    return values[order], vectors[:, order]


def laplacian_np(w: np.ndarray) -> np.ndarray:
    """L = D - W in float64 NumPy. w: (n, n) -> (n, n)."""
    return np.diag(w.sum(axis=1)) - w
