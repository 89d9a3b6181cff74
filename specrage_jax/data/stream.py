"""Streaming input for data larger than memory: multi-view datasets stored as one ``.npy`` file
per view, written chunk by chunk, random mini-batches gathered from the files with positional
reads (the files are also exposed as read-only memory maps), and a background thread that moves
the next batches to the device(s) while the current step runs.

On-disk layout of a directory::

    view_0.npy ... view_{V-1}.npy   (n, d_v) C-order, float32 (default) or float16
    labels.npy                      (n,) int64, optional
    meta.json                       written last; a directory without it is incomplete

meta.json records n, view_dims, dtype, the CRC32 of every file's data bytes ("crc32", views then
labels) and, for a cache (``build_views_cache``), the parameters it was generated from ("source").

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
import queue
import shutil
import threading
import uuid
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import numpy as np

FORMAT = "specrage_jax.memmap_views"
META_FILE = "meta.json"
LABELS_FILE = "labels.npy"
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
        buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def check_chunk(views: Sequence[np.ndarray], view_dims: Sequence[int], index: int) -> int:
    """The number of rows of one chunk of V views (rows, d_v); ValueError naming chunk and view."""
    if len(views) != len(view_dims):
        raise ValueError(f"chunk {index}: expected {len(view_dims)} views, got {len(views)}")
    rows = []
    for v, (x, d) in enumerate(zip(views, view_dims)):
        shape = np.shape(x)
        if len(shape) != 2 or shape[1] != d:
            raise ValueError(f"chunk {index}, view {v}: expected rows of width {d}, i.e. shape (rows, {d}), "
                             f"got shape {shape}")
        rows.append(shape[0])
    if len(set(rows)) != 1:
        raise ValueError(f"chunk {index}: the views have different row counts "
                         + ", ".join(f"view {v}: {r}" for v, r in enumerate(rows)))
    return rows[0]


def _to_storage(x: np.ndarray, dtype: np.dtype, v: int, index: int) -> tuple[np.ndarray, float]:
    """(C-contiguous x in the storage dtype, max |stored - x|); ValueError for non-finite values."""
    x = np.asarray(x)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"chunk {index}, view {v}: non-finite values (NaN or inf) cannot be stored")
    if dtype == x.dtype:
        return np.ascontiguousarray(x), 0.0
    largest = float(np.max(np.abs(x), initial=0.0))
    if largest > float(np.finfo(dtype).max):
        raise ValueError(f"chunk {index}, view {v}: values beyond the {dtype} range "
                         f"(max |x| = {largest:g}); store float32")
    stored = np.ascontiguousarray(x, dtype=dtype)
    return stored, float(np.max(np.abs(stored.astype(np.float64) - x), initial=0.0))


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

    Returns:
      The metadata written to meta.json (n, view_dims, dtype, labels, max_abs_error per view).

    Raises:
      ValueError: naming the chunk and view for a wrong width, unequal row counts, non-finite
        values, values beyond float16, or a total other than n. The partial files are removed.
    """
    if dtype not in STORAGE_DTYPES:
        raise ValueError(f"dtype must be one of {STORAGE_DTYPES}, got {dtype!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / META_FILE).unlink(missing_ok=True)  # the directory is incomplete until the end
    storage = np.dtype(dtype)
    iterator = iter(chunks)
    files: list[Any] = []
    paths: list[Path] = []
    written, errors, crcs = 0, [], []
    try:
        for index, item in enumerate(iterator):
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
                paths = [folder / view_file(v) for v in range(len(view_dims))] + ([folder / LABELS_FILE] if with_labels else [])
                files = [open(p, "wb") for p in paths]
                for f, d in zip(files, view_dims):
                    f.write(npy_header((n, int(d)), storage))
                if with_labels:
                    files[-1].write(npy_header((n,), np.dtype(np.int64)))
                errors = [0.0] * len(view_dims)
                crcs = [0] * len(files)
            for v, x in enumerate(views):
                stored, error = _to_storage(x, storage, v, index)
                data_bytes = memoryview(stored).cast("B")
                files[v].write(data_bytes)
                crcs[v] = zlib.crc32(data_bytes, crcs[v])
                errors[v] = max(errors[v], error)
            if with_labels:
                label_bytes = memoryview(np.ascontiguousarray(labels, dtype=np.int64)).cast("B")
                files[-1].write(label_bytes)
                crcs[-1] = zlib.crc32(label_bytes, crcs[-1])
            written += rows
        if written != n:
            raise ValueError(f"the chunks gave {written} rows, expected n={n}")
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
    meta = {"format": FORMAT, "version": 1, "n": int(n), "view_dims": [int(d) for d in view_dims],
            "dtype": dtype, "labels": bool(with_labels), "max_abs_error": errors,
            "crc32": [f"{c:08x}" for c in crcs]}
    if source is not None:
        meta["source"] = json.loads(json.dumps(source))
    (folder / META_FILE).write_text(json.dumps(meta, indent=1))
    return meta


# --- reading ------------------------------------------------------------------------------------


def map_npy(path: Path) -> tuple[mmap.mmap, np.ndarray, int]:
    """(the read-only mapping, the array viewing it, the data's byte offset) of a C-order ``.npy``."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read_header(f)
        offset = f.tell()
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
    buffer = memoryview(out.reshape(-1)).cast("B")
    runs = np.flatnonzero(np.diff(idx) != 1) + 1
    for a, b in zip(np.concatenate([[0], runs]).tolist(), np.concatenate([runs, [idx.size]]).tolist()):
        if b > a:
            read_exact(fd, buffer[a * row_bytes:b * row_bytes], offset + int(idx[a]) * row_bytes)
    return out


@dataclass(frozen=True)
class MemmapViews:
    """A multi-view dataset on disk, opened read-only.

    Attributes:
      views: V read-only memory-mapped arrays (n, d_v) in the storage dtype (for inspection;
        ``rows`` is how batches are read).
      labels: (n,) int64 or None (memory-mapped).
      meta: the contents of meta.json.
    """

    directory: Path
    views: tuple[np.ndarray, ...]
    labels: np.ndarray | None
    meta: dict
    mappings: tuple[mmap.mmap, ...]
    fds: tuple[int, ...]
    offsets: tuple[int, ...]

    @property
    def n(self) -> int:
        return self.views[0].shape[0]

    @property
    def view_dims(self) -> tuple[int, ...]:
        return tuple(v.shape[1] for v in self.views)

    def view_rows(self, v: int, idx: np.ndarray) -> np.ndarray:
        """float32 rows ``idx`` (1-D int, best sorted: one read per run of consecutive rows) of
        view v, read with preadv: (len(idx), d_v)."""
        view = self.views[v]
        return pread_rows(self.fds[v], self.offsets[v], view.shape, view.dtype, idx).astype(np.float32, copy=False)

    def rows(self, idx: np.ndarray | slice) -> tuple[np.ndarray, ...]:
        """float32 copies of rows ``idx`` (1-D int array, or a slice) of every view, read with
        preadv (not through the mapping): V arrays (len(idx), d_v)."""
        if isinstance(idx, slice):
            idx = np.arange(*idx.indices(self.n))
        return tuple(pread_rows(fd, offset, v.shape, v.dtype, idx).astype(np.float32, copy=False)
                     for fd, offset, v in zip(self.fds, self.offsets, self.views))

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

    def __enter__(self) -> "MemmapViews":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_views_memmap(directory: str | Path) -> MemmapViews:
    """Opens a directory written by ``write_views_memmap``.

    Raises:
      FileNotFoundError: if meta.json is missing (the writer did not finish) or a file is.
      ValueError: if a file's shape or dtype disagrees with meta.json (naming the view).
    """
    folder = Path(directory)
    meta_path = folder / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} not found: {folder} is not a complete dataset written by "
                                f"write_views_memmap (it writes meta.json last)")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: not a {FORMAT} directory (format {meta.get('format')!r})")
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
    return MemmapViews(folder, tuple(views), labels, meta, tuple(mappings), tuple(fds), tuple(offsets))


def file_crc32(path: Path, offset: int, chunk_bytes: int = 1 << 24) -> str:
    """CRC32 (8 hex digits) of the bytes of ``path`` from ``offset`` on, read in chunks."""
    crc = 0
    with open(path, "rb") as f:
        f.seek(offset)
        while block := f.read(chunk_bytes):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def data_files(data: MemmapViews) -> list[tuple[Path, int]]:
    """(path, data offset) of every file of ``data``: the views, then the labels if any."""
    files = [(data.directory / view_file(v), offset) for v, offset in enumerate(data.offsets)]
    if data.labels is not None:
        with open(data.directory / LABELS_FILE, "rb") as f:
            version = np.lib.format.read_magic(f)
            (np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0)(f)
            files.append((data.directory / LABELS_FILE, f.tell()))
    return files


def files_crc32(data: MemmapViews) -> list[str]:
    """The CRC32 of every file's data bytes (views, then labels), read in 16 MB chunks."""
    return [file_crc32(path, offset) for path, offset in data_files(data)]


def corrupt_cache_reason(data: MemmapViews, source: dict, *, verify_crc: bool) -> str | None:
    """Why an opened cache may not be reused (other source parameters, no labels, a CRC32 that
    disagrees with meta.json), or None when it may."""
    recorded = data.meta.get("source")
    if recorded != json.loads(json.dumps(source)):
        return f"it was generated from other parameters ({recorded} instead of {source})"
    if not data.meta.get("labels"):
        return "it holds no labels"
    if verify_crc:
        expected = data.meta.get("crc32")
        found = files_crc32(data)
        if expected != found:
            return f"its files' CRC32 {found} differ from those in meta.json {expected} (damaged files)"
    return None


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (a signal-0 probe)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def remove_dead_staging(folder: Path) -> None:
    """Removes the staging directories ``.NAME.tmp-PID-*`` of ``folder`` whose generating process
    is gone (a generation killed outright leaves one, as large as the cache)."""
    for staging in folder.parent.glob(f".{folder.name}.tmp-*"):
        pid = staging.name[len(f".{folder.name}.tmp-"):].partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(staging, ignore_errors=True)


def build_views_cache(
    directory: str | Path,
    source: dict,
    make_chunks: Callable[[], Iterable[Any]],
    n: int,
    *,
    dtype: str = "float32",
    verify_crc: bool = True,
) -> tuple[MemmapViews, bool]:
    """Opens the labelled dataset cached in ``directory``, generating it first when it is missing
    or unusable. Returns (the opened data, whether it was generated now).

    A cache is reused only when it is complete (meta.json present, every file of the size its
    header and meta.json give), records the same ``source`` parameters and, with ``verify_crc``,
    its files' CRC32 match meta.json (one sequential read of the files). Otherwise it is removed
    and ``make_chunks()`` (items ((V arrays), labels), adding up to n rows) is written into a
    fresh sibling directory that is renamed into place only once complete, so a generation that
    is killed leaves a hidden ``.NAME.tmp-PID-*`` directory, never a cache that is reused (the
    next generation removes those of processes that are gone).
    """
    folder = Path(directory)
    if folder.exists():
        reason = None
        try:
            data = open_views_memmap(folder)
        except (FileNotFoundError, ValueError, KeyError, OSError) as err:
            reason = f"it cannot be opened ({err})"
        else:
            reason = corrupt_cache_reason(data, source, verify_crc=verify_crc)
            if reason is None:
                return data, False
            data.close()
        warnings.warn(f"dataset cache {folder} is not reused: {reason}; generating it again", stacklevel=2)
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(folder)
    staging = folder.with_name(f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        write_views_memmap(staging, make_chunks(), n, dtype=dtype, with_labels=True, source=source)
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / META_FILE).is_file():  # not another process's finished cache
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return open_views_memmap(folder), True


# --- batches ------------------------------------------------------------------------------------


def random_batch_indices(n: int, batch_size: int, rng: np.random.Generator, *, sort: bool = True) -> Iterator[np.ndarray]:
    """Endless (batch_size,) int64 index arrays from consecutive random permutations of range(n).

    Every sample appears once per permutation; a batch may straddle two permutations (as
    ``train.batch_indices``). Sorted within the batch by default (see the module doc). Holds one
    permutation: 8 bytes per sample.
    """
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..n={n}, got {batch_size}")
    perm, pos = rng.permutation(n), 0
    while True:
        take = perm[pos:pos + batch_size]
        pos += batch_size
        if take.size < batch_size:
            perm = rng.permutation(n)
            pos = batch_size - take.size
            take = np.concatenate([take, perm[:pos]])
        yield np.sort(take) if sort else take


def memmap_batches(
    data: MemmapViews,
    batch_size: int,
    *,
    seed: int | np.random.Generator,
    n_batches: int | None = None,
    sort: bool = True,
) -> Iterator[tuple[np.ndarray, ...]]:
    """Random mini-batches of ``data``: V float32 arrays (batch_size, d_v) per item, gathered
    with ``MemmapViews.rows`` (O(batch) memory). ``n_batches`` None is endless."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    for count, idx in enumerate(random_batch_indices(data.n, batch_size, rng, sort=sort)):
        if n_batches is not None and count >= n_batches:
            return
        yield data.rows(idx)


def map_views_in_chunks(
    fns: Sequence[Callable[[np.ndarray], np.ndarray]],
    data: MemmapViews,
    out_dir: str | Path,
    *,
    chunk_rows: int = 8192,
    dtype: str = "float32",
) -> dict:
    """Writes fns[v](view v) for every view, chunk by chunk, as a new dataset in ``out_dir``
    (e.g. an autoencoder encoder per view); labels are copied. Each fn maps float32 rows
    (r, d_v) -> (r, c_v). Memory: one chunk of inputs and outputs. Returns the new meta."""
    if len(fns) != len(data.views):
        raise ValueError(f"map_views_in_chunks: {len(fns)} functions for {len(data.views)} views")

    def chunks() -> Iterator[Any]:
        for start in range(0, data.n, chunk_rows):
            rows = slice(start, min(start + chunk_rows, data.n))
            outputs = tuple(np.asarray(fn(x)) for fn, x in zip(fns, data.rows(rows)))
            labels = None if data.labels is None else np.array(data.labels[rows])
            yield outputs if labels is None else (outputs, labels)

    return write_views_memmap(out_dir, chunks(), data.n, dtype=dtype, with_labels=data.labels is not None)


# --- to the device ------------------------------------------------------------------------------


def prefetch_to_device(
    iterator: Iterable[T],
    size: int = 2,
    sharding: Any = None,
) -> Iterator[T]:
    """Yields the items of ``iterator`` (pytrees of arrays) already on the device, in order,
    with up to ``size`` of them transferred ahead by a background thread, so the host-side
    gather of the next batches overlaps the device's work on the current one.

    Args:
      sharding: None (the default device), a ``jax.sharding.Sharding`` applied to every leaf
        (e.g. ``NamedSharding(mesh, P('data'))``), or a function item -> placed item (e.g.
        ``lambda b: sharding.shard_batch(b, mesh)``, which also handles multi-process input).

    The source iterator runs in the thread (it must not be shared). An exception there is
    raised here, at the item where it happened; closing this generator stops the thread.
    """
    import jax

    if size < 1:
        raise ValueError(f"prefetch size must be >= 1, got {size}")
    if sharding is None:
        put = jax.device_put
    elif callable(sharding):
        put = sharding
    else:
        def put(item):
            return jax.device_put(item, sharding)

    slots: queue.Queue = queue.Queue(maxsize=size)
    stop = threading.Event()
    end = object()

    def offer(entry: tuple[Any, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in iterator:
                if not offer((put(item), None)):
                    return
            offer((end, None))
        except BaseException as error:  # handed to the consumer
            offer((None, error))

    thread = threading.Thread(target=produce, name="prefetch_to_device", daemon=True)
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if error is not None:
                raise error
            if item is end:
                return
            yield item
    finally:
        stop.set()
        thread.join(timeout=5.0)
