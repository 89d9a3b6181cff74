"""Streaming input for data larger than memory: multi-view datasets stored as one ``.npy`` file
per view, written chunk by chunk, random mini-batches gathered from the files with positional
reads (the files are also exposed as read-only memory maps), and a background thread that moves
the next batches to the device(s) while the current step runs.

On-disk layout of a directory::

    view_0.npy ... view_{V-1}.npy   (n, d_v) C-order, float32 (default) or float16
    labels.npy                      (n,) int64, optional
    mask.npy                        (n, V) bool, True = sample i has view v; only when some
                                    sample lacks a view
    meta.json                       written last; a directory without it is incomplete

meta.json records n, view_dims, dtype, whether there is a mask ("mask"; a directory without the
key has none), the CRC32 of every file's data bytes ("crc32", views, then labels, then mask) and,
for a cache (``build_views_cache``), the parameters it was generated from ("source").

Missing views: the writer takes a row that is all NaN in view v as "this sample lacks view v"
(the library's one form of a missing view), stores zeros in its place and records it in
mask.npy; the reader gives that row back all NaN. Rows with only some NaN, any inf, or a sample
lacking every view are refused. A complete dataset writes no mask.npy, so its files and CRC32s
are those of the format before masks. mask.npy (a byte per sample and view) is read through its
memory map.

Storage dtype: float32 by default, so a round trip is exact. float16 halves the disk and page
cache footprint (1M x two 784-d views: 3.1 GB instead of 6.3 GB) at a relative rounding error
of at most 2^-11 (4.9e-4; the largest absolute error of each view is measured while writing and
kept in meta.json). uint8 is not offered: InfiniteMNIST rows are bilinearly warped and view 2
carries Gaussian noise, so they are not multiples of 1/255 and uint8 would not be lossless.

Memory: the writer appends each chunk to the files with ordinary writes (no mapping, so written
data never count in this process's RSS) and holds one chunk at a time. The reader gathers rows
with positional reads (``os.preadv``, one call per run of consecutive rows), so a batch costs
O(batch) memory and the page cache, however large, is never part of this process's resident set.
Measured on this box's kernel (6.18, read_ahead 8 MB, large page-cache folios), gathering 1024
random rows of each of two 784-d views through the memory map instead mapped ~2.9 GB of file
pages into the process (each touched row maps its whole large folio) and took 7.5-9 ms against
5.9 ms with preadv; ru_maxrss then reports page cache as if it were the program's memory.
``MemmapViews.views`` are still read-only memory-mapped arrays for direct inspection
(``release_pages`` unmaps what they touched).

Batches: ``random_batch_indices`` draws batches from consecutive random permutations of
range(n) (every sample once per pass, as ``train.batch_indices``) and sorts each batch's indices,
so a gather walks each file front to back; a sorted batch is the same set of samples, and
every SpecRaGE step is invariant to the order of the rows of a batch (kNN graph, Eq. 4, and
R from the QR, since (PY)^T(PY) = Y^T Y), so sorting costs no randomness. Sorting halved the
cold-cache gather (67 vs 124 ms, n = 10k). Random contiguous blocks of 32 rows were measured as
the alternative (``experiments/bench_scaling.py --gather``): fewer, longer reads, so faster
(0.8 vs 3.2 ms warm, 22 vs 67 ms cold, n = 10k), but a batch of a few runs of neighbouring rows
is a fair sample only if the file order is itself random, and with the data in the page cache
the sorted gather is a few percent of a CPU step and overlapped by ``prefetch_to_device``.
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from specrage_jax.validation import view_presence

FORMAT = "specrage_jax.memmap_views"
META_FILE = "meta.json"
LABELS_FILE = "labels.npy"
MASK_FILE = "mask.npy"
FORMAT_VERSION = 2  # 2: mask.npy (written only when some sample lacks a view); 1: no mask
STORAGE_DTYPES = ("float32", "float16")
T = TypeVar("T")


def view_file(v: int) -> str:
    return f"view_{v}.npy"


# --- writing ------------------------------------------------------------------------------------


def npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    """The ``.npy`` (version 1.0) header of a C-order array, padded so the data start aligned."""
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    return buffer.getvalue()


def check_chunk(views: Sequence[np.ndarray], view_dims: Sequence[int], index: int) -> int:
    """The number of rows of one chunk of V views (rows, d_v); ValueError naming chunk and view."""
    if len(views) != len(view_dims):
        raise ValueError(f"chunk {index}: expected {len(view_dims)} views, got {len(views)}")
    rows = []
    for v, (x, d) in enumerate(zip(views, view_dims)):
        shape = np.shape(x)
        if len(shape) != 2 or shape[1] != d:
            raise ValueError(
                f"chunk {index}, view {v}: expected rows of width {d}, i.e. shape (rows, {d}), got shape {shape}"
            )
        rows.append(shape[0])
    if len(set(rows)) != 1:
        raise ValueError(
            f"chunk {index}: the views have different row counts "
            + ", ".join(f"view {v}: {r}" for v, r in enumerate(rows))
        )
    return rows[0]


def _to_storage(x: np.ndarray, dtype: np.dtype, v: int, index: int, present: np.ndarray) -> tuple[np.ndarray, float]:
    """(C-contiguous x in the storage dtype with the rows where ``present`` (rows,) is False set
    to 0, max |stored - x| over the other rows); ValueError for values beyond float16."""
    if not present.all():
        x = np.where(present[:, None], x, np.zeros((), x.dtype))
    if dtype == x.dtype:
        return np.ascontiguousarray(x), 0.0
    largest = float(np.max(np.abs(x), initial=0.0))
    if largest > float(np.finfo(dtype).max):
        raise ValueError(
            f"chunk {index}, view {v}: values beyond the {dtype} range (max |x| = {largest:g}); store float32"
        )
    stored = np.ascontiguousarray(x, dtype=dtype)
    return stored, float(np.max(np.abs(stored.astype(np.float64) - x), initial=0.0))


def _open_files(
    folder: Path, n: int, view_dims: Sequence[int], storage: np.dtype, with_labels: bool
) -> tuple[list[Any], list[Path]]:
    """The files of a dataset opened for writing with their ``.npy`` headers written: the views,
    the labels (with ``with_labels``), then the mask."""
    paths = [folder / view_file(v) for v in range(len(view_dims))]
    headers = [npy_header((n, int(d)), storage) for d in view_dims]
    if with_labels:
        paths.append(folder / LABELS_FILE)
        headers.append(npy_header((n,), np.dtype(np.int64)))
    paths.append(folder / MASK_FILE)
    headers.append(npy_header((n, len(view_dims)), np.dtype(np.bool_)))
    files = [open(p, "wb") for p in paths]
    for f, header in zip(files, headers):
        f.write(header)
    return files, paths


def _append(f: Any, array: np.ndarray, crc: int) -> int:
    """Writes the bytes of the C-contiguous ``array`` to ``f``; returns the running CRC32."""
    data_bytes = memoryview(array).cast("B")  # type: ignore[arg-type]  # numpy stubs: ndarray is a Buffer only on Python>=3.12
    f.write(data_bytes)
    return zlib.crc32(data_bytes, crc)


def write_views_memmap(
    directory: str | Path,
    chunks: Iterable[Any],
    n: int,
    view_dims: Sequence[int] | None = None,
    *,
    dtype: str = "float32",
    with_labels: bool = False,
    sync: bool = True,
    source: dict | None = None,
) -> dict:
    """Writes a multi-view dataset chunk by chunk into ``directory`` (layout in the module doc).

    Args:
      chunks: each item a tuple of V arrays (rows, d_v), or with ``with_labels`` a pair
        ((V arrays), labels (rows,)) as ``data.mnist.infinitemnist_chunks`` yields.
      n: total rows; the chunks must add up to exactly n.
      view_dims: (d_v,); None takes them from the first chunk.
      dtype: storage dtype, 'float32' (exact) or 'float16'.
      sync: fsync the files before writing meta.json (a crash never leaves a "complete" dataset
        with missing data, and the data are on disk for cold-read measurements).
      source: JSON-serializable parameters the data were generated from, kept in meta.json as
        "source" (``build_views_cache`` compares them before reusing a cache).

    A row that is all NaN in view v marks a sample that lacks view v: zeros are stored in its
    place and mask.npy records it (the module doc). With no view missing anywhere, no mask.npy
    is written.

    Returns:
      The metadata written to meta.json (n, view_dims, dtype, labels, mask, max_abs_error per
      view, crc32).

    Raises:
      ValueError: naming the chunk and view for a wrong width, unequal row counts, rows with only
        some NaN or any inf, values beyond float16, or a total other than n; naming the chunk and
        row for a sample that lacks every view. The partial files are removed.
    """
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {STORAGE_DTYPES}, got {dtype!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).unlink(missing_ok=True)  # the directory is incomplete until the end
    storage = np.dtype(dtype)
    files: list[Any] = []
    paths: list[Path] = []
    written, errors, crcs, any_missing = 0, [], [], False
    try:
        for index, item in enumerate(chunks):
            views, labels = item if with_labels else (item, None)
            views = tuple(views)
            if view_dims is None:
                view_dims = tuple(int(np.shape(x)[1]) if np.ndim(x) == 2 else -1 for x in views)
            rows = check_chunk(views, view_dims, index)
            if labels is not None and np.shape(labels) != (rows,):
                raise ValueError(f"chunk {index}: labels must have shape ({rows},), got {np.shape(labels)}")
            if written + rows > n:
                raise ValueError(f"chunk {index}: the chunks give more than n={n} rows ({written} + {rows})")
            if not files:
                files, paths = _open_files(folder, n, view_dims, storage, with_labels)
                errors, crcs = [0.0] * len(view_dims), [0] * len(files)
            views = tuple(np.asarray(x) for x in views)
            present = view_presence(views, what=f"chunk {index}")  # refuses partial NaN, inf, no view
            any_missing = any_missing or not present.all()
            for v, x in enumerate(views):
                stored, error = _to_storage(x, storage, v, index, present[:, v])
                crcs[v] = _append(files[v], stored, crcs[v])
                errors[v] = max(errors[v], error)
            if with_labels:
                crcs[-2] = _append(files[-2], np.ascontiguousarray(labels, dtype=np.int64), crcs[-2])
            crcs[-1] = _append(files[-1], np.ascontiguousarray(present), crcs[-1])
            written += rows
        if written != n:
            raise ValueError(f"the chunks gave {written} rows, expected n={n}")
        if not any_missing:  # a complete dataset: the files of a format without masks
            files.pop().close()
            paths.pop().unlink()
            crcs.pop()
        for f in files:
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except BaseException:
        for f in files:
            f.close()
        for p in paths:
            p.unlink(missing_ok=True)
        raise
    for f in files:
        f.close()
    assert view_dims is not None  # written == n >= 1, so the first chunk set it
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION if any_missing else 1,
        "n": int(n),
        "view_dims": [int(d) for d in view_dims],
        "dtype": dtype,
        "labels": bool(with_labels),
        "mask": any_missing,
        "max_abs_error": errors,
        "crc32": [f"{c:08x}" for c in crcs],
    }
    if source is not None:
        meta["source"] = json.loads(json.dumps(source))
    (folder / META_FILE).write_text(json.dumps(meta, indent=1))
    return meta


# --- reading ------------------------------------------------------------------------------------


def read_npy_header(f: Any) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, the data's byte offset) of the ``.npy`` file open in ``f``
    (binary, at its start); ``f`` is left at the data."""
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(f)
    return shape, fortran_order, dtype, f.tell()


