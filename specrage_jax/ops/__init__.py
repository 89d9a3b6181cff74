"""Pure jax.numpy math of SpecRaGE: no Flax, no I/O."""

from specrage_jax.ops.affinity import (
    knn_gaussian_affinity,
    median_neighbor_scale,
    nearest_neighbors,
    pairwise_sq_distances,
    symmetrize,
)
from specrage_jax.ops.diagnostics import (
    grassmann_distance_sq,
    laplacian_quadratic_forms,
    orthonormal_basis,
)
from specrage_jax.ops.laplacian import (
    fused_weighted_affinity,
    laplacian,
    pairwise_spectral_loss,
    rayleigh_trace,
    weighted_affinity,
    weighted_laplacian_loss,
    weighted_rayleigh_trace,
)
from specrage_jax.ops.ortho import orthogonality_error, orthonormalizer
from specrage_jax.ops.spectral_scaling import heat_kernel_map, heat_kernel_weights, ritz_pairs
from specrage_jax.ops.weights import (
    view_weight_regularizer,
    weight_balance_penalty,
    weight_entropy_penalty,
)

__all__ = [
    "fused_weighted_affinity",
    "grassmann_distance_sq",
    "heat_kernel_map",
    "heat_kernel_weights",
    "knn_gaussian_affinity",
    "laplacian",
    "laplacian_quadratic_forms",
    "median_neighbor_scale",
    "nearest_neighbors",
    "orthogonality_error",
    "orthonormal_basis",
    "orthonormalizer",
    "pairwise_spectral_loss",
    "pairwise_sq_distances",
    "rayleigh_trace",
    "ritz_pairs",
    "symmetrize",
    "view_weight_regularizer",
    "weight_balance_penalty",
    "weight_entropy_penalty",
    "weighted_affinity",
    "weighted_laplacian_loss",
    "weighted_rayleigh_trace",
]
