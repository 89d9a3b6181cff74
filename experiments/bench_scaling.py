"""Time per epoch and peak memory against n: SpecRaGE trained on InfiniteMNIST streamed from
disk, beside the exact non-parametric solution on the same data.

    cd /work/main && OPENBLAS_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python experiments/bench_scaling.py \\
        --sizes 10000 100000 1000000 --data-dir DATA --exact-timeout 1800

For every n (each stage in a fresh subprocess, so that its peak RSS is its own):

1. generate: InfiniteMNIST (``data.mnist.infinitemnist_chunks``, 50k-row chunks) written to
   per-view ``.npy`` files by ``data.stream.write_views_memmap`` -- never all in RAM.
2. ae (``--ae``): the paper's autoencoder pre-embedding (512-512-2048 -> 10 per view) trained on
   ``--ae-train-rows`` random rows for ``--ae-epochs`` epochs, then every row encoded chunk by
   chunk into new memmaps (``map_views_in_chunks``); SpecRaGE then trains on the codes. The
   encode time is reported apart from the SpecRaGE epoch.
3. specrage: one epoch (ceil(n / m) steps of ``steps.train_step``; ``--steps`` caps it) on batches
   gathered from the memmaps (sorted random indices, ``memmap_batches``) and moved to the device
   by ``prefetch_to_device``; at most two steps in flight (JAX dispatches asynchronously on CPU
   too; without a bound the loop would run ahead and hold every batch of the epoch). The global
   sigma comes from 8 random batches; the first step (compilation) is timed apart.
4. exact: the non-parametric solution SpecRaGE approximates: the kNN Gaussian graph of each
   view on all n points (brute-force kNN in row blocks with ``lax.top_k``, sigma the median
   l-th neighbour distance, (W + W^T)/2, scipy.sparse), the averaged Laplacian
   L-bar = (L1 + L2)/2, and its bottom k eigenvectors (``--exact-solver``: ``lobpcg`` with a
   Jacobi preconditioner, or ``eigsh`` on c*I - L-bar). Killed past ``--exact-timeout`` seconds
   or ``--exact-max-gb`` of RSS; larger n are then skipped.
5. gather (``--gather``): ms per batch of the gather (``MemmapViews.rows``, preadv): sorted vs
   unsorted random indices vs random contiguous blocks, with the files in the page cache (warm)
   and evicted before every batch (cold, ``posix_fadvise(DONTNEED)``); and the same gather
   through the memory map, with the file pages that maps into the process.

Peak memory is ``ru_maxrss`` of each subprocess (``os.wait4``), which includes the Python/JAX
baseline; the SpecRaGE child also reports its RSS right after compilation ("base") so the
growth during the epoch is visible. Output: JSON (``--json``), a log-log PNG (``--png``) of epoch
time and peak memory against n, and a table with the log-log slope of the epoch time between
consecutive sizes (the target from 100k to 1M is <= 1.1: time linear in n).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small LAPACK calls stall with 2 OpenBLAS threads

import argparse
import datetime
import json
import math
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]
RESULT_PREFIX = "RESULT "


# --- process helpers ----------------------------------------------------------------------------


def vm_status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of a process from /proc, in KiB (empty if unavailable)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def run_children(
    task: str,
    params: Sequence[dict],
    *,
    timeout_s: float | None,
    max_rss_gb: float | None,
    env: dict | None = None,
) -> list[dict]:
    """Runs ``task`` in one fresh interpreter per entry of ``params``, side by side (the processes
    of a multi-process run); returns each one's result dict plus ``wall_s``, ``peak_rss_mb``
    (ru_maxrss from wait4, that child only) and ``status`` ('ok', 'timeout', 'memory',
    'failed'). Past ``timeout_s``, or when a child passes ``max_rss_gb``, or when one fails
    while others run, every child still running is killed."""
    child_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    outs = [tempfile.TemporaryFile("w+") for _ in params]
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE), "--child", task, json.dumps(p)],
            stdout=out,
            stderr=None,
            env=child_env,
            cwd=REPO,
        )
        for p, out in zip(params, outs)
    ]
    start = time.perf_counter()
    done: dict[int, dict] = {}
    hwm_kb = [0] * len(procs)
    status = "ok"
    while len(done) < len(procs):
        for i, proc in enumerate(procs):
            if i in done:
                continue
            pid, wait_status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(wait_status)  # reaped here, not by Popen
                done[i] = {"wall_s": time.perf_counter() - start, "peak_kb": max(usage.ru_maxrss, hwm_kb[i])}
                if proc.returncode != 0 and status == "ok":
                    status = "failed"
                continue
            hwm_kb[i] = max(hwm_kb[i], vm_status(proc.pid).get("VmHWM", 0))
            elapsed = time.perf_counter() - start
            if status == "ok" and timeout_s is not None and elapsed > timeout_s:
                status = "timeout"
            elif status == "ok" and max_rss_gb is not None and vm_status(proc.pid).get("VmRSS", 0) > max_rss_gb * 2**20:
                status = "memory"
            if status != "ok":
                os.kill(proc.pid, signal.SIGKILL)
        time.sleep(0.2)
    results = []
    for i, (proc, out) in enumerate(zip(procs, outs)):
        out.seek(0)
        lines = [line for line in out.read().splitlines() if line.startswith(RESULT_PREFIX)]
        out.close()
        result = json.loads(lines[-1][len(RESULT_PREFIX) :]) if lines else {}
        own = status if status != "ok" or (proc.returncode == 0 and lines) else "failed"
        results.append(
            {
                **result,
                "status": own,
                "returncode": proc.returncode,
                "wall_s": done[i]["wall_s"],
                "peak_rss_mb": done[i]["peak_kb"] / 1024,  # Linux: KiB
            }
        )
    return results


def run_child(
    task: str, params: dict, *, timeout_s: float | None, max_rss_gb: float | None, env: dict | None = None
) -> dict:
    """:func:`run_children` for a single process."""
    return run_children(task, [params], timeout_s=timeout_s, max_rss_gb=max_rss_gb, env=env)[0]


def run_process_group(task: str, params: dict, processes: int, *, env: dict | None = None) -> dict:
    """``task`` as ``processes`` processes of one JAX process group on this machine (a free
    coordinator port; each child joins it before JAX starts): process 0's result, with every
    process's wall time, epoch time and peak RSS under ``per_process``."""
    from specrage_jax.cli.launch import free_port

    port = free_port()
    group = [
        {**params, "group": {"coordinator": f"localhost:{port}", "num_processes": processes, "process_id": i}}
        for i in range(processes)
    ]
    results = run_children(task, group, timeout_s=None, max_rss_gb=None, env=env)
    keys = ("status", "wall_s", "epoch_s", "s_per_step", "peak_rss_mb", "rss_after_compile_mb")
    return {**results[0], "processes": processes, "per_process": [{k: r.get(k) for k in keys} for r in results]}


