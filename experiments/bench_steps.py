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
from collections.abc import Sequence
from pathlib import Path
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
import numpy as np

from specrage_jax.config import GraphConfig, ModelConfig
from specrage_jax.training.sharding import make_data_mesh, shard_batch
from specrage_jax.training.steps import Batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_steps_timing
from bench_steps_flops import analytic_flops
from bench_steps_iteration import bench_iteration, make_pool, view_scales_from
from bench_steps_profile import profile_pieces
from bench_steps_timing import PairedRef, matmul_rates, paired_fraction

CASES = {"784": (784, 784), "240_216": (240, 216)}


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

    bench_steps_timing.REF = PairedRef(2048, calls=2)
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
