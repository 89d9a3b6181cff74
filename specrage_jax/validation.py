"""Input checks at the library boundary: every error names the view and the problem."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def as_view_arrays(views: Sequence[np.ndarray], *, what: str = "views") -> tuple[np.ndarray, ...]:
    """Validates a multi-view input and returns it as a tuple of float32 arrays.

    Args:
      views: V arrays, view v of shape (n, d_v); the same n for every view.
      what: how the caller names the input in error messages.

    Returns:
      A tuple of V C-contiguous float32 arrays of shape (n, d_v).

    Raises:
      ValueError: naming the view when it is not 2-D, has no rows or columns, disagrees on
        the number of samples, or holds NaN or infinite values.
    """
    if isinstance(views, np.ndarray) or not isinstance(views, Sequence) or len(views) == 0:
        raise ValueError(
            f"{what} must be a non-empty list of 2-D arrays, one (n_samples, n_features_v) "
            f"array per view; got {type(views).__name__}"
        )
    arrays = []
    for v, view in enumerate(views):
        array = np.asarray(view)
        if array.ndim != 2:
            raise ValueError(f"{what}: view {v} must be 2-D (n_samples, n_features), got shape {array.shape}")
        if array.shape[0] == 0 or array.shape[1] == 0:
            raise ValueError(f"{what}: view {v} is empty, shape {array.shape}")
        if not np.issubdtype(array.dtype, np.number) and array.dtype != np.bool_:
            raise ValueError(f"{what}: view {v} has non-numeric dtype {array.dtype}")
        array = np.ascontiguousarray(array, dtype=np.float32)
        bad = ~np.isfinite(array)
        if bad.any():
            rows = np.unique(np.nonzero(bad)[0])
            raise ValueError(
                f"{what}: view {v} holds {int(bad.sum())} NaN or infinite values "
                f"(first bad rows: {rows[:5].tolist()}); impute or drop those samples first"
            )
        arrays.append(array)
    n_rows = {a.shape[0] for a in arrays}
    if len(n_rows) != 1:
        shapes = ", ".join(f"view {v}: {a.shape}" for v, a in enumerate(arrays))
        raise ValueError(f"{what}: views disagree on the number of samples ({shapes})")
    return tuple(arrays)


def check_view_dims(views: Sequence[np.ndarray], expected_dims: Sequence[int], *, what: str = "views") -> None:
    """Raises ValueError naming the view whose feature count differs from the trained model's."""
    if len(views) != len(expected_dims):
        raise ValueError(f"{what}: expected {len(expected_dims)} views, got {len(views)}")
    for v, (view, dim) in enumerate(zip(views, expected_dims)):
        if view.shape[1] != dim:
            raise ValueError(f"{what}: view {v} has {view.shape[1]} features, the model was built for {dim}")


def check_label_shape(labels: np.ndarray, n_samples: int, *, what: str) -> np.ndarray:
    """Returns ``labels`` as an array after checking it is 1-D with one label per sample."""
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(f"{what}: labels must be 1-D (n_samples,), got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(f"{what}: {array.shape[0]} labels for {n_samples} samples")
    return array
