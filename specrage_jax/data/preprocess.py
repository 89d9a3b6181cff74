"""Per-view feature scaling, fitted on the training split and applied to every split; optionally
each row then scaled to unit L2 norm (cosine geometry, e.g. for bag-of-words views)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from specrage_jax.validation import as_view_arrays

SCALER_KINDS = ("standard", "minmax", "none", "l2", "standard_l2")
ROW_NORMALIZING_KINDS = {"l2": "none", "standard_l2": "standard"}  # kind -> the feature scaling before it


def normalizes_rows(kind: str) -> bool:
    """Whether a `data.preprocess` kind ends by scaling every row to unit L2 norm."""
    return kind in ROW_NORMALIZING_KINDS


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row of x (m, d) divided by its L2 norm; all-zero rows stay zero, NaN rows stay NaN."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


@dataclass(frozen=True)
class ViewScaler:
    """Maps a view x (m, d) to (x - offset) / scale, then, with ``unit_rows``, every row to unit
    L2 norm; offset (d,), scale (d,) nonzero."""

    offset: np.ndarray
    scale: np.ndarray
    unit_rows: bool = False

    def transform(self, x: np.ndarray) -> np.ndarray:
        """(m, d) -> (m, d) float32."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.offset.shape[0]:
            raise ValueError(f"scaler fitted on {self.offset.shape[0]} features, got an array of shape {x.shape}")
        z = (x - self.offset) / self.scale
        return (unit_rows(z) if self.unit_rows else z).astype(np.float32)


def _nonzero_scale(scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Replaces the scale of (numerically) constant features with 1, so they map to 0, not NaN."""
    constant = scale <= 10.0 * np.finfo(np.float64).eps * np.abs(offset)
    return np.where(constant | (scale == 0.0), 1.0, scale)


def fit_view_scaler(view: np.ndarray, kind: str) -> ViewScaler:
    """Fits one scaler to a view (n, d); pass the training split only."""
    if kind in ROW_NORMALIZING_KINDS:
        return replace(fit_view_scaler(view, ROW_NORMALIZING_KINDS[kind]), unit_rows=True)
    x = np.asarray(view, dtype=np.float64)
    if kind == "standard":
        offset, scale = x.mean(axis=0), x.std(axis=0)
    elif kind == "minmax":
        offset, scale = x.min(axis=0), x.max(axis=0) - x.min(axis=0)
    elif kind == "none":
        offset, scale = np.zeros(x.shape[1]), np.ones(x.shape[1])
    else:
        raise ValueError(f"unknown scaler kind {kind!r}; choose one of {SCALER_KINDS}")
    return ViewScaler(offset=offset, scale=_nonzero_scale(scale, offset))


def fit_view_scalers(views: Sequence[np.ndarray], kind: str) -> tuple[ViewScaler, ...]:
    """One scaler per view (n, d_v), fitted on the views given (the caller passes the training split).

    kind: "standard" (zero mean, unit std), "minmax" (range [0, 1]), "none" (identity), "l2" (rows
    to unit L2 norm) or "standard_l2" (standard, then rows to unit norm).
    """
    if kind not in SCALER_KINDS:
        raise ValueError(f"unknown scaler kind {kind!r}; choose one of {SCALER_KINDS}")
    return tuple(fit_view_scaler(view, kind) for view in as_view_arrays(views, what="views to fit scalers on"))


def apply_view_scalers(scalers: Sequence[ViewScaler], views: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Scales view v (m, d_v) with scalers[v]; returns V float32 arrays (m, d_v)."""
    arrays = as_view_arrays(views, what="views to scale")
    if len(arrays) != len(scalers):
        raise ValueError(f"views to scale: {len(scalers)} scalers for {len(arrays)} views")
    for v, (scaler, view) in enumerate(zip(scalers, arrays)):
        if view.shape[1] != scaler.offset.shape[0]:
            raise ValueError(
                f"views to scale: view {v} has {view.shape[1]} features, its scaler was fitted on "
                f"{scaler.offset.shape[0]}"
            )
    return tuple(scaler.transform(view) for scaler, view in zip(scalers, arrays))
