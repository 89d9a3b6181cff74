"""Diagnostics from the paper's appendix: subspace distance and Y^T L^(v) Y (NumPy)."""

from __future__ import annotations

import numpy as np


def orthonormal_basis(a: np.ndarray) -> np.ndarray:
    """An orthonormal basis of the column space of a (n, k), via reduced QR. -> (n, k)."""
    q, _ = np.linalg.qr(np.asarray(a, dtype=np.float64))
    return q


def grassmann_distance_sq(a: np.ndarray, b: np.ndarray) -> float:
    """Squared Grassmann distance: sum of squared sines of the principal angles, in [0, k].

    a, b: (n, k) whose column spaces are compared.
    """
    if a.shape != b.shape:
        raise ValueError(f"subspaces must have the same shape, got {a.shape} and {b.shape}")
    cosines = np.linalg.svd(orthonormal_basis(a).T @ orthonormal_basis(b), compute_uv=False)
    return float(np.sum(1.0 - np.clip(cosines, 0.0, 1.0) ** 2))


def laplacian_quadratic_forms(y: np.ndarray, laplacians: np.ndarray) -> np.ndarray:
    """Y^T L^(v) Y for each view: y (n, k), laplacians (V, n, n) -> (V, k, k)."""
    return np.einsum("ia,vij,jb->vab", y, laplacians, y)
