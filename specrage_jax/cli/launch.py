"""specrage launch --local N -- train ...: N processes of one multi-process run on this machine.

Each process is ``python -m specrage_jax.cli <command> --coordinator localhost:PORT
--num-processes N --process-id I`` on a free port; their output is forwarded line by line with a
``[I]`` prefix. When one exits with an error the others are stopped (terminated, then killed
after a grace period) and the launcher exits non-zero, naming it. A SIGTERM or SIGINT to the
launcher is passed on to every process as SIGTERM: they stop after the same step, write a
checkpoint and exit 75, and so does the launcher (a second signal stops them at once). This is
how the multi-process path is tried before a cluster, where the cluster's launcher starts the
processes instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import IO

from specrage_jax.cli.train import LAUNCHED_BY
from specrage_jax.training.preemption import PREEMPTED_EXIT_CODE

GRACE_SECONDS = 10.0
PREEMPTED_WAIT_SECONDS = 60.0  # after one process stopped on a signal, how long the others may take


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


def process_command(command: Sequence[str], coordinator: str, count: int, index: int) -> list[str]:
    """The command line of process ``index`` of ``count``."""
    return [sys.executable, "-m", "specrage_jax.cli", *command, "--coordinator", coordinator,
            "--num-processes", str(count), "--process-id", str(index)]  # fmt: skip


def forward(stream: IO[str], prefix: str) -> None:
    """Copies ``stream``'s lines to stdout, each with ``prefix``."""
    for line in stream:
        sys.stdout.write(f"{prefix}{line}")
        sys.stdout.flush()


def stop(workers: Sequence[subprocess.Popen[str]]) -> None:
    """Terminates the running workers, and kills those still running after GRACE_SECONDS."""
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    deadline = time.monotonic() + GRACE_SECONDS
    for worker in workers:
        try:
            worker.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def forward_signals(workers: Sequence[subprocess.Popen[str]]) -> dict[int, object]:
    """Installs SIGTERM / SIGINT handlers that pass a first signal on to the running workers as
    SIGTERM and stop them at once on a second; returns the previous handlers."""
    received: list[int] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) > 1:
            stop(workers)
            return
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)

    return {signum: signal.signal(signum, handle) for signum in (signal.SIGTERM, signal.SIGINT)}


def wait_for(workers: Sequence[subprocess.Popen[str]]) -> tuple[int, int] | None:
    """Polls every worker until all have ended or one failed: (index, code) of a failed one, else
    None. A worker stopped by a signal (exit 75) is no failure; the others get
    PREEMPTED_WAIT_SECONDS to stop too."""
    deadline = None
    while True:
        codes = [w.poll() for w in workers]  # every worker each time (any() would stop at the first running one)
        failed = next(((i, c) for i, c in enumerate(codes) if c not in (None, 0, PREEMPTED_EXIT_CODE)), None)
        if failed is not None or all(code is not None for code in codes):
            return failed
        if PREEMPTED_EXIT_CODE in codes:
            deadline = deadline or time.monotonic() + PREEMPTED_WAIT_SECONDS
            if time.monotonic() > deadline:
                return next((i, -1) for i, c in enumerate(codes) if c is None)
        time.sleep(0.2)


def run_local(command: Sequence[str], count: int) -> int:
    """Runs ``count`` processes of ``command`` and waits for them; 0 when all succeed, 75 when they
    stopped on a signal (checkpoint written), 1 when one failed."""
    coordinator = f"localhost:{free_port()}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", LAUNCHED_BY: str(count)}
    workers = [
        subprocess.Popen(
            process_command(command, coordinator, count, i),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )  # fmt: skip
        for i in range(count)
    ]
    for i, worker in enumerate(workers):
        print(f"specrage launch: process {i} of {count} is pid {worker.pid} (coordinator {coordinator})", flush=True)
    threads = [threading.Thread(target=forward, args=(w.stdout, f"[{i}] "), daemon=True) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    previous = forward_signals(workers)
    try:
        failed = wait_for(workers)
        if failed is not None:
            stop(workers)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
    for thread in threads:
        thread.join(timeout=5)
    if failed is not None:
        print(f"specrage launch: process {failed[0]} exited with code {failed[1]}; stopped the others", file=sys.stderr)
        return 1
    return PREEMPTED_EXIT_CODE if any(w.returncode == PREEMPTED_EXIT_CODE for w in workers) else 0


def add_launch_parser(commands: argparse._SubParsersAction) -> None:
    launch = commands.add_parser(
        "launch",
        help="run one training over N local processes (JAX's distributed runtime), e.g. launch --local 2 -- train ...",
        description="Start N processes of `specrage COMMAND ...` on this machine as one multi-process run (a free "
        "coordinator port, --num-processes and --process-id added), forward their output with a [I] prefix, and "
        "stop all of them when one fails.",
    )
    launch.add_argument("--local", type=int, required=True, metavar="N", help="number of local processes")
    launch.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the specrage command, e.g. -- train ...")


def run_launch(args: argparse.Namespace) -> int:
    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if args.local < 1:
        print(f"specrage: --local must be >= 1, got {args.local}", file=sys.stderr)
        return 2
    if not command or command[0] != "train":
        print("specrage: launch runs `train` over several processes: specrage launch --local N -- train ...",
              file=sys.stderr)  # fmt: skip
        return 2
    return run_local(command, args.local)
