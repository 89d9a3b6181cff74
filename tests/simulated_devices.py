"""Child Python processes that see several simulated CPU devices (XLA's host-platform device
count), for the sharding and multi-process tests: a device count is fixed when JAX starts, so a
test that needs another one runs its code in a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def simulated_devices_env(devices: int, **extra: str) -> dict[str, str]:
    """This process's environment with ``devices`` CPU devices per JAX process, the repository
    importable, and ``extra`` variables."""
    return {
        **os.environ,
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


def run_child_result(code: str, *args: str, devices: int, timeout: float) -> dict:
    """Runs ``python -c code args`` on ``devices`` CPU devices (one BLAS thread) and returns the
    JSON of its ``RESULT {...}`` line; fails with the child's stderr if it does not exit 0."""
    env = simulated_devices_env(devices, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])