def report(result: dict) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def self_rss_mb() -> float:
    return vm_status().get("VmRSS", 0) / 1024


# --- child tasks --------------------------------------------------------------------------------


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


def join_group(p: dict) -> int:
    """Joins the process group ``p["group"]`` names (before JAX starts); returns the process count."""
    if "group" not in p:
        return 1
    from specrage_jax.training.distributed import ProcessGroup, initialize

    initialize(ProcessGroup(**p["group"]))
    return int(p["group"]["num_processes"])


def local_batches(data, batch_size: int, rng: np.random.Generator):
    """Random global batches (as ``memmap_batches`` draws them), each process gathering only its own
    block of rows (``distributed.local_rows``): V arrays (batch_size / processes, d_v) per item."""
    from specrage_jax.data.stream_batches import random_batch_indices
    from specrage_jax.training.distributed import local_rows

    for idx in random_batch_indices(data.n, batch_size, rng):
        yield data.rows(local_rows(idx))


def task_specrage(p: dict) -> dict:
    processes = join_group(p)
    import jax

    from specrage_jax.config import GraphConfig, ModelConfig, OrthoConfig
    from specrage_jax.data.stream import open_views_memmap
    from specrage_jax.data.stream_batches import memmap_batches, prefetch_to_device
    from specrage_jax.nets.state import create_state
    from specrage_jax.training.loop import estimate_view_scales
    from specrage_jax.training.steps import Batch, train_step

    start = time.perf_counter()
    data = open_views_memmap(p["data"])
    n, m = data.n, p["batch_size"]
    graph = GraphConfig(n_neighbors=p["n_neighbors"], degree_normalization="none")
    rng = np.random.default_rng(p["seed"])
    sample = data.rows(np.sort(rng.choice(n, size=min(n, graph.scale_sample_batches * m), replace=False)))
    scales = estimate_view_scales(sample, graph, m, seed=p["seed"])
    del sample
    model = ModelConfig(n_components=p["k"], view_hidden=tuple(p["hidden"]), temperature=p["temperature"])
    state = create_state(
        data.view_dims,
        model,
        graph,
        OrthoConfig(),
        learning_rate=p["learning_rate"],
        seed=p["seed"],
        view_scales=scales,
    )
    put = mesh = None
    if p["devices"] > 1 or processes > 1:
        from specrage_jax.training.sharding import (
            make_data_mesh,
            replicate,
            shard_batch,
        )

        mesh = make_data_mesh(None if processes > 1 else p["devices"])  # several processes: all devices
        state = replicate(state, mesh)
        put = partial(shard_batch, mesh=mesh)  # the (ortho views, grad views) pair, rows over 'data'
    if p.get("on_device") and processes == 1:
        return specrage_on_device(
            p, data, state, mesh=mesh if p["devices"] > 1 else None, setup_s=time.perf_counter() - start, scales=scales
        )
    ortho_rng, grad_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(p["seed"]).spawn(2))
    if processes > 1:  # each process reads only its rows of every global batch
        pairs = zip(local_batches(data, m, ortho_rng), local_batches(data, m, grad_rng))
    else:
        pairs = zip(memmap_batches(data, m, seed=ortho_rng), memmap_batches(data, m, seed=grad_rng))
    stream = prefetch_to_device(pairs, size=p["prefetch"], sharding=put)
    setup_s = time.perf_counter() - start

    def step(state):
        o, g = next(stream)
        return train_step(state, Batch(views=o), Batch(views=g, ortho_views=o))

    start = time.perf_counter()
    state, metrics = step(state)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - start
    rss_base = self_rss_mb()
    steps = p["steps"] or math.ceil(n / m)
    losses, wait_s = [], 0.0
    start = time.perf_counter()
    for s in range(steps):
        t = time.perf_counter()
        o, g = next(stream)
        wait_s += time.perf_counter() - t
        state, metrics = train_step(state, Batch(views=o), Batch(views=g, ortho_views=o))
        losses.append(metrics["loss"])
        if s >= 1:
            jax.block_until_ready(losses[s - 1])  # at most two steps in flight
        if s % max(1, steps // 10) == 0 and jax.process_index() == 0:
            log(f"  n={n}: step {s}/{steps}, {time.perf_counter() - start:.1f} s")
    jax.block_until_ready(state.params)
    epoch_s = time.perf_counter() - start
    stream.close()
    from specrage_jax.training.distributed import host_local

    losses = [float(host_local(x)) for x in losses]  # several processes: this process's replica
    return {
        "n": n,
        "batch_size": m,
        "steps": steps,
        "epoch_s": epoch_s,
        "s_per_step": epoch_s / steps,
        "samples_per_s": steps * m / epoch_s,
        "input_wait_s": wait_s,
        "compile_s": compile_s,
        "setup_s": setup_s,
        "rss_after_compile_mb": rss_base,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "loss_finite": bool(np.all(np.isfinite(losses))),
        "view_scales": [float(s) for s in scales],
        "devices": [str(d) for d in (jax.devices() if processes > 1 else jax.devices()[: p["devices"]])],
        "processes": processes,
        "self_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def specrage_on_device(p: dict, data, state, *, mesh, setup_s: float, scales) -> dict:
    """``--on-device``: the whole training set copied to the device once
    (``device_epoch.put_training_data``), then ``--epochs`` epochs, each one compiled
    ``lax.scan`` of train_step over the epoch's batches (``train.data_on_device``). The first
    epoch includes compilation; ``epoch_s`` is the median of the others (of the one, if alone)."""
    import jax

    from specrage_jax.training.batches import batch_indices, epoch_rngs
    from specrage_jax.training.device_epoch import (
        put_training_data,
        train_epoch_on_device,
    )

    n, m = data.n, p["batch_size"]
    start = time.perf_counter()
    host = data.rows(np.arange(n))
    device_data = put_training_data(host, None, mesh)
    jax.block_until_ready(device_data)
    del host
    transfer_s = time.perf_counter() - start
    steps = p["steps"] or math.ceil(n / m)
    epochs_s, losses = [], []
    for epoch in range(p["epochs"]):
        grad_rng, ortho_rng = epoch_rngs(p["seed"], epoch)
        grad_idx, ortho_idx = batch_indices(n, m, steps, grad_rng), batch_indices(n, m, steps, ortho_rng)
        t = time.perf_counter()
        state, metrics = train_epoch_on_device(state, device_data, ortho_idx, grad_idx, mesh)
        jax.block_until_ready(metrics)
        epochs_s.append(time.perf_counter() - t)
        losses.append([float(x) for x in (metrics.losses[0], metrics.losses[-1])])
        log(f"  n={n}: epoch {epoch + 1}/{p['epochs']} {epochs_s[-1]:.2f} s, loss {losses[-1][1]:.4g}")
    steady = epochs_s[1:] or epochs_s
    epoch_s = float(np.median(steady))
    return {
        "n": n,
        "batch_size": m,
        "steps": steps,
        "mode": "on_device",
        "epochs": p["epochs"],
        "epochs_s": epochs_s,
        "total_s": float(sum(epochs_s)),
        "epoch_s": epoch_s,
        "s_per_step": epoch_s / steps,
        "samples_per_s": steps * m / epoch_s,
        "transfer_s": transfer_s,
        "setup_s": setup_s,
        "first_epoch_s": epochs_s[0],
        "loss_first": losses[0][0],
        "loss_last": losses[-1][1],
        "loss_finite": bool(np.all(np.isfinite(losses))),
        "view_scales": [float(s) for s in scales],
        "devices": [str(d) for d in jax.devices()][: p["devices"]],
        "self_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def exact_knn(x: np.ndarray, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force kNN of every row of x (n, d), itself excluded: (n, l) squared distances, indices."""
    import jax
    import jax.numpy as jnp

    n = x.shape[0]
    block = int(min(n, max(16, min(2048, 2**26 // n))))  # a (block, n) distance tile of at most 256 MB
    xd = jnp.asarray(x)
    sq = jnp.sum(xd * xd, axis=1)

    @jax.jit
    def tile(xd, sq, start):  # x passed in, not closed over: a closure would embed it as a constant
        rows = jax.lax.dynamic_slice_in_dim(xd, start, block)
        d2 = jnp.maximum(sq[start + jnp.arange(block)][:, None] + sq[None, :] - 2.0 * rows @ xd.T, 0.0)
        d2 = d2.at[jnp.arange(block), start + jnp.arange(block)].set(jnp.inf)
        neg, idx = jax.lax.top_k(-d2, n_neighbors)
        return -neg, idx

    dists, index = np.empty((n, n_neighbors), np.float32), np.empty((n, n_neighbors), np.int64)
    for start in range(0, n, block):
        s = min(start, n - block)  # the last tile overlaps the previous one: fixed shape
        d2, idx = tile(xd, sq, s)
        dists[s : s + block], index[s : s + block] = np.asarray(d2), np.asarray(idx)
    return dists, index


def knn_laplacian(dists: np.ndarray, index: np.ndarray, bandwidth_factor: float = 2.0):
    """L = D - (W + W^T)/2 (scipy CSR) of the kNN Gaussian graph of squared distances (n, l), sigma
    the median l-th neighbour distance: ``baselines.sparse_gaussian_graph`` + ``sparse_laplacian``."""
    from specrage_jax.ops.spectral import sparse_gaussian_graph, sparse_laplacian

    return sparse_laplacian(
        sparse_gaussian_graph(dists, index, sigma_neighbor=index.shape[1], bandwidth_factor=bandwidth_factor)
    )


def task_exact(p: dict) -> dict:
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla

    from specrage_jax.data.stream import open_views_memmap

    data = open_views_memmap(p["data"])
    start = time.perf_counter()
    views = data.rows(slice(None))  # O(n d) in RAM: the exact method needs every point
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    laplacians = [knn_laplacian(*exact_knn(x, p["n_neighbors"])) for x in views]
    l_bar = (sum(laplacians) / len(laplacians)).tocsr()
    del views, laplacians
    graph_s = time.perf_counter() - start
    log(f"  exact n={data.n}: graph {graph_s:.1f} s, solving")
    start = time.perf_counter()
    k, rng = p["k"], np.random.default_rng(p["seed"])
    if p["solver"] == "lobpcg":
        init = rng.standard_normal((data.n, k))
        jacobi = sp.diags(1.0 / np.maximum(l_bar.diagonal(), 1e-12))
        values, _vectors = sla.lobpcg(l_bar, init, M=jacobi, largest=False, tol=p["tol"], maxiter=p["maxiter"])
    else:
        bound = 2.0 * float(l_bar.diagonal().max())  # Gershgorin: the spectrum of L-bar is in [0, bound]
        shifted = sla.LinearOperator(l_bar.shape, matvec=lambda v: bound * v - l_bar @ v, dtype=np.float64)
        values, _vectors = sla.eigsh(shifted, k=k, which="LA", tol=p["tol"], v0=rng.standard_normal(data.n))
        values = bound - values
    solve_s = time.perf_counter() - start
    return {
        "n": data.n,
        "load_s": load_s,
        "graph_s": graph_s,
        "solve_s": solve_s,
        "total_s": load_s + graph_s + solve_s,
        "eigenvalues": sorted(float(v) for v in values),
        "nnz": int(l_bar.nnz),
        "solver": p["solver"],
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


TASKS = {
    "generate": task_generate,
    "ae": task_ae,
    "specrage": task_specrage,
    "exact": task_exact,
    "gather": task_gather,
}


# --- the driver ---------------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = {name: metadata.version(name) for name in ("jax", "jaxlib", "flax", "numpy", "scipy")}
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        **versions,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "loadavg_start": os.getloadavg(),
        "mem_total_gb": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def loglog_slope(x0: float, y0: float, x1: float, y1: float) -> float:
    return math.log(y1 / y0) / math.log(x1 / x0)


def summarize(sizes: dict[str, dict]) -> dict:
    """Log-log slopes of the SpecRaGE epoch time between consecutive sizes (and 100k -> 1M)."""
    ok = sorted(
        (int(n), r["specrage"]["epoch_s"]) for n, r in sizes.items() if r.get("specrage", {}).get("status") == "ok"
    )
    slopes = {f"{a}->{b}": loglog_slope(a, ta, b, tb) for (a, ta), (b, tb) in zip(ok, ok[1:])}
    times = dict(ok)
    target = (
        loglog_slope(100_000, times[100_000], 1_000_000, times[1_000_000])
        if {100_000, 1_000_000} <= set(times)
        else None
    )
    return {
        "epoch_time_slopes": slopes,
        "epoch_time_slope_100k_1M": target,
        "specrage_peak_rss_mb": {n: r.get("specrage", {}).get("peak_rss_mb") for n, r in sizes.items()},
    }


def plot(sizes: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted(int(n) for n in sizes)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))

    def series(stage: str, key: str, scale: float = 1.0):
        pts = [
            (n, sizes[str(n)][stage][key] * scale)
            for n in ns
            if sizes[str(n)].get(stage, {}).get("status") == "ok" and sizes[str(n)][stage].get(key)
        ]
        return [p[0] for p in pts], [p[1] for p in pts]

    colors = {"specrage": "C0", "exact": "C1", "generate": "C2", "ae": "C3"}
    curves = (
        (ax_t, "specrage", "epoch_s", "SpecRaGE, one epoch", "o-"),
        (ax_t, "exact", "total_s", "exact: kNN graph + eigensolver", "s--"),
        (ax_t, "ae", "encode_s", "AE encode (all rows)", "^:"),
        (ax_t, "generate", "seconds", "generate + write memmaps", "x:"),
        (ax_m, "specrage", "peak_rss_mb", "SpecRaGE epoch (ru_maxrss)", "o-"),
        (ax_m, "specrage", "rss_after_compile_mb", "SpecRaGE RSS after compiling", "o:"),
        (ax_m, "exact", "peak_rss_mb", "exact", "s--"),
        (ax_m, "ae", "peak_rss_mb", "AE train + encode", "^:"),
        (ax_m, "generate", "peak_rss_mb", "generate (one chunk at a time)", "x:"),
    )
    for ax, stage, key, label, style in curves:
        x, y = series(stage, key)
        if x:
            ax.loglog(x, y, style, label=label, color=colors[stage])
    for n in ns:
        exact = sizes[str(n)].get("exact", {})
        if exact.get("status") in ("timeout", "memory"):
            ax_t.axvline(n, color="grey", lw=0.8, ls=":")
            ax_t.annotate(f"exact: {exact['status']}", (n, ax_t.get_ylim()[1]), rotation=90, va="top", fontsize=7)
    ax_t.set(xlabel="n (samples)", ylabel="seconds", title="time against n")
    ax_m.set(xlabel="n (samples)", ylabel="peak RSS (MB)", title="peak memory against n")
    for ax in (ax_t, ax_m):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(sizes: dict[str, dict], summary: dict) -> None:
    print(
        f"\n{'n':>9} {'write s':>8} {'AE train/enc s':>15} {'compile s':>9} {'epoch s':>8} {'s/step':>7} "
        f"{'wait s':>6} {'peak MB':>8} {'base MB':>8} {'exact s':>9} {'exact MB':>9}"
    )
    for n in sorted(sizes, key=int):
        r = sizes[n]
        g, a, s, e = (r.get(k, {}) for k in ("generate", "ae", "specrage", "exact"))
        ae = f"{a['train_s']:.1f}/{a['encode_s']:.1f}" if a.get("status") == "ok" else "-"
        ok = s.get("status") == "ok"
        exact = f"{e['total_s']:.1f}" if e.get("status") == "ok" else e.get("status", "-")
        nan = float("nan")
        print(
            f"{int(n):>9} {g.get('seconds', nan):>8.1f} {ae:>15} "
            f"{s.get('compile_s', nan) if ok else nan:>9.1f} "
            f"{s['epoch_s'] if ok else nan:>8.2f} {s['s_per_step'] if ok else nan:>7.3f} "
            f"{s.get('input_wait_s', nan) if ok else nan:>6.2f} {s.get('peak_rss_mb', nan):>8.0f} "
            f"{s.get('rss_after_compile_mb', nan) if ok else nan:>8.0f} {exact:>9} {e.get('peak_rss_mb', nan):>9.0f}"
        )
        for stage in sorted(k for k in r if k.startswith("specrage_") and k.endswith("_processes")):
            group = r[stage]
            for i, proc in enumerate(group.get("per_process", [])):
                if proc.get("status") == "ok":
                    print(
                        f"{'':>9} {group['processes']} processes, process {i}: epoch {proc['epoch_s']:.2f} s, "
                        f"{proc['s_per_step']:.3f} s/step, peak {proc['peak_rss_mb']:.0f} MB "
                        f"(after compilation {proc['rss_after_compile_mb']:.0f} MB)"
                    )
                else:
                    print(f"{'':>9} {group['processes']} processes, process {i}: {proc.get('status')}")
        if ok and s.get("mode") == "on_device":
            print(
                f"{'':>9} on device: {s['epochs']} epochs in {s['total_s']:.1f} s (first, with compilation: "
                f"{s['first_epoch_s']:.1f} s; copy to device {s['transfer_s']:.1f} s)"
            )
    for span, slope in summary["epoch_time_slopes"].items():
        print(f"log-log slope of the SpecRaGE epoch time, n {span}: {slope:.3f}")
    target = summary["epoch_time_slope_100k_1M"]
    print(
        "slope 100k -> 1M: "
        + (
            "not measured (needs both sizes)"
            if target is None
            else f"{target:.3f} ({'meets' if target <= 1.1 else 'ABOVE'} the target <= 1.1)"
        )
    )


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"), help="holds mnist/ IDX files")
    ap.add_argument("--fake-mnist", action="store_true", help="random stand-in images (for tests; no data needed)")
    ap.add_argument("--work-dir", default=None, help="where the memmaps go (default: a temporary directory)")
    ap.add_argument("--keep-data", action="store_true", help="keep the memmaps (default: delete after each n)")
    ap.add_argument("--storage-dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--chunk-size", type=int, default=50_000, help="InfiniteMNIST rows per generated chunk")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=0, help="steps per epoch; 0 = ceil(n / batch)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--n-neighbors", type=int, default=30, help="l (the infinitemnist preset's)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[1024, 1024, 512], help="view-net widths")
    ap.add_argument("--temperature", type=float, default=250000.0)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument(
        "--on-device",
        action="store_true",
        help="hold the training set in device memory, one compiled scan per epoch (the GPU path)",
    )
    ap.add_argument("--epochs", type=int, default=1, help="SpecRaGE epochs (--on-device; the streamed path runs one)")
    ap.add_argument("--devices", type=int, default=1, help="data-parallel devices (CPU: forced host devices)")
    ap.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1],
        help="process counts of the SpecRaGE epoch, each run on the same data: N > 1 starts N local processes "
        "of one JAX process group (--devices each), every one reading only its rows of each batch",
    )
    ap.add_argument("--ae", action="store_true", help="autoencoder pre-embedding before SpecRaGE")
    ap.add_argument("--ae-train-rows", type=int, default=20_000)
    ap.add_argument("--ae-epochs", type=int, default=3)
    ap.add_argument("--ae-hidden", type=int, nargs="+", default=[512, 512, 2048])
    ap.add_argument("--ae-dim", type=int, default=10)
    ap.add_argument("--no-exact", action="store_true")
    ap.add_argument("--exact-timeout", type=float, default=1800.0, help="seconds before the exact run is killed")
    ap.add_argument(
        "--exact-max-gb", type=float, default=0.8 * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    )
    ap.add_argument("--exact-solver", default="lobpcg", choices=["lobpcg", "eigsh"])
    ap.add_argument("--exact-tol", type=float, default=1e-5)
    ap.add_argument("--gather", action="store_true", help="also time the batch gather variants")
    ap.add_argument("--compile-cache", default=None, help="persistent JAX compilation cache dir (tests)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(REPO / "experiments" / "results" / "bench_scaling_cpu.json"))
    ap.add_argument("--png", default=None, help="default: the --json path with .png")
    args = ap.parse_args(argv)

    info = machine_info()
    print(
        f"# {info['cpu_model']}, {info['cpu_count']} cores, {info['mem_total_gb']:.0f} GB, jax {info['jax']}, "
        f"{info['date']}, load {info['loadavg_start']}",
        flush=True,
    )
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="bench_scaling_"))
    results: dict[str, Any] = {"machine": info, "args": vars(args), "sizes": {}}
    json_path = Path(args.json)
    png_path = Path(args.png) if args.png else json_path.with_suffix(".png")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    exact_stopped = None
    common = {"seed": args.seed, "data_dir": args.data_dir, "fake_mnist": args.fake_mnist}
    env = {"XLA_FLAGS": f"--xla_force_host_platform_device_count={args.devices}"} if args.devices > 1 else {}
    if args.compile_cache:  # every child reads it from the environment
        env.update(JAX_COMPILATION_CACHE_DIR=args.compile_cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")

    def save() -> None:  # after every stage: a run killed later keeps what it measured
        results["summary"] = summarize(results["sizes"])
        json_path.write_text(json.dumps(results, indent=1, default=str))

    for n in sorted(args.sizes):
        r: dict[str, Any] = {}
        results["sizes"][str(n)] = r
        raw = work / f"infinitemnist_{n}"
        log(f"n={n}: generating")
        r["generate"] = run_child(
            "generate",
            {**common, "n": n, "out": str(raw), "chunk_size": args.chunk_size, "dtype": args.storage_dtype},
            timeout_s=None,
            max_rss_gb=None,
            env=env,
        )
        save()
        train_dir = raw
        if args.ae and r["generate"]["status"] == "ok":
            log(f"n={n}: autoencoder")
            codes = work / f"infinitemnist_{n}_ae"
            r["ae"] = run_child(
                "ae",
                {
                    **common,
                    "data": str(raw),
                    "out": str(codes),
                    "train_rows": args.ae_train_rows,
                    "epochs": args.ae_epochs,
                    "hidden": args.ae_hidden,
                    "dim": args.ae_dim,
                    "batch_size": 256,
                    "chunk_rows": 8192,
                },
                timeout_s=None,
                max_rss_gb=None,
                env=env,
            )
            save()
            train_dir = codes
        if r["generate"]["status"] == "ok" and r.get("ae", {}).get("status", "ok") == "ok":
            if args.gather:
                log(f"n={n}: gather timings")
                r["gather"] = run_child(
                    "gather",
                    {**common, "data": str(raw), "batch_size": args.batch_size, "repeats": 30},
                    timeout_s=None,
                    max_rss_gb=None,
                    env=env,
                )
                save()
            specrage_params = {
                **common,
                "data": str(train_dir),
                "batch_size": min(args.batch_size, n),
                "steps": args.steps,
                "k": args.k,
                "n_neighbors": args.n_neighbors,
                "hidden": args.hidden,
                "temperature": args.temperature,
                "learning_rate": args.learning_rate,
                "prefetch": args.prefetch,
                "devices": args.devices,
                "on_device": args.on_device,
                "epochs": args.epochs,
            }
            for count in args.processes:
                log(f"n={n}: SpecRaGE epoch ({count} process{'es' if count > 1 else ''})")
                stage = "specrage" if count == args.processes[0] else f"specrage_{count}_processes"
                r[stage] = (
                    run_child("specrage", specrage_params, timeout_s=None, max_rss_gb=None, env=env)
                    if count == 1
                    else run_process_group("specrage", specrage_params, count, env=env)
                )
                save()
            save()
            if args.no_exact:
                pass
            elif exact_stopped is not None:
                r["exact"] = {"status": f"skipped ({exact_stopped})"}
            else:
                log(f"n={n}: exact solution")
                r["exact"] = run_child(
                    "exact",
                    {
                        **common,
                        "data": str(train_dir),
                        "k": args.k,
                        "n_neighbors": args.n_neighbors,
                        "solver": args.exact_solver,
                        "tol": args.exact_tol,
                        "maxiter": 500,
                    },
                    timeout_s=args.exact_timeout,
                    max_rss_gb=args.exact_max_gb,
                    env=env,
                )
                if r["exact"]["status"] in ("timeout", "memory"):
                    exact_stopped = f"n={n} exceeded the {r['exact']['status']} limit"
        if not args.keep_data:
            shutil.rmtree(raw, ignore_errors=True)
            shutil.rmtree(work / f"infinitemnist_{n}_ae", ignore_errors=True)
        for stage, value in r.items():
            log(f"n={n} {stage}: " + json.dumps({k: v for k, v in value.items() if not isinstance(v, (dict, list))}))
        save()
    if not args.work_dir and not args.keep_data:
        shutil.rmtree(work, ignore_errors=True)
    info["loadavg_end"] = os.getloadavg()
    results["summary"] = summarize(results["sizes"])
    json_path.write_text(json.dumps(results, indent=1, default=str))
    plot(results["sizes"], png_path)
    print_table(results["sizes"], results["summary"])
    print(f"\nwrote {json_path} and {png_path}")
    return results


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        report(TASKS[sys.argv[2]](json.loads(sys.argv[3])))
    else:
        main()
