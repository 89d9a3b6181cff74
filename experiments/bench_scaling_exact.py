"""The ``exact`` stage of experiments/bench_scaling.py, run in a child process: the non-parametric
solution SpecRaGE approximates, on all n points (brute-force kNN in row blocks, the kNN Gaussian
graph of each view, the averaged Laplacian and its bottom k eigenvectors by LOBPCG or eigsh)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling_processes import log


def exact_knn(x: np.ndarray, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force kNN of every row of x (n, d), itself excluded: (n, l) squared distances, indices."""
    import jax
    import jax.numpy as jnp

    n = x.shape[0]
    block = int(min(n, max(16, min(2048, 2**26 // n))))  # a (block, n) distance tile of at most 256 MB
    xd = jnp.asarray(x)
    sq = jnp.sum(xd * xd, axis=1)

    @jax.jit
    def tile(xd, sq, start):  # x passed in, not closed over: a closure would embed it as a constant
        rows = jax.lax.dynamic_slice_in_dim(xd, start, block)
        d2 = jnp.maximum(sq[start + jnp.arange(block)][:, None] + sq[None, :] - 2.0 * rows @ xd.T, 0.0)
        d2 = d2.at[jnp.arange(block), start + jnp.arange(block)].set(jnp.inf)
        neg, idx = jax.lax.top_k(-d2, n_neighbors)
        return -neg, idx

    dists, index = np.empty((n, n_neighbors), np.float32), np.empty((n, n_neighbors), np.int64)
    for start in range(0, n, block):
        s = min(start, n - block)  # the last tile overlaps the previous one: fixed shape
        d2, idx = tile(xd, sq, s)
        dists[s : s + block], index[s : s + block] = np.asarray(d2), np.asarray(idx)
    return dists, index


def knn_laplacian(dists: np.ndarray, index: np.ndarray, bandwidth_factor: float = 2.0):
    """L = D - (W + W^T)/2 (scipy CSR) of the kNN Gaussian graph of squared distances (n, l), sigma
    the median l-th neighbour distance: ``baselines.sparse_gaussian_graph`` + ``sparse_laplacian``."""
    from specrage_jax.ops.spectral import sparse_gaussian_graph, sparse_laplacian

    return sparse_laplacian(
        sparse_gaussian_graph(dists, index, sigma_neighbor=index.shape[1], bandwidth_factor=bandwidth_factor)
    )


def task_exact(p: dict) -> dict:
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla

    from specrage_jax.data.stream import open_views_memmap

    data = open_views_memmap(p["data"])
    start = time.perf_counter()
    views = data.rows(slice(None))  # O(n d) in RAM: the exact method needs every point
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    laplacians = [knn_laplacian(*exact_knn(x, p["n_neighbors"])) for x in views]
    l_bar = (sum(laplacians) / len(laplacians)).tocsr()
    del views, laplacians
    graph_s = time.perf_counter() - start
    log(f"  exact n={data.n}: graph {graph_s:.1f} s, solving")
    start = time.perf_counter()
    k, rng = p["k"], np.random.default_rng(p["seed"])
    if p["solver"] == "lobpcg":
        init = rng.standard_normal((data.n, k))
        jacobi = sp.diags(1.0 / np.maximum(l_bar.diagonal(), 1e-12))
        values, _vectors = sla.lobpcg(l_bar, init, M=jacobi, largest=False, tol=p["tol"], maxiter=p["maxiter"])
    else:
        bound = 2.0 * float(l_bar.diagonal().max())  # Gershgorin: the spectrum of L-bar is in [0, bound]
        shifted = sla.LinearOperator(l_bar.shape, matvec=lambda v: bound * v - l_bar @ v, dtype=np.float64)
        values, _vectors = sla.eigsh(shifted, k=k, which="LA", tol=p["tol"], v0=rng.standard_normal(data.n))
        values = bound - values
    solve_s = time.perf_counter() - start
    return {
        "n": data.n,
        "load_s": load_s,
        "graph_s": graph_s,
        "solve_s": solve_s,
        "total_s": load_s + graph_s + solve_s,
        "eigenvalues": sorted(float(v) for v in values),
        "nnz": int(l_bar.nnz),
        "solver": p["solver"],
    }
