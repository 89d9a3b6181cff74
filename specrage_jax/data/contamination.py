"""Seeded view contamination for the robustness experiments (the paper's Sec. 5.3).

* :func:`inject_outliers` — ADBench-style *global anomalies*: a contaminated sample's row of a
  view is replaced by values drawn uniformly in [alpha * min_j, alpha * max_j] per feature j
  (the feature's range over the clean data, scaled by alpha = 1.1).
* :func:`inject_noise` — additive Gaussian noise, sigma = 1.2 in units of each feature's standard
  deviation (i.e. N(0, 1.2^2) on standardized features), in one randomly chosen view per sample.

Both return the contaminated copies and the (n, V) boolean mask of what they changed; the input
arrays are never modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specrage_jax.validation import as_view_arrays


@dataclass(frozen=True)
class Contaminated:
    """Contaminated views (V arrays (n, d_v)) and ``mask`` (n, V) bool, True = row replaced/noised."""

    views: tuple[np.ndarray, ...]
    mask: np.ndarray


def _check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"contamination fraction must be in [0, 1], got {fraction}")


def _chosen_rows(n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """round(fraction * n) distinct sample indices, sorted."""
    return np.sort(rng.choice(n, size=int(round(fraction * n)), replace=False))


def _check_view_index(view: int, n_views: int) -> None:
    if not 0 <= view < n_views:
        raise ValueError(f"view {view} does not exist: the data has {n_views} views (0..{n_views - 1})")


def global_anomalies(x: np.ndarray, n_rows: int, *, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """(n_rows, d) rows uniform in [alpha * min_j, alpha * max_j] of x's (n, d) features (ADBench)."""
    low, high = alpha * x.min(axis=0), alpha * x.max(axis=0)
    low, high = np.minimum(low, high), np.maximum(low, high)  # a negative minimum scales outward too
    return rng.uniform(low, high, size=(n_rows, x.shape[1])).astype(x.dtype)


def inject_outliers(
    views: Sequence[np.ndarray], fraction: float, *, seed: int, view: int | None = 0, alpha: float = 1.1
) -> Contaminated:
    """Replaces ``fraction`` of the samples' rows of ``view`` by global anomalies.

    ``view=None`` contaminates every view, each with its own independently drawn samples (the
    paper's "20% outliers per view" on blobs).

    Raises:
      ValueError: for a fraction outside [0, 1], a view index out of range, alpha <= 0.
    """
    _check_fraction(fraction)
    if alpha <= 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    arrays = as_view_arrays(views, what="views to contaminate")
    n, n_views = arrays[0].shape[0], len(arrays)
    targets = range(n_views) if view is None else [view]
    for v in targets:
        _check_view_index(v, n_views)
    rng = np.random.default_rng(seed)
    out = [x.copy() for x in arrays]
    mask = np.zeros((n, n_views), bool)
    for v in targets:
        rows = _chosen_rows(n, fraction, rng)
        out[v][rows] = global_anomalies(arrays[v], rows.size, alpha=alpha, rng=rng)
        mask[rows, v] = True
    return Contaminated(views=tuple(out), mask=mask)


def inject_noise(views: Sequence[np.ndarray], fraction: float, *, seed: int, sigma: float = 1.2) -> Contaminated:
    """Adds N(0, (sigma * std_j)^2) to every feature j of one randomly chosen view, for
    ``fraction`` of the samples (std over the clean data; a constant feature gets no noise).

    Raises:
      ValueError: for a fraction outside [0, 1] or sigma < 0.
    """
    _check_fraction(fraction)
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    arrays = as_view_arrays(views, what="views to contaminate")
    n, n_views = arrays[0].shape[0], len(arrays)
    rng = np.random.default_rng(seed)
    rows = _chosen_rows(n, fraction, rng)
    which = rng.integers(n_views, size=rows.size)
    out = [x.copy() for x in arrays]
    mask = np.zeros((n, n_views), bool)
    mask[rows, which] = True
    for v in range(n_views):
        hit = rows[which == v]
        scale = sigma * arrays[v].std(axis=0)
        out[v][hit] += (rng.standard_normal((hit.size, arrays[v].shape[1])) * scale).astype(arrays[v].dtype)
    return Contaminated(views=tuple(out), mask=mask)
