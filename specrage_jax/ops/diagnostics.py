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


def ritz_basis(y: np.ndarray, laplacian_sum: np.ndarray) -> np.ndarray:
    """The same subspace as y (n, k), rotated to the eigenvectors of L-bar restricted to it.

    The loss tr(Y^T L Y) is blind to a rotation of Y within its span, so the columns of a trained Y
    are an arbitrary basis of the learned subspace; Rayleigh-Ritz picks the basis Z = Q U (Q an
    orthonormal basis of span y, U the eigenvectors of Q^T L-bar Q, ascending) in which
    Z^T L-bar Z is diagonal. Then Z^T L^(v) Z is diagonal for every v exactly when the subspace
    jointly diagonalizes the L^(v). laplacian_sum: (n, n) -> (n, k), Z^T Z = I.
    """
    q = orthonormal_basis(y)
    _, u = np.linalg.eigh(q.T @ np.asarray(laplacian_sum, np.float64) @ q)
    return q @ u


def off_diagonal_ratio(m: np.ndarray) -> float:
    """||M - diag(M)||_F / ||M||_F of a square matrix (k, k): 0 diagonal, ~sqrt(1 - 1/k) for a
    random symmetric one."""
    m = np.asarray(m, np.float64)
    total = np.linalg.norm(m)
    return float(np.linalg.norm(m - np.diag(np.diag(m))) / total) if total > 0 else 0.0
