"""Views of a dataset on disk that are read only where rows are asked for.

:class:`MemmapRows` is one view restricted to a set of rows (a split): it has ``len``, ``shape``,
``ndim``, ``dtype`` and row indexing (``rows[idx]`` with an int array in any order, duplicates
allowed, a boolean mask, a slice or an int), which is all the training loop, the pre-training
stages, the scale estimate and ``embed`` use. Every read goes through :meth:`MemmapRows.gather`,
one ``preadv`` per run of consecutive file rows, so memory is O(rows asked for). Converting a
whole one to an array (``np.asarray``) is refused with a TypeError: nothing reads a whole view
by accident.

:class:`StreamedViews` is a labelled multi-view dataset whose views are :class:`MemmapRows` over a
:class:`~specrage_jax.data.stream.MemmapViews` (labels, 8 bytes a sample, are in memory);
:meth:`StreamedViews.subset` splits it into index sets over the files, not copies.

A sample that lacks a view reads back as an all-NaN row, as in memory; :meth:`MemmapRows.present`
and :func:`streamed_mask` read the dataset's mask alone, without the views' data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from specrage_jax.data.stream import MemmapViews
from specrage_jax.data.stream_cache import files_crc32
from specrage_jax.validation import check_each_sample_has_a_view, is_row_source


@dataclass(frozen=True, eq=False)
class MemmapRows:
    """Rows ``index`` (sorted (m,) int64 file rows) of view ``view`` of ``source``, read on demand.

    Row i of this object is file row ``index[i]``; gathered rows are float32 (m, d), all NaN
    where the sample lacks the view (:meth:`present`).
    ``streamed`` marks row sources for the modules that must not import ``data``
    (``train.is_streamed``, ``embed``).
    """

    streamed: ClassVar[bool] = True
    source: MemmapViews
    view: int
    index: np.ndarray

    @classmethod
    def all_rows(cls, source: MemmapViews, view: int) -> MemmapRows:
        return cls(source, view, np.arange(source.n, dtype=np.int64))

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.index.shape[0]), int(self.source.view_dims[self.view]))

    @property
    def ndim(self) -> int:
        return 2

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def name(self) -> str:
        return f"view {self.view} of {self.source.directory}"

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def take(self, positions: np.ndarray) -> MemmapRows:
        """The rows at sorted ``positions`` (m,) of this object, as a new (unread) MemmapRows."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size > 1 and np.any(np.diff(positions) < 0):
            raise ValueError(f"{self.name}: take() needs sorted positions (a split), got unsorted ones")
        return MemmapRows(self.source, self.view, self.index[positions])

    def positions(self, key: Any) -> np.ndarray:
        """``key`` (slice, int, bool mask or int array) as (m,) int64 positions into this object."""
        n = len(self)
        if isinstance(key, slice):
            return np.arange(*key.indices(n), dtype=np.int64)
        array = np.asarray(key)
        if array.dtype == np.bool_:
            if array.shape != (n,):
                raise IndexError(f"{self.name}: boolean mask of shape {array.shape} for {n} rows")
            return np.flatnonzero(array)
        if not np.issubdtype(array.dtype, np.integer) or array.ndim > 1:
            raise IndexError(
                f"{self.name}: rows are indexed by a slice, an int, a boolean mask or a 1-D int "
                f"array, got {array.dtype} of shape {array.shape}"
            )
        array = array.reshape(-1).astype(np.int64)
        if array.size and (array.min() < -n or array.max() >= n):
            raise IndexError(f"{self.name}: row index out of range for {n} rows (got {array.min()}..{array.max()})")
        return np.where(array < 0, array + n, array)

    def gather(self, file_rows: np.ndarray) -> np.ndarray:
        """float32 file rows ``file_rows`` (sorted, distinct (m,) int64) of the view: (m, d), all
        NaN where the sample lacks the view. Every read of this object goes through here."""
        return self.source.view_rows(self.view, file_rows)

    def present(self) -> np.ndarray:
        """(m,) bool: whether each row's sample has this view (the dataset's mask; all True
        without one). Reads no view data."""
        return self.source.present(self.view, self.index)

    def __getitem__(self, key: Any) -> np.ndarray:
        """The rows ``key`` selects, in that order (duplicates repeated): float32 (m, d); an int
        gives one row (d,). The file is read once per distinct row, in file order."""
        if isinstance(key, tuple):
            raise IndexError(f"{self.name}: only row indexing is supported (x[rows]), got a tuple {key!r}")
        scalar = isinstance(key, (int, np.integer))
        file_rows = self.index[self.positions(key)]
        distinct, inverse = np.unique(file_rows, return_inverse=True)
        rows = self.gather(distinct)
        if distinct.size != file_rows.size or np.any(inverse != np.arange(inverse.size)):
            rows = rows[inverse.reshape(-1)]
        return rows[0] if scalar else rows

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            f"{self.name} ({len(self)} rows) is streamed from disk and is not read whole into "
            f"memory; index the rows you need (x[idx]) or process it in chunks"
        )


