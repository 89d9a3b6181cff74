"""The multi-view dataset record shared by loaders, splits, preprocessing and training."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from specrage_jax.validation import as_view_arrays, check_label_shape, present_views, view_presence


def _as_class_labels(labels: np.ndarray, n_samples: int, *, what: str) -> np.ndarray:
    """Checks labels of shape (n,) hold integers in 0..K-1; returns them as int64."""
    array = check_label_shape(labels, n_samples, what=what)
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{what}: labels must be integers 0..K-1, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating) and not (
        np.all(np.isfinite(array)) and np.all(array == np.round(array))
    ):
        raise ValueError(f"{what}: labels must be integers 0..K-1, got non-integer values")
    if array.size and array.min() < 0:
        raise ValueError(f"{what}: labels must be integers 0..K-1, got minimum {array.min()}")
    return array.astype(np.int64)


@dataclass(frozen=True)
class MultiViewData:
    """A labelled multi-view dataset.

    Attributes:
      views: V float32 arrays, view v of shape (n, d_v); a sample that does not have view v holds
        an all-NaN row there (every sample has at least one view).
      labels: (n,) int64 class labels in 0..K-1.
      name: the dataset's name, e.g. "blobs".
      view_names: V names, one per view.
    """

    views: tuple[np.ndarray, ...]
    labels: np.ndarray
    name: str
    view_names: tuple[str, ...]

    def __post_init__(self) -> None:
        what = f"dataset {self.name!r}"
        views = as_view_arrays(self.views, what=what, allow_missing=True)
        view_presence(views, what=what)  # every sample keeps a view; partial-NaN rows are errors
        labels = _as_class_labels(self.labels, views[0].shape[0], what=what)
        view_names = tuple(str(v) for v in self.view_names)
        if len(view_names) != len(views):
            raise ValueError(f"{what}: {len(view_names)} view names for {len(views)} views")
        object.__setattr__(self, "views", views)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "view_names", view_names)

    @property
    def n_samples(self) -> int:
        return int(self.views[0].shape[0])

    @property
    def n_views(self) -> int:
        return len(self.views)

    @property
    def n_classes(self) -> int:
        """K, the number of classes: labels lie in 0..K-1."""
        return int(self.labels.max()) + 1

    @property
    def present(self) -> np.ndarray:
        """(n, V) bool: True where the sample has the view (its row is not all NaN)."""
        return present_views(self.views)

    @property
    def view_dims(self) -> tuple[int, ...]:
        return tuple(int(view.shape[1]) for view in self.views)

    def subset(self, indices: np.ndarray) -> MultiViewData:
        """The samples at `indices` ((m,) ints, or an (n,) boolean mask), in that order."""
        index = np.asarray(indices)
        if index.dtype == np.bool_:
            if index.shape != (self.n_samples,):
                raise ValueError(
                    f"dataset {self.name!r}: boolean mask of shape {index.shape} for {self.n_samples} samples"
                )
            index = np.flatnonzero(index)
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
            raise ValueError(
                f"dataset {self.name!r}: subset indices must be a 1-D integer array, "
                f"got shape {index.shape} dtype {index.dtype}"
            )
        if index.size and (index.min() < -self.n_samples or index.max() >= self.n_samples):
            raise ValueError(f"dataset {self.name!r}: subset indices out of range for {self.n_samples} samples")
        return replace(self, views=tuple(view[index] for view in self.views), labels=self.labels[index])

    def with_views(self, views: Sequence[np.ndarray], *, view_names: Sequence[str] | None = None) -> MultiViewData:
        """The same samples and labels with new views (e.g. scaled); keeps the view names unless given."""
        names = tuple(view_names) if view_names is not None else self.view_names
        return replace(self, views=tuple(views), view_names=names)
