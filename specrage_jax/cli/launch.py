"""specrage launch --local N -- train ...: N processes of one multi-process run on this machine.

Each process is ``python -m specrage_jax.cli <command> --coordinator localhost:PORT
--num-processes N --process-id I`` on a free port; their output is forwarded line by line with a
``[I]`` prefix. When one exits with an error the others are stopped (terminated, then killed
after a grace period) and the launcher exits non-zero, naming it. This is how the multi-process
path is tried before a cluster, where the cluster's launcher starts the processes instead.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

GRACE_SECONDS = 10.0


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


def run_local(command: Sequence[str], count: int) -> int:
    """Runs ``count`` processes of ``command`` and waits for them; 0 when all succeed."""
    coordinator = f"localhost:{free_port()}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
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
    failed: tuple[int, int] | None = None
    while True:
        codes = [w.poll() for w in workers]  # every worker each time (any() would stop at the first running one)
        failed = next(((i, code) for i, code in enumerate(codes) if code not in (None, 0)), None)
        if failed is not None or all(code is not None for code in codes):
            break
        time.sleep(0.2)
    if failed is not None:
        stop(workers)
    for thread in threads:
        thread.join(timeout=5)
    if failed is not None:
        print(f"specrage launch: process {failed[0]} exited with code {failed[1]}; stopped the others", file=sys.stderr)
        return 1
    return 0


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
