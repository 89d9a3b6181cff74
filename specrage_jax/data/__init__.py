"""Multi-view datasets, splits and per-view preprocessing (NumPy in, NumPy out)."""

from __future__ import annotations

from specrage_jax.data.preprocess import ViewScaler, apply_view_scalers, fit_view_scalers
from specrage_jax.data.registry import dataset_names, load_dataset
from specrage_jax.data.splits import SplitIndices, split_indices
from specrage_jax.data.synthetic import make_blobs_views, make_digits_views
from specrage_jax.data.types import MultiViewData

__all__ = [
    "MultiViewData",
    "SplitIndices",
    "ViewScaler",
    "apply_view_scalers",
    "dataset_names",
    "fit_view_scalers",
    "load_dataset",
    "make_blobs_views",
    "make_digits_views",
    "split_indices",
]
