"""Synthetic multi-view datasets built from scikit-learn generators (no download)."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits, make_blobs

from specrage_jax.data.types import MultiViewData


def regular_polygon_centers(n_centers: int, radius: float) -> np.ndarray:
    """(n_centers, 2) vertices of a regular polygon of the given radius around the origin."""
    angles = 2.0 * np.pi * np.arange(n_centers) / n_centers
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def rotation_matrix_2d(angle: float) -> np.ndarray:
    """(2, 2) counter-clockwise rotation by `angle` radians: orthogonal with determinant +1."""
    cos, sin = np.cos(angle), np.sin(angle)
    return np.array([[cos, -sin], [sin, cos]])


def make_blobs_views(
    n_samples: int = 3000,
    n_centers: int = 5,
    *,
    radius: float = 5.0,
    cluster_std: float = 0.5,
    seed: int = 0,
) -> MultiViewData:
    """The paper's synthetic set: 2-D blobs, and the same points under a random rotation.

    Returns:
      MultiViewData "blobs" with views (n_samples, 2) "original" and (n_samples, 2) "rotated",
      labels (n_samples,) in 0..n_centers-1.
    """
    if n_centers < 1 or n_samples < n_centers:
        raise ValueError(f"blobs: need 1 <= n_centers <= n_samples, got n_centers={n_centers}, n_samples={n_samples}")
    if radius <= 0 or cluster_std < 0:
        raise ValueError(f"blobs: need radius > 0 and cluster_std >= 0, got {radius}, {cluster_std}")
    points, labels = make_blobs(
        n_samples=n_samples,
        centers=regular_polygon_centers(n_centers, radius),
        cluster_std=cluster_std,
        random_state=seed,
    )
    angle = np.random.default_rng(seed).uniform(0.0, 2.0 * np.pi)
    rotated = points @ rotation_matrix_2d(angle).T
    return MultiViewData(views=(points, rotated), labels=labels, name="blobs", view_names=("original", "rotated"))


def same_class_partners(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(n,) index j != i of another sample with the same label, uniform among them, for each i.

    A sample alone in its class is its own partner.
    """
    partners = np.arange(labels.shape[0])
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if members.size < 2:
            continue
        # A shift in 1..m-1 around the class's members never lands on the sample itself.
        shifts = rng.integers(1, members.size, size=members.size)
        partners[members] = members[(np.arange(members.size) + shifts) % members.size]
    return partners


def make_digits_views(*, noise_std: float = 0.2, seed: int = 0) -> MultiViewData:
    """scikit-learn's 8x8 digits in two views, after the paper's NoisyMNIST recipe.

    View 1 is the image, pixels scaled to [0, 1]; view 2 row i is another image of the same
    digit plus N(0, noise_std^2) noise per pixel (not clipped).

    Returns:
      MultiViewData "digits" with views (1797, 64) "image" and (1797, 64) "same_class_noisy",
      labels (1797,) in 0..9.
    """
    if noise_std < 0:
        raise ValueError(f"digits: noise_std must be >= 0, got {noise_std}")
    digits = load_digits()
    images = digits.data / 16.0
    labels = digits.target
    rng = np.random.default_rng(seed)
    partners = same_class_partners(labels, rng)
    noisy = images[partners] + rng.normal(0.0, noise_std, size=images.shape)
    return MultiViewData(views=(images, noisy), labels=labels, name="digits", view_names=("image", "same_class_noisy"))
