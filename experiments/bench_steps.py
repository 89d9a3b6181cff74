"""Throughput of one SpecRaGE training iteration (ortho_step + grad_step) against the
machine's float32 matmul rate, measured in one run.

    cd /work/main && PYTHONPATH=. .venv/bin/python experiments/bench_steps.py \
        --repeats 3 --iters 10 --profile --json bench_steps.json

What it measures (all timings: block_until_ready on the outputs, after warmup, median over
repeats; compilation is excluded from the rates and reported on its own):

1. The float32 matmul rate through XLA: jitted (n, n) @ (n, n) for n = 1024 and 2048, at the
   start and at the end of the run. The reference rate is the median over both sizes and both
   passes. Because the machine is shared, every timed group is also paired with a 2048^3 matmul
   timed right before it, and the reported fraction ``frac`` is the median over repeats of
   (achieved GFLOP/s) / (that paired matmul rate).
2. One training iteration as the loop runs it: ``state = ortho_step(state, Batch(views=o))``
   then ``state, metrics = grad_step(state, Batch(views=g, ortho_views=o or None))`` with
   distinct random batches o, g from a pool, for each case (two 784-d views; 240/216-d views)
   and ``OrthoConfig(grad_through_r_inv=True/False)``.
3. FLOPs per iteration, analytically (formula below) and from XLA's cost analysis of the
   compiled ortho_step and grad_step (``jit(f).lower(...).compile().cost_analysis()['flops']``).
4. With ``--profile``: the same-run cost of the pieces (forward, forward+backward, the
   affinity and its parts, the loss, the QR layer, Adam, each dense layer's matmul shape), built
   from the library's own functions.
5. With ``--devices N``: the same iteration data-parallel (``specrage_jax.training.sharding``: state
   replicated, every pool batch sharded over a 'data' mesh of N devices). Without an
   accelerator N host devices are forced; they share the same cores, so on CPU this exercises
   the sharded path and its collectives, it is not a speed-up. XLA's cost analysis then counts
   the FLOPs of one device's program (the "XLA GF" column is about 1/N of the analytic count).

Analytic FLOP count of one iteration (batch m, views d_v, k outputs, V views):
  dense layer (in -> out):   forward 2*m*in*out.  Backward for the parameter gradient
                             4*m*in*out (dW = x^T g and dx = g W^T), except the first layer of
                             every network, whose input gradient is never needed (views are
                             not differentiated; XLA prunes it): 2*m*in*out there.
  networks:                  every view net d_v -> 1024 -> 1024 -> 512 -> k and the weighting
                             net sum(d_v) -> 100 -> 100 -> 100 -> V; fwd(m) and bwd(m) sum the
                             above over all their layers.
  affinity (grad batch):     the m x m x d_v distance matmul per view, 2*m*m*d_v
                             (top_k, exp, scatter, symmetrize are O(m^2) or O(m l): ignored).
  loss:                      tr(Y^T L Y) through W @ Y: forward 2*m*m*k; backward 2*m*m*k for
                             dY and 2*m*m*k for dW (the outer product that reaches alpha):
                             6*m*m*k in all.
  QR, R^-1, Adam:            O(m k^2), O(k^3), O(#params): ignored.
  ortho_step:                fwd(m) on the ortho batch.
  grad_step, r_inv const:    fwd(m) + bwd(m) + affinity + loss on the grad batch.
  grad_step, grad through:   the above, plus fwd(m) + bwd(m) on the ortho batch (R^-1 is
                             recomputed from it and differentiated).
XLA's 'flops' counts every dot as 2*M*N*K plus one flop per elementwise op; it does not see
the FLOPs inside LAPACK custom calls (the QR), which are negligible here.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small LAPACK calls stall with 2 OpenBLAS threads

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any


def _force_host_devices(argv: Sequence[str]) -> None:
    """With ``--devices N`` (N > 1) and no accelerator, ask XLA for N host devices: it reads the
    flag only when JAX starts, so this runs before the import. Harmless on GPU/TPU hosts."""
    if "--devices" in argv and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        count = argv[argv.index("--devices") + 1]
        os.environ["XLA_FLAGS"] = (
            f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
        )


_force_host_devices(sys.argv)

import jax
import jax.numpy as jnp
import numpy as np
import optax

import specrage_jax.training.steps as steps_module
from specrage_jax.config import GraphConfig, ModelConfig, OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.ops.affinity import (
    knn_gaussian_affinity,
    median_neighbor_scale,
    nearest_neighbors,
    pairwise_sq_distances,
)
from specrage_jax.ops.laplacian import weighted_laplacian_loss
from specrage_jax.ops.objective import batch_affinities
from specrage_jax.ops.ortho import orthonormalizer
from specrage_jax.training.sharding import make_data_mesh, replicate, shard_batch
from specrage_jax.training.steps import (
    Batch,
    _fuse,
    grad_step,
    ortho_step,
)

CASES = {"784": (784, 784), "240_216": (240, 216)}


# --- timing helpers ---------------------------------------------------------------------------


class PairedRef:
    """An (n, n) @ (n, n) matmul timed right before every timed group, so that every timing has
    a matmul rate from the same moment (the machine is shared: other processes swing timings
    by 2-3x, and the ratio of adjacent timings is far steadier than either)."""

    def __init__(self, n: int = 2048, calls: int = 2):
        key = jax.random.PRNGKey(n)
        self.a = jax.random.normal(key, (n, n), jnp.float32)
        self.b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32)
        self.f = jax.jit(lambda a, b: a @ b)
        self.flops = 2.0 * n**3 * calls
        self.calls = calls
        jax.block_until_ready(self.f(self.a, self.b))

    def rate(self) -> float:
        t0 = time.perf_counter()
        for _ in range(self.calls):
            jax.block_until_ready(self.f(self.a, self.b))
        return self.flops / (time.perf_counter() - t0) / 1e9


REF: PairedRef | None = None


def _median_time(run_once: Callable[[], Any], *, repeats: int, warmup: int, inner: int) -> dict:
    """Seconds per call of ``run_once`` (which must block): median/min over ``repeats`` groups of
    ``inner`` calls, after ``warmup`` calls; with the paired matmul rate before every group."""
    for _ in range(warmup):
        run_once()
    per_call, ref = [], []
    for _ in range(repeats):
        if REF is not None:
            ref.append(REF.rate())
        t0 = time.perf_counter()
        for _ in range(inner):
            run_once()
        per_call.append((time.perf_counter() - t0) / inner)
    return {"median_s": statistics.median(per_call), "min_s": min(per_call), "all_s": per_call, "ref_gflops": ref}


def paired_fraction(flops: float, timing: dict) -> float | None:
    """Median over repeats of (flops / seconds) / (the matmul rate measured just before)."""
    if not flops or not timing.get("ref_gflops"):
        return None
    return statistics.median(flops / t / 1e9 / r for t, r in zip(timing["all_s"], timing["ref_gflops"]))


def _auto_inner(run_once: Callable[[], Any], target_s: float) -> int:
    t0 = time.perf_counter()
    run_once()
    dt = time.perf_counter() - t0
    return max(1, min(200, int(target_s / max(dt, 1e-6))))


def time_fn(fn: Callable, args: tuple, *, repeats: int, warmup: int, target_s: float = 0.3) -> dict:
    """Time a pure (non-donating) jitted ``fn(*args)``."""

    def once():
        jax.block_until_ready(fn(*args))

    once()  # compile
    inner = _auto_inner(once, target_s)
    out = _median_time(once, repeats=repeats, warmup=warmup, inner=inner)
    out["inner"] = inner
    return out


def xla_flops(jitted: Callable, *args) -> tuple[float, float]:
    """(XLA cost-analysis flops, lower+compile seconds) of ``jitted`` at ``args``."""
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    seconds = time.perf_counter() - t0
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX returned one dict per device
        cost = cost[0] if cost else {}
    return float((cost or {}).get("flops", float("nan"))), seconds


# --- 1. matmul rate ---------------------------------------------------------------------------


def matmul_rates(sizes: Sequence[int], *, repeats: int, warmup: int) -> dict:
    matmul = jax.jit(lambda a, b: a @ b)
    rates = {}
    for n in sizes:
        key = jax.random.PRNGKey(n)
        a = jax.random.normal(key, (n, n), jnp.float32)
        b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32)
        t = time_fn(matmul, (a, b), repeats=max(repeats, 5), warmup=warmup, target_s=0.3)
        flops = 2.0 * n**3
        rates[str(n)] = {"gflops": flops / t["median_s"] / 1e9, "best_gflops": flops / t["min_s"] / 1e9, **t}
    return rates


# --- 3. analytic FLOPs ------------------------------------------------------------------------


def network_layers(view_dims: Sequence[int], cfg: ModelConfig, k: int) -> list[list[tuple[int, int]]]:
    """(in, out) of every dense layer, one list per network (view nets, then the weighting net)."""
    nets = []
    for d in view_dims:
        w = [d, *cfg.view_hidden, k]
        nets.append(list(zip(w[:-1], w[1:])))
    w = [sum(view_dims), *cfg.weighting_hidden, len(view_dims)]
    nets.append(list(zip(w[:-1], w[1:])))
    return nets


def analytic_flops(view_dims: Sequence[int], cfg: ModelConfig, k: int, m: int) -> dict:
    nets = network_layers(view_dims, cfg, k)
    fwd = sum(2 * m * i * o for net in nets for (i, o) in net)
    first = sum(2 * m * net[0][0] * net[0][1] for net in nets)
    bwd = 2 * fwd - first
    affinity = sum(2 * m * m * d for d in view_dims)
    loss = 6 * m * m * k
    ortho = fwd
    grad_const = fwd + bwd + affinity + loss
    grad_through = grad_const + fwd + bwd
    return {
        "forward": fwd,
        "backward": bwd,
        "backward_naive_2x": 2 * fwd,
        "affinity": affinity,
        "loss": loss,
        "ortho_step": ortho,
        "grad_step": {"False": grad_const, "True": grad_through},
        "iteration": {"False": ortho + grad_const, "True": ortho + grad_through},
        "n_params": sum(i * o + o for net in nets for (i, o) in net),
    }


# --- 2. one training iteration ----------------------------------------------------------------


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

    t = _median_time(group, repeats=repeats, warmup=warmup, inner=1)
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

    t_o = _median_time(o_only, repeats=repeats, warmup=warmup, inner=max(1, iters))
    t_g = _median_time(g_only, repeats=repeats, warmup=warmup, inner=max(1, iters))
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


# --- 4. profile of the pieces -----------------------------------------------------------------


def profile_pieces(view_dims, pool, model_cfg, graph, state, *, repeats, warmup) -> dict:
    """Seconds and GFLOP/s of the pieces of an iteration, each a small jitted function built
    from the library's functions (pure; nothing donated)."""
    m = pool[0][0].shape[0]
    k = model_cfg.n_components
    params = state.params
    o, g = pool[0], pool[1]
    scales = state.view_scales
    fl = analytic_flops(view_dims, model_cfg, k, m)
    rows: dict[str, dict] = {}

    def add(name, fn, args, flops):
        t = time_fn(jax.jit(fn), args, repeats=repeats, warmup=warmup)
        rows[name] = {
            "median_s": t["median_s"],
            "min_s": t["min_s"],
            "flops": flops,
            "gflops": (flops / t["median_s"] / 1e9) if flops else None,
            "paired_fraction": paired_fraction(flops, t),
            "timing": t,
        }

    def forward(p, views):
        return _fuse(state, p, views)[0]

    def fwd_bwd(p, views):
        return jax.value_and_grad(lambda q: jnp.sum(jnp.square(forward(q, views))))(p)

    add("forward (1 batch)", forward, (params, g), fl["forward"])
    add("forward x2 (2 calls)", lambda p, a, b: (forward(p, a), forward(p, b)), (params, o, g), 2 * fl["forward"])
    add(
        "forward x2 (concat 2m)",
        lambda p, a, b: forward(p, tuple(jnp.concatenate([x, y]) for x, y in zip(a, b))),
        (params, o, g),
        2 * fl["forward"],
    )
    add("fwd+bwd nets (1 batch)", fwd_bwd, (params, g), fl["forward"] + fl["backward"])
    add(
        "fwd+bwd nets x2 (2 calls)",
        lambda p, a, b: (fwd_bwd(p, a), fwd_bwd(p, b)),
        (params, o, g),
        2 * (fl["forward"] + fl["backward"]),
    )
    add(
        "fwd+bwd nets x2 (concat 2m)",
        lambda p, a, b: fwd_bwd(p, tuple(jnp.concatenate([x, y]) for x, y in zip(a, b))),
        (params, o, g),
        2 * (fl["forward"] + fl["backward"]),
    )
    add("affinity, all views", lambda views: batch_affinities(views, scales, graph), (g,), fl["affinity"])
    x0 = g[0]
    add("  pairwise_sq_distances (view 0)", pairwise_sq_distances, (x0,), 2 * m * m * x0.shape[1])
    d2 = jax.jit(pairwise_sq_distances)(x0)
    add("  top_k l (view 0)", lambda d: nearest_neighbors(d, graph.n_neighbors), (d2,), 0)
    add(
        "  knn_gaussian_affinity (view 0)",
        lambda x: knn_gaussian_affinity(
            x,
            graph.n_neighbors,
            scales[0],
            bandwidth_factor=graph.bandwidth_factor,
            include_self=graph.include_self,
            symmetrize_how=graph.symmetrize,
        ),
        (x0,),
        2 * m * m * x0.shape[1],
    )
    aff = jax.jit(lambda views: batch_affinities(views, scales, graph))(g)
    y = jax.random.normal(jax.random.PRNGKey(0), (m, k), jnp.float32)
    alpha = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(1), (m, len(view_dims))), axis=-1)
    add(
        "loss fwd+bwd (dY, dalpha)",
        lambda yy, aa, ww: jax.value_and_grad(weighted_laplacian_loss, argnums=(0, 2))(yy, ww, aa),
        (y, alpha, aff),
        fl["loss"],
    )
    add("orthonormalizer (QR x2)", lambda yy: orthonormalizer(yy), (y,), 0)
    add("orthonormalizer fwd+bwd", jax.grad(lambda yy: jnp.sum(orthonormalizer(yy))), (y,), 0)
    # The cores of grad_step without the affinity and Adam: loss + gradient of the networks with
    # W precomputed, R^-1 constant or recomputed (QR) on the ortho batch and differentiated.
    r_inv = state.r_inv

    def core(p, views, ortho_views, w):
        def loss_fn(q):
            ri = r_inv if ortho_views is None else orthonormalizer(forward(q, ortho_views))
            yt, al = _fuse(state, q, views)
            return weighted_laplacian_loss(yt @ ri, w, al)

        return jax.value_and_grad(loss_fn)(p)

    add(
        "grad core, R^-1 const (no affinity/Adam)",
        lambda p, v, w: core(p, v, None, w),
        (params, g, aff),
        fl["grad_step"]["False"] - fl["affinity"],
    )
    add(
        "grad core, grad through (no affinity/Adam)",
        core,
        (params, g, o, aff),
        fl["grad_step"]["True"] - fl["affinity"],
    )

    # Suggestion demos (not library code): the same values computed differently.
    def core_concat(p, views, ortho_views, w):  # one 2m-row pass through the nets for both batches
        def loss_fn(q):
            both = tuple(jnp.concatenate([a, b]) for a, b in zip(ortho_views, views))
            yt, al = _fuse(state, q, both)
            ri = orthonormalizer(yt[:m])
            return weighted_laplacian_loss(yt[m:] @ ri, w, al[m:])

        return jax.value_and_grad(loss_fn)(p)

    add(
        "  demo: grad through, batches concatenated",
        core_concat,
        (params, g, o, aff),
        fl["grad_step"]["True"] - fl["affinity"],
    )

    def loss_per_view(yy, ww, aa):  # Eq. 4 without the (V, m, m) einsum: W~v = diag(a_v) W_v diag(a_v)
        n_views = ww.shape[0]
        total = 0.0
        for v in range(n_views):
            ys = yy * aa[:, v : v + 1]
            degrees = 0.5 * aa[:, v] * (ww[v] @ aa[:, v] + ww[v].T @ aa[:, v])  # of (W~ + W~^T)/2
            total = total + jnp.sum(degrees * jnp.sum(yy * yy, axis=1)) - jnp.sum(ys * (ww[v] @ ys))
        return 2.0 * total / (m * m * n_views)

    add(
        "  demo: loss fwd+bwd, per-view form",
        lambda yy, aa, ww: jax.value_and_grad(loss_per_view, argnums=(0, 2))(yy, ww, aa),
        (y, alpha, aff),
        fl["loss"],
    )
    rows["  demo: loss fwd+bwd, per-view form"]["max_abs_diff_vs_library"] = float(
        jnp.abs(jax.jit(loss_per_view)(y, aff, alpha) - jax.jit(weighted_laplacian_loss)(y, aff, alpha))
    )
    # Adam as grad_step applies it (update + apply_updates), buffers donated as in grad_step
    tx = getattr(state, "tx", None) or steps_module.adam_optimizer()  # the optimizer grad_step uses
    adam = jax.jit(
        lambda gr, p, s: (lambda u, s2: (optax.apply_updates(p, u), s2))(*tx.update(gr, s, p)), donate_argnums=(1, 2)
    )
    carry = [jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, state.opt_state)]
    grads = jax.tree.map(lambda x: 1e-3 * jnp.ones_like(x), params)

    def adam_once():
        carry[0], carry[1] = adam(grads, carry[0], carry[1])
        jax.block_until_ready(carry[0])

    adam_once()
    t = _median_time(adam_once, repeats=repeats, warmup=warmup, inner=_auto_inner(adam_once, 0.3))
    rows["Adam update+apply (donated)"] = {
        "median_s": t["median_s"],
        "min_s": t["min_s"],
        "flops": 0,
        "gflops": None,
        "paired_fraction": None,
        "timing": t,
    }
    # the achievable rate of each dense layer's matmul shape at this batch size
    for i, out in sorted({l for net in network_layers(view_dims, model_cfg, k) for l in net}):
        a = jax.random.normal(jax.random.PRNGKey(i), (m, i), jnp.float32)
        w = jax.random.normal(jax.random.PRNGKey(out), (i, out), jnp.float32)
        add(f"  matmul ({m}x{i})@({i}x{out})", lambda a, w: a @ w, (a, w), 2 * m * i * out)
    return rows


