"""One SpecRaGE training iteration as the training loop runs it, timed for
experiments/bench_steps.py: a pool of random batches, a realistic global sigma per view, then
``ortho_step`` + ``grad_step`` on distinct batches (optionally data-parallel over a mesh), with
XLA's FLOPs and the compile time of both steps and the time of each step alone."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from specrage_jax.config import GraphConfig, OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.ops.affinity import median_neighbor_scale, nearest_neighbors, pairwise_sq_distances
from specrage_jax.training.sharding import replicate
from specrage_jax.training.steps import Batch, grad_step, ortho_step

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_steps_timing import median_time, xla_flops


def make_pool(view_dims: Sequence[int], m: int, n_batches: int, seed: int) -> list[tuple[jax.Array, ...]]:
    rng = np.random.default_rng(seed)
    return [
        tuple(jnp.asarray(rng.standard_normal((m, d), dtype=np.float32)) for d in view_dims) for _ in range(n_batches)
    ]


def view_scales_from(batch: Sequence[jax.Array], graph: GraphConfig) -> list[float]:
    """A realistic global sigma per view (median distance to the l-th neighbour in one batch)."""
    out = []
    for x in batch:
        knn_d2, _ = nearest_neighbors(pairwise_sq_distances(x), graph.n_neighbors)
        out.append(float(median_neighbor_scale(knn_d2, graph.sigma_neighbor)))
    return out


def bench_iteration(
    view_dims, pool, model_cfg, graph, through: bool, *, scales, iters, repeats, warmup, lr=1e-3, mesh=None
):
    ortho_cfg = OrthoConfig(grad_through_r_inv=through)
    state = create_state(view_dims, model_cfg, graph, ortho_cfg, learning_rate=lr, seed=0, view_scales=scales)
    if mesh is not None:  # data parallel: state replicated, batches (the pool) sharded over 'data'
        state = replicate(state, mesh)
    n = len(pool)

    def batches(i):
        o, g = pool[(2 * i) % n], pool[(2 * i + 1) % n]
        return Batch(views=o), Batch(views=g, ortho_views=o if through else None)

    ob, gb = batches(0)
    flops_o, compile_o = xla_flops(ortho_step, state, ob)
    flops_g, compile_g = xla_flops(grad_step, state, gb)

    counter = [0]
    last = {}

    def one_iteration():
        nonlocal state
        ob, gb = batches(counter[0])
        counter[0] += 1
        state = ortho_step(state, ob)
        state, metrics = grad_step(state, gb)
        last["metrics"] = metrics

    t0 = time.perf_counter()
    one_iteration()
    jax.block_until_ready((state, last["metrics"]))
    first_call = time.perf_counter() - t0

    def group():  # `iters` iterations, blocking once at the end, as the training loop would
        for _ in range(iters):
            one_iteration()
        jax.block_until_ready((state.params, state.ortho, last["metrics"]))

    t = median_time(group, repeats=repeats, warmup=warmup, inner=1)
    t = {
        "median_s": t["median_s"] / iters,
        "min_s": t["min_s"] / iters,
        "all_s": [x / iters for x in t["all_s"]],
        "ref_gflops": t["ref_gflops"],
    }

    # ortho_step and grad_step alone (same state, same batches)
    def o_only():
        nonlocal state
        state = ortho_step(state, ob)
        jax.block_until_ready(state.ortho)

    def g_only():
        nonlocal state
        state, metrics = grad_step(state, gb)
        jax.block_until_ready(metrics)

    t_o = median_time(o_only, repeats=repeats, warmup=warmup, inner=max(1, iters))
    t_g = median_time(g_only, repeats=repeats, warmup=warmup, inner=max(1, iters))
    loss = float(last["metrics"]["loss"])
    return {
        "seconds": t,
        "ortho_step_s": t_o["median_s"],
        "grad_step_s": t_g["median_s"],
        "ortho_step_timing": t_o,
        "grad_step_timing": t_g,
        "xla_flops": {"ortho_step": flops_o, "grad_step": flops_g, "iteration": flops_o + flops_g},
        "compile_s": {"ortho_step": compile_o, "grad_step": compile_g},
        "first_iteration_s": first_call,
        "final_loss": loss,
        "loss_finite": bool(np.isfinite(loss)),
    }, state
