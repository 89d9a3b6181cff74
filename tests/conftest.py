"""Test-run settings: JAX's persistent compilation cache, XLA's quick CPU compilation, and releasing compiled programs.

Compiling the jitted steps is most of the suite's cost on a CPU, and most tests compile the same
small programs run after run. Every compiled program (however quick to compile, however small)
is written to ``.pytest_cache/jax`` under the repository (``make clean`` removes it), so a second
run of the suite loads them instead of compiling. The settings are environment variables, set
before JAX is imported, so the child processes the tests start (CLI runs, simulated-device and
multi-process children, the docs pages) share the cache; a variable already set in the
environment wins.

A fresh clone starts with an empty cache: the first run compiles everything and fills it.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

CACHE_DIR = Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax"

# Tests check what programs compute, not how fast they run: XLA's CPU backend compiles them
# without its expensive LLVM passes (a fresh clone's suite, the cache empty: 268 s -> 187 s on
# the Zen 5 box). An XLA_FLAGS already set in the environment wins.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
os.environ.setdefault("XLA_FLAGS", FAST_COMPILE)
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(CACHE_DIR))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")

if "jax" in sys.modules:  # imported before this file (a plugin): its config has read the environment already
    import jax

    jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    Every compiled XLA:CPU program keeps its machine code in memory maps of its own, and JAX keeps
    every program it compiled for as long as the process lives. Over the whole suite in one process
    the count grew to 22,740 maps by 30 % of the tests, on course to Linux's default
    ``vm.max_map_count`` (65,530) near 90 %, where the runs crashed inside a compilation. Clearing
    the caches between modules held it below ~4,500; a later module needing the same program loads it from the
    persistent cache above.
    """
    yield
    import jax

    jax.clear_caches()
    gc.collect()


@pytest.fixture(scope="session")
def devsuite_data_dir() -> str:
    """The folder of real datasets with the development suite (``$SPECRAGE_TEST_DATA``, else
    ../shared/datasets); the tests that need it skip when it is absent."""
    folder = Path(os.environ.get("SPECRAGE_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    if not (folder / "devsuite").is_dir():
        pytest.skip(f"real datasets not found at {folder} (set SPECRAGE_TEST_DATA to the folder)")
    return str(folder)
