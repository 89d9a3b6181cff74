"""The data stages of experiments/bench_scaling.py, each run in a child process: ``generate``
(InfiniteMNIST written chunk by chunk to per-view memmaps), ``ae`` (the paper's autoencoder
pre-embedding trained on a sample of rows, then every row encoded into new memmaps) and
``gather`` (ms per batch of the row gather: index draws, warm and cold page cache, and the same
gather through the memory map)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling_processes import vm_status


def mnist_source(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """MNIST images (N, 784) in [0, 1] and labels, or small random stand-ins (``--fake-mnist``)."""
    if p["fake_mnist"]:
        rng = np.random.default_rng(0)
        labels = np.arange(500) % 10
        prototypes = rng.uniform(size=(10, 784)).astype(np.float32)
        images = np.clip(prototypes[labels] + 0.2 * rng.standard_normal((500, 784)), 0, 1).astype(np.float32)
        return images, labels
    from specrage_jax.data.mnist import load_mnist_arrays

    return load_mnist_arrays(p["data_dir"])


def task_generate(p: dict) -> dict:
    from specrage_jax.data.mnist import infinitemnist_chunks
    from specrage_jax.data.stream import write_views_memmap

    images, labels = mnist_source(p)
    start = time.perf_counter()
    chunks = infinitemnist_chunks(images, labels, n_samples=p["n"], chunk_size=p["chunk_size"], seed=p["seed"])
    meta = write_views_memmap(p["out"], chunks, p["n"], (784, 784), dtype=p["dtype"], with_labels=True)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rows_per_s": p["n"] / seconds,
        "meta": meta,
        "bytes_on_disk": sum(f.stat().st_size for f in Path(p["out"]).iterdir()),
    }


def task_ae(p: dict) -> dict:
    from specrage_jax.config import AutoencoderConfig
    from specrage_jax.data.stream import open_views_memmap
    from specrage_jax.data.stream_batches import map_views_in_chunks
    from specrage_jax.training.autoencoder import train_autoencoder

    data = open_views_memmap(p["data"])
    rng = np.random.default_rng(p["seed"])
    rows = np.sort(rng.choice(data.n, size=min(data.n, p["train_rows"]), replace=False))
    sample = data.rows(rows)
    config = AutoencoderConfig(
        enabled=True, hidden=tuple(p["hidden"]), embedding_dim=p["dim"], epochs=p["epochs"], batch_size=p["batch_size"]
    )
    start = time.perf_counter()
    nets = [train_autoencoder(x, config, seed=p["seed"] + v, name=f"view {v}") for v, x in enumerate(sample)]
    train_s = time.perf_counter() - start
    del sample
    start = time.perf_counter()
    meta = map_views_in_chunks([net.encode for net in nets], data, p["out"], chunk_rows=p["chunk_rows"])
    return {
        "train_s": train_s,
        "encode_s": time.perf_counter() - start,
        "train_rows": int(rows.size),
        "final_losses": [net.losses[-1] for net in nets],
        "meta": meta,
    }


def task_gather(p: dict) -> dict:
    """ms per batch (both views) of ``MemmapViews.rows`` (preadv) for three index draws, with the
    files in the page cache (warm) and evicted before every batch (cold); and, for comparison,
    the same sorted gather through the memory map, with the file pages it maps into the process."""
    from specrage_jax.data.stream import open_views_memmap
    from specrage_jax.data.stream_batches import random_batch_indices

    data = open_views_memmap(p["data"])
    m, reps, rng = p["batch_size"], p["repeats"], np.random.default_rng(p["seed"])
    files = [data.directory / f"view_{v}.npy" for v in range(len(data.views))]

    def evict() -> None:
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)

    def warm_up() -> None:
        for start in range(0, data.n, 65536):
            data.rows(slice(start, start + 65536))

    def blocks(size: int) -> np.ndarray:
        starts = np.sort(rng.choice(data.n // size, size=m // size, replace=False)) * size
        return (starts[:, None] + np.arange(size)).ravel()

    draws = {
        "random_unsorted": lambda: next(random_batch_indices(data.n, m, rng, sort=False)),
        "random_sorted": lambda: next(random_batch_indices(data.n, m, rng)),
        "blocks_of_32": lambda: blocks(32),
    }
    out: dict[str, Any] = {}
    for cache in ("warm", "cold"):
        if cache == "warm":
            warm_up()
        for name, draw in draws.items():
            times = []
            for _ in range(reps):
                idx = draw()
                if cache == "cold":
                    evict()
                t = time.perf_counter()
                data.rows(idx)
                times.append(time.perf_counter() - t)
            out[f"{cache}/{name}_ms"] = 1e3 * float(np.median(times))
    warm_up()
    times, mapped, release = [], [], []
    for _ in range(reps):
        idx = next(random_batch_indices(data.n, m, rng))
        before = vm_status().get("RssFile", 0)
        t = time.perf_counter()
        [np.asarray(v[idx], dtype=np.float32) for v in data.views]
        times.append(time.perf_counter() - t)
        mapped.append((vm_status().get("RssFile", 0) - before) / 1024)
        t = time.perf_counter()
        data.release_pages()
        release.append(time.perf_counter() - t)
    out["warm/mmap_sorted_ms"] = 1e3 * float(np.median(times))
    out["mmap_sorted_file_pages_mapped_mb"] = float(np.median(mapped))
    out["mmap_release_pages_ms"] = 1e3 * float(np.median(release))
    return out
