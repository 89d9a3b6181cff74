"""Synthetic data shared by the tests: bag-of-words counts, separated Gaussian clusters and standard normal rows."""

from __future__ import annotations

import numpy as np


def sparse_counts(n: int, d: int, *, seed: int, density: float = 0.03) -> np.ndarray:
    """A bag-of-words-like view: non-negative integer counts, mostly zero."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, d)) < density) * rng.integers(1, 5, size=(n, d))


def clustered(n: int, k: int, d: int, *, seed: int, spread: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, d), labels (n,)): k well separated Gaussian clusters."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = rng.standard_normal((k, d)) * 3.0
    return centres[labels] + spread * rng.standard_normal((n, d)), labels


def points(m: int, d: int, seed: int) -> np.ndarray:
    """(m, d) standard normal float32 rows."""
    return np.random.default_rng(seed).normal(size=(m, d)).astype(np.float32)