def map_npy(path: Path) -> tuple[mmap.mmap, np.ndarray, int]:
    """(the read-only mapping, the array viewing it, the data's byte offset) of a C-order ``.npy``."""
    with open(path, "rb") as f:
        shape, fortran_order, dtype, offset = read_npy_header(f)
        if fortran_order:
            raise ValueError(f"{path}: Fortran-order arrays are not supported (rows must be contiguous)")
        expected = offset + int(np.prod(shape)) * dtype.itemsize
        size = os.fstat(f.fileno()).st_size
        if size != expected:
            raise ValueError(f"{path}: header says {shape} {dtype} ({expected} bytes), the file has {size} bytes")
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    array = np.frombuffer(mapping, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)
    return mapping, array, offset


def read_exact(fd: int, buffer: memoryview, position: int) -> None:
    """Fills ``buffer`` from the file at ``position`` (a single read returns at most ~2 GB on Linux)."""
    done = 0
    while done < len(buffer):
        got = os.preadv(fd, [buffer[done:]], position + done)
        if got <= 0:
            raise OSError(f"unexpected end of file at byte {position + done}")
        done += got


def pread_rows(fd: int, offset: int, shape: tuple[int, ...], dtype: np.dtype, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` (1-D int) of the C-order array (shape, dtype) stored at ``offset`` in ``fd``:
    one positional read per run of consecutive indices. -> (len(idx), *shape[1:])."""
    n = shape[0]
    idx = np.asarray(idx, dtype=np.int64)
    if idx.ndim != 1:
        raise ValueError(f"row indices must be 1-D, got shape {idx.shape}")
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"row indices must be in 0..{n - 1}, got {idx.min()}..{idx.max()}")
    out = np.empty((idx.size, *shape[1:]), dtype)
    row_bytes = out.itemsize * int(np.prod(shape[1:], dtype=np.int64))
    buffer = memoryview(out.reshape(-1)).cast("B")  # type: ignore[arg-type]  # numpy stubs: ndarray is a Buffer only on Python>=3.12
    runs = np.flatnonzero(np.diff(idx) != 1) + 1
    for a, b in zip(np.concatenate([[0], runs]).tolist(), np.concatenate([runs, [idx.size]]).tolist()):
        if b > a:
            read_exact(fd, buffer[a * row_bytes : b * row_bytes], offset + int(idx[a]) * row_bytes)
    return out


@dataclass(frozen=True)
class MemmapViews:
    """A multi-view dataset on disk, opened read-only.

    Attributes:
      views: V read-only memory-mapped arrays (n, d_v) in the storage dtype (for inspection;
        ``rows`` is how batches are read).
      labels: (n,) int64 or None (memory-mapped).
      meta: the contents of meta.json.
      mask: (n, V) bool, True where sample i has view v (memory-mapped), or None when every
        sample has every view. ``views`` hold zeros where it is False; ``view_rows`` and
        ``rows`` return all-NaN rows there, the library's one form of a missing view.
    """

    directory: Path
    views: tuple[np.ndarray, ...]
    labels: np.ndarray | None
    meta: dict
    mappings: tuple[mmap.mmap, ...]
    fds: tuple[int, ...]
    offsets: tuple[int, ...]
    mask: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.views[0].shape[0]

    @property
    def view_dims(self) -> tuple[int, ...]:
        return tuple(v.shape[1] for v in self.views)

    def view_rows(self, v: int, idx: np.ndarray) -> np.ndarray:
        """float32 rows ``idx`` (1-D int, best sorted: one read per run of consecutive rows) of
        view v, read with preadv: (len(idx), d_v); all NaN where the sample lacks the view."""
        view = self.views[v]
        rows = pread_rows(self.fds[v], self.offsets[v], view.shape, view.dtype, idx).astype(np.float32, copy=False)
        if self.mask is not None:
            rows[~self.present(v, idx)] = np.nan
        return rows

    def present(self, v: int, idx: np.ndarray) -> np.ndarray:
        """(len(idx),) bool: whether the samples ``idx`` (1-D int) have view v (from the mask;
        all True without one). Reads no view data."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.mask is None:
            return np.ones(idx.shape[0], dtype=bool)
        return np.array(self.mask[idx, v], dtype=bool)

    def rows(self, idx: np.ndarray | slice) -> tuple[np.ndarray, ...]:
        """float32 copies of rows ``idx`` (1-D int array, or a slice) of every view, read with
        preadv (not through the mapping): V arrays (len(idx), d_v), all-NaN rows for missing views."""
        if isinstance(idx, slice):
            idx = np.arange(*idx.indices(self.n))
        return tuple(self.view_rows(v, idx) for v in range(len(self.views)))

    def release_pages(self) -> None:
        """Unmaps from this process the file pages that reads through ``views`` touched (they stay
        in the page cache, so the next read of them is a minor fault)."""
        if hasattr(mmap, "MADV_DONTNEED"):
            for mapping in self.mappings:
                mapping.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        """Closes the file descriptors that ``rows`` reads from (the mappings close when unused)."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> MemmapViews:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_views_memmap(directory: str | Path) -> MemmapViews:
    """Opens a directory written by ``write_views_memmap``.

    Raises:
      FileNotFoundError: if meta.json is missing (the writer did not finish) or a file is.
      ValueError: if a file's shape or dtype disagrees with meta.json (naming the view or the
        mask), or the format version is newer than this library reads.
    """
    folder = Path(directory)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(
            f"{meta_path} not found: {folder} is not a complete dataset written by "
            f"write_views_memmap (it writes meta.json last)"
        )
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: not a {FORMAT} directory (format {meta.get('format')!r})")
    if int(meta.get("version", 1)) > FORMAT_VERSION:
        raise ValueError(
            f"{meta_path}: format version {meta['version']} is newer than this library reads "
            f"({FORMAT_VERSION}); update specrage_jax"
        )
    n, storage = meta["n"], np.dtype(meta["dtype"])
    mappings, views, fds, offsets = [], [], [], []
    for v, d in enumerate(meta["view_dims"]):
        path = folder / view_file(v)
        mapping, array, offset = map_npy(path)
        if array.shape != (n, d) or array.dtype != storage:
            raise ValueError(f"view {v} ({path}): expected ({n}, {d}) {storage}, got {array.shape} {array.dtype}")
        mappings.append(mapping)
        views.append(array)
        fds.append(os.open(path, os.O_RDONLY))
        offsets.append(offset)
    labels = None
    if meta["labels"]:
        mapping, labels, _ = map_npy(folder / LABELS_FILE)
        if labels.shape != (n,):
            raise ValueError(f"labels ({folder / LABELS_FILE}): expected ({n},), got {labels.shape}")
        mappings.append(mapping)
    mask = None
    if meta.get("mask", False):  # directories written before masks existed have no key: complete
        mapping, mask, _ = map_npy(folder / MASK_FILE)
        if mask.shape != (n, len(views)) or mask.dtype != np.bool_:
            raise ValueError(
                f"mask ({folder / MASK_FILE}): expected ({n}, {len(views)}) bool, got {mask.shape} {mask.dtype}"
            )
        mappings.append(mapping)
    return MemmapViews(folder, tuple(views), labels, meta, tuple(mappings), tuple(fds), tuple(offsets), mask)


# --- batches ------------------------------------------------------------------------------------


# --- to the device ------------------------------------------------------------------------------
