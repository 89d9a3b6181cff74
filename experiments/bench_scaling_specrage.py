"""The ``specrage`` stage of experiments/bench_scaling.py, run in a child process (or in each
process of a JAX process group): one epoch of ``train_step`` on batches streamed from the
memmaps, at most two steps in flight, the first step (compilation) timed apart; or, with
``on_device``, the training set in device memory and one compiled scan per epoch."""

from __future__ import annotations

import math
import resource
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling_processes import log, self_rss_mb


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
