"""The child processes of experiments/bench_scaling.py: every stage runs in a fresh interpreter
(``bench_scaling.py --child TASK PARAMS``), alone or as the processes of one JAX process group,
killed past a time or memory limit; its peak RSS comes from ``wait4`` and /proc. A child prints
its result as one JSON line after ``RESULT_PREFIX``; its progress goes to stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SCRIPT = Path(__file__).resolve().with_name("bench_scaling.py")  # the entry point: runs a task with --child
REPO = SCRIPT.parents[1]
RESULT_PREFIX = "RESULT "


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
            [sys.executable, str(SCRIPT), "--child", task, json.dumps(p)],
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
