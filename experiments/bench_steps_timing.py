"""Timing for experiments/bench_steps.py: seconds per call of a blocking function (median and
minimum over repeated groups, after warmup), each group paired with the rate of a 2048^3 matmul
timed right before it (``REF``, set by the script's ``main``), the fraction of that rate a
timing reaches, XLA's cost-analysis FLOPs of a jitted function, and the float32 matmul rate."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp


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


def median_time(run_once: Callable[[], Any], *, repeats: int, warmup: int, inner: int) -> dict:
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


def auto_inner(run_once: Callable[[], Any], target_s: float) -> int:
    t0 = time.perf_counter()
    run_once()
    dt = time.perf_counter() - t0
    return max(1, min(200, int(target_s / max(dt, 1e-6))))


def time_fn(fn: Callable, args: tuple, *, repeats: int, warmup: int, target_s: float = 0.3) -> dict:
    """Time a pure (non-donating) jitted ``fn(*args)``."""

    def once():
        jax.block_until_ready(fn(*args))

    once()  # compile
    inner = auto_inner(once, target_s)
    out = median_time(once, repeats=repeats, warmup=warmup, inner=inner)
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
