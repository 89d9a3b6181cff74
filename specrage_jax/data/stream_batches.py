"""Batches from memmap views: seeded random batch indices, batches gathered from the files, chunked
maps over every row, and prefetching to the device(s) behind the loop."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from specrage_jax.data.stream import MemmapViews, write_views_memmap
from specrage_jax.validation import missing_rows

T = TypeVar("T")


def random_batch_indices(
    n: int, batch_size: int, rng: np.random.Generator, *, sort: bool = True
) -> Iterator[np.ndarray]:
    """Endless (batch_size,) int64 index arrays from consecutive random permutations of range(n).

    Every sample appears once per permutation; a batch may straddle two permutations (as
    ``train.batch_indices``). Sorted within the batch by default (see the module doc). Holds one
    permutation: 8 bytes per sample.
    """
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in 1..n={n}, got {batch_size}")
    perm, pos = rng.permutation(n), 0
    while True:
        take = perm[pos : pos + batch_size]
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
    (r, d_v) -> (r, c_v). A view a sample lacks is an all-NaN input row and comes out an all-NaN
    row whatever fn makes of it, so the new dataset has the same mask. Memory: one chunk of
    inputs and outputs. Returns the new meta."""
    if len(fns) != len(data.views):
        raise ValueError(f"map_views_in_chunks: {len(fns)} functions for {len(data.views)} views")

    def chunks() -> Iterator[Any]:
        for start in range(0, data.n, chunk_rows):
            rows = slice(start, min(start + chunk_rows, data.n))
            outputs = tuple(missing_stays_missing(np.asarray(fn(x)), x) for fn, x in zip(fns, data.rows(rows)))
            labels = None if data.labels is None else np.array(data.labels[rows])
            yield outputs if labels is None else (outputs, labels)

    return write_views_memmap(out_dir, chunks(), data.n, dtype=dtype, with_labels=data.labels is not None)


def missing_stays_missing(output: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``output`` (r, c) with the rows where the input x (r, d) is all NaN (a missing view) set
    to NaN; ``output`` itself when no input row is missing."""
    missing = missing_rows(x)
    return np.where(missing[:, None], np.nan, output) if missing.any() else output


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
    put: Callable[[Any], Any]
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
