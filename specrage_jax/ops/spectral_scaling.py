"""Heat-kernel scaling of the directions beyond the k-th: the output map P, Y -> Y P.

The loss tr(Y^T L Y) is the same for every rotation of Y's c orthogonal columns, so a trained
network ends on an arbitrary rotation of (an approximation of) the bottom eigen-subspace of the
graph's Laplacian, every direction with the same variance. With more components than clusters
(c > k: the data rule adds directions where the bottom k may miss one that separates two
clusters), k-means then weighs the extra directions' within-cluster spread as much as the
directions that split clusters, and may split one cluster and merge two others that the
embedding keeps apart (an SVM on the same rows still separates them).

Rayleigh-Ritz on the learned subspace recovers its eigen-directions and their eigenvalues: the
generalized eigenproblem (Y^T L Y) u = lambda (Y^T Y) u on a batch. The bottom k directions keep
their weight; direction j > k is scaled by the heat kernel relative to the k-th,
exp(-(lambda_j - lambda_k) / lambda_k): the direction one lambda_k dearer than the k-th decays by
1/e (the weighting of diffusion maps, at the time the k-th direction's own decay is 1/e). With
c <= k the map is the identity: the output stays as trained.
"""

from __future__ import annotations

import chex
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import Array


def ritz_pairs(quadratic: Array, gram: Array) -> tuple[Array, Array]:
    """((k,) eigenvalues ascending, (k, k) eigenvectors U) of quadratic u = lambda gram u, with
    U^T gram U = I. quadratic: Y^T L Y (k, k) symmetric; gram: Y^T Y (k, k) positive definite."""
    chex.assert_rank([quadratic, gram], [2, 2])
    chex.assert_equal_shape([quadratic, gram])
    chol = jnp.linalg.cholesky(0.5 * (gram + gram.T))
    half = jsl.solve_triangular(chol, jsl.solve_triangular(chol, quadratic, lower=True).T, lower=True)
    values, vectors = jnp.linalg.eigh(0.5 * (half + half.T))  # C^-1 Q C^-T v = lambda v
    return values, jsl.solve_triangular(chol.T, vectors, lower=False)  # u = C^-T v


def heat_kernel_weights(eigenvalues: Array, n_clusters: int) -> Array:
    """1 for the first k = min(n_clusters, c) of the ascending eigenvalues (c,), then
    exp(-(lambda_j - lambda_k) / lambda_k); scaled to a mean square of 1. A k-th eigenvalue at 0
    (k or more components cut apart): the directions beyond it with a positive eigenvalue go to 0."""
    chex.assert_rank(eigenvalues, 1)
    c = eigenvalues.shape[0]
    values = jnp.maximum(eigenvalues, 0.0)
    floor = 1e-6 * jnp.maximum(jnp.max(values), 1e-30)
    kth = values[min(n_clusters, c) - 1]
    weights = jnp.exp(-jnp.maximum(values - kth, 0.0) / jnp.maximum(kth, floor))
    return weights / jnp.sqrt(jnp.mean(jnp.square(weights)))


def heat_kernel_map(quadratic: Array, gram: Array, n_clusters: int) -> Array:
    """The output map P (c, c) of Y with Y^T L Y = ``quadratic`` and Y^T Y = ``gram`` on a batch:
    for c > k = ``n_clusters``, Y rotated to its Ritz directions (:func:`ritz_pairs`, ascending)
    and scaled by :func:`heat_kernel_weights`, keeping the total variance (||Y P||_F = ||Y||_F on
    the batch); for c <= k the identity."""
    chex.assert_equal_shape([quadratic, gram])
    c = gram.shape[0]
    if c <= n_clusters:
        return jnp.eye(c, dtype=gram.dtype)
    values, vectors = ritz_pairs(quadratic, gram)
    size = jnp.sqrt(jnp.trace(gram) / c)
    return vectors * (size * heat_kernel_weights(values, n_clusters))[None, :]