def is_streamed(views: Sequence[Any]) -> bool:
    """True when ``views`` are row sources read on demand (:class:`MemmapRows`), False for arrays."""
    return any(is_row_source(v) for v in views)


@dataclass(frozen=True)
class StreamedViews:
    """A labelled multi-view dataset on disk: the same interface as ``MultiViewData`` where the
    pipeline reads it (``views``, ``labels``, ``name``, ``view_names``, ``n_samples``,
    ``n_views``, ``n_classes``, ``view_dims``), with the views read on demand.

    Attributes:
      source: the opened files (``open_views_memmap``).
      labels: (n,) int64 class labels 0..K-1, in memory.
    """

    source: MemmapViews
    labels: np.ndarray
    name: str
    view_names: tuple[str, ...]

    def __post_init__(self) -> None:
        labels = np.asarray(self.labels)
        if labels.shape != (self.source.n,) or not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(
                f"dataset {self.name!r} ({self.source.directory}): labels must be ({self.source.n},) "
                f"integers, got {labels.dtype} {labels.shape}"
            )
        if labels.size and labels.min() < 0:
            raise ValueError(f"dataset {self.name!r}: labels must be integers 0..K-1, got minimum {labels.min()}")
        if len(self.view_names) != len(self.source.views):
            raise ValueError(
                f"dataset {self.name!r}: {len(self.view_names)} view names for {len(self.source.views)} views"
            )
        object.__setattr__(self, "labels", labels.astype(np.int64))

    @property
    def views(self) -> tuple[MemmapRows, ...]:
        return tuple(MemmapRows.all_rows(self.source, v) for v in range(len(self.source.views)))

    @property
    def n_samples(self) -> int:
        return self.source.n

    @property
    def n_views(self) -> int:
        return len(self.source.views)

    @property
    def n_classes(self) -> int:
        return int(self.labels.max()) + 1

    @property
    def view_dims(self) -> tuple[int, ...]:
        return self.source.view_dims

    def subset(self, indices: np.ndarray) -> tuple[tuple[MemmapRows, ...], np.ndarray]:
        """(V MemmapRows, labels (m,)) of the samples at sorted ``indices`` (m,): no data are read."""
        index = np.asarray(indices, dtype=np.int64)
        return tuple(view.take(index) for view in self.views), self.labels[index]

    def fingerprint(self) -> dict[str, Any]:
        """Sample count, view dims and the CRC32 of every file (from meta.json when the writer
        recorded them, else read), for the run record that resume checks."""
        crcs = self.source.meta.get("crc32") or files_crc32(self.source)
        return {"n_samples": self.n_samples, "view_dims": [int(d) for d in self.view_dims], "file_crc32": list(crcs)}

    def close(self) -> None:
        self.source.close()


def streamed_labels(source: MemmapViews, *, what: str) -> np.ndarray:
    """The labels of an opened dataset directory, read into memory; ValueError when it has none."""
    if source.labels is None:
        raise ValueError(
            f"{what} ({source.directory}) has no labels.npy; training and evaluation need labels "
            f"(write it with write_views_memmap(..., with_labels=True))"
        )
    return np.array(source.labels, dtype=np.int64)


def check_streamed_views(views: Sequence[Any], *, what: str) -> tuple[Any, ...]:
    """The views as a tuple after checking they are V row sets (n, d_v) with the same n."""
    rows = {len(v) for v in views}
    if len(rows) != 1:
        raise ValueError(
            f"{what}: views disagree on the number of samples "
            f"({', '.join(f'view {v}: {x.shape}' for v, x in enumerate(views))})"
        )
    if rows == {0}:
        raise ValueError(f"{what}: the views have no rows")
    return tuple(views)


def streamed_mask(views: Sequence[Any], *, what: str) -> np.ndarray | None:
    """(m, V) bool of V row sources (m rows each), True where the sample has view v, read from
    the datasets' masks without reading view data; None when every row has every view (so
    complete data takes the complete-data path, as ``batches.missing_view_mask``).

    Raises:
      ValueError: naming the first row that has no view at all.
    """
    present = np.stack([np.asarray(v.present(), dtype=bool) for v in views], axis=1)
    if present.all():
        return None
    check_each_sample_has_a_view(present, what=what)
    return present