# --- machine info -----------------------------------------------------------------------------


def machine_info() -> dict:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    import jaxlib

    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "affinity_cores": len(os.sched_getaffinity(0)),
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", "?"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "devices": [str(d) for d in jax.devices()],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "loadavg_start": load,
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["True", "False"],
        choices=["True", "False"],
        help="OrthoConfig.grad_through_r_inv values",
    )
    ap.add_argument("--repeats", type=int, default=5, help="timed groups; the median is reported")
    ap.add_argument("--iters", type=int, default=20, help="training iterations per timed group")
    ap.add_argument("--warmup", type=int, default=1, help="untimed groups before timing")
    ap.add_argument("--pool", type=int, default=8, help="distinct random batches per case (cycled)")
    ap.add_argument("--profile", action="store_true", help="also time the pieces of an iteration")
    ap.add_argument("--target", type=float, default=0.75, help="target fraction of the matmul rate")
    ap.add_argument("--json", type=str, default=None, help="write all results to this file")
    ap.add_argument(
        "--devices",
        type=int,
        default=1,
        help="data-parallel over this many devices (sharding.make_data_mesh); on CPU, forced host "
        "devices that share the same cores, so this checks the sharded path, not a speed-up",
    )
    args = ap.parse_args(argv)
    mesh = make_data_mesh(args.devices) if args.devices > 1 else None

    info = machine_info()
    print(
        f"# {info['cpu_model']}, {info['cpu_count']} cores, jax {info['jax']}, {info['date']}, "
        f"load {info['loadavg_start']}",
        flush=True,
    )
    mm_start = matmul_rates((1024, 2048), repeats=args.repeats, warmup=2)
    print("# matmul GFLOP/s (start): " + ", ".join(f"{n}^3 {r['gflops']:.1f}" for n, r in mm_start.items()), flush=True)

    global REF
    REF = PairedRef(2048, calls=2)
    m, k = args.batch_size, args.k
    model_cfg = ModelConfig(n_components=k, view_hidden=(1024, 1024, 512))
    graph = GraphConfig(n_neighbors=30, scale_mode="global", degree_normalization="none")
    results: dict[str, Any] = {"machine": info, "args": vars(args), "cases": {}, "profile": {}}
    for case in args.cases:
        dims = CASES[case]
        pool = make_pool(dims, m, max(2, args.pool), seed=list(CASES).index(case))
        if mesh is not None:
            pool = [shard_batch(Batch(views=views), mesh).views for views in pool]
        scales = view_scales_from(pool[0], graph)
        fl = analytic_flops(dims, model_cfg, k, m)
        results["cases"][case] = {"view_dims": dims, "view_scales": scales, "analytic_flops": fl, "modes": {}}
        state = None
        for mode in args.modes:
            through = mode == "True"
            r, state = bench_iteration(
                dims,
                pool,
                model_cfg,
                graph,
                through,
                scales=scales,
                iters=args.iters,
                repeats=args.repeats,
                warmup=args.warmup,
                mesh=mesh,
            )
            r["analytic_flops"] = fl["iteration"][mode]
            results["cases"][case]["modes"][mode] = r
            print(
                f"# {case} grad_through={mode}: {r['seconds']['median_s'] * 1e3:.1f} ms/iter "
                f"(ortho {r['ortho_step_s'] * 1e3:.1f}, grad {r['grad_step_s'] * 1e3:.1f}); compile "
                f"{r['compile_s']['ortho_step']:.1f}+{r['compile_s']['grad_step']:.1f} s; loss {r['final_loss']:.4g}",
                flush=True,
            )
        if args.profile:
            results["profile"][case] = profile_pieces(
                dims, pool, model_cfg, graph, state, repeats=args.repeats, warmup=1
            )
        del pool, state

    mm_end = matmul_rates((1024, 2048), repeats=args.repeats, warmup=2)
    print("# matmul GFLOP/s (end):   " + ", ".join(f"{n}^3 {r['gflops']:.1f}" for n, r in mm_end.items()), flush=True)
    ref = statistics.median([r["gflops"] for r in (*mm_start.values(), *mm_end.values())])
    best_ref = max(r["best_gflops"] for r in (*mm_start.values(), *mm_end.values()))
    results["matmul"] = {"start": mm_start, "end": mm_end, "reference_gflops": ref, "best_gflops": best_ref}
    info["loadavg_end"] = os.getloadavg()

    print(
        f"\nbatch {m}, k {k}; matmul rate {ref:.1f} GFLOP/s (median of 1024^3 and 2048^3, start and end of "
        f"the run), best {best_ref:.1f}"
    )
    print(
        "frac: median over repeats of (GFLOP/s of the repeat) / (2048^3 rate measured right before it);\n"
        "frac_run: median GFLOP/s / the run's matmul rate;  best: fastest repeat / best matmul repeat"
    )
    hdr = (
        f"{'case':<9} {'through':<7} {'s/iter':>7} {'samples/s':>9} {'GF/iter':>7} {'XLA GF':>7} "
        f"{'GFLOP/s':>7} {'frac':>5} {'frac_run':>8} {'best s':>7} {'best frac':>9} {'compile s':>9}"
    )
    print(hdr)
    print("-" * len(hdr))
    table = []
    for case, c in results["cases"].items():
        for mode, r in c["modes"].items():
            s = r["seconds"]["median_s"]
            gf = r["analytic_flops"] / 1e9
            rate = gf / s
            row = {
                "case": case,
                "grad_through_r_inv": mode == "True",
                "seconds_per_iter": s,
                "samples_per_s": m / s,
                "analytic_gflop_per_iter": gf,
                "xla_gflop_per_iter": r["xla_flops"]["iteration"] / 1e9,
                "achieved_gflops": rate,
                "fraction_paired": paired_fraction(r["analytic_flops"], r["seconds"]),
                "fraction_of_run_matmul": rate / ref,
                "best_seconds_per_iter": r["seconds"]["min_s"],
                "best_fraction_of_best_matmul": gf / r["seconds"]["min_s"] / best_ref,
                "compile_s": r["compile_s"]["ortho_step"] + r["compile_s"]["grad_step"],
            }
            table.append(row)
            print(
                f"{case:<9} {mode:<7} {s:>7.3f} {m / s:>9.0f} {gf:>7.2f} {row['xla_gflop_per_iter']:>7.2f} "
                f"{rate:>7.1f} {row['fraction_paired']:>5.2f} {rate / ref:>8.2f} "
                f"{row['best_seconds_per_iter']:>7.3f} {row['best_fraction_of_best_matmul']:>9.2f} "
                f"{row['compile_s']:>9.1f}"
            )
    results["table"] = table
    for row in table:
        if row["case"] == "784":
            status = "meets" if row["fraction_paired"] >= args.target else "BELOW"
            print(
                f"target >= {args.target:.2f} of matmul rate, 784 grad_through={row['grad_through_r_inv']}: "
                f"{row['fraction_paired']:.2f} ({status})"
            )

    for case, rows in results["profile"].items():
        print(f"\nprofile {case} (batch {m}):  {'ms':>8} {'best ms':>8} {'GFLOP/s':>8} {'frac':>5}")
        for name, p in rows.items():
            g, fr = p["gflops"], p["paired_fraction"]
            print(
                f"  {name:<44} {p['median_s'] * 1e3:>8.2f} {p['min_s'] * 1e3:>8.2f} "
                f"{(f'{g:8.1f}' if g else '       -')} {(f'{fr:5.2f}' if fr else '    -')}"
            )

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
        print(f"\nwrote {args.json}")
    return results


if __name__ == "__main__":
    main()
