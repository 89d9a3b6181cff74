"""The outputs of experiments/bench_scaling.py beside its JSON: the machine it ran on, the
log-log slopes of the SpecRaGE epoch time between sizes, the figure of time and peak memory
against n, and the table printed at the end."""

from __future__ import annotations

import datetime
import math
import os
import platform
from importlib import metadata
from pathlib import Path


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
