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
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling_data import task_ae, task_gather, task_generate
from bench_scaling_exact import task_exact
from bench_scaling_processes import log, report, run_child, run_process_group
from bench_scaling_specrage import task_specrage
from bench_scaling_summary import machine_info, plot, print_table, summarize

TASKS = {
    "generate": task_generate,
    "ae": task_ae,
    "specrage": task_specrage,
    "exact": task_exact,
    "gather": task_gather,
}


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
