"""The command line's persistent compilation cache: where it goes, when it is off, and that a
command's programs land there."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from specrage_jax.cli.compile_cache import compile_cache_dir


def test_cache_dir_defaults_to_the_user_cache(tmp_path):
    assert compile_cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "specrage_jax" / "xla"
    xdg = tmp_path / "xdg"
    assert compile_cache_dir({"HOME": str(tmp_path), "XDG_CACHE_HOME": str(xdg)}) == xdg / "specrage_jax" / "xla"


def test_cache_dir_follows_the_environment(tmp_path):
    assert compile_cache_dir({"SPECRAGE_COMPILE_CACHE": str(tmp_path / "c")}) == tmp_path / "c"
    for off in ("off", "0", "false", "NO"):
        assert compile_cache_dir({"SPECRAGE_COMPILE_CACHE": off, "HOME": str(tmp_path)}) is None
    # JAX's own setting wins: the command leaves JAX's configuration alone
    assert compile_cache_dir({"JAX_COMPILATION_CACHE_DIR": "/elsewhere", "SPECRAGE_COMPILE_CACHE": "/x"}) is None


def test_a_command_process_writes_its_programs_to_a_private_cache(tmp_path):
    """In a fresh process (JAX's config is process-wide): enabling the cache, then compiling one
    program, leaves an entry in a directory only the user can open."""
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["SPECRAGE_COMPILE_CACHE"] = str(cache)
    code = (
        "from specrage_jax.cli.compile_cache import enable_compile_cache\n"
        "import jax, jax.numpy as jnp\n"
        "print(enable_compile_cache())\n"
        "jax.jit(lambda x: x * 2 + 1)(jnp.arange(3.0)).block_until_ready()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip().splitlines()[-1]) == cache
    assert any(cache.iterdir()), "no compiled program was written to the cache"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_train_help_names_the_cache_and_its_switch():
    from specrage_jax.cli import config_help

    assert "~/.cache/specrage_jax/xla" in config_help() and "SPECRAGE_COMPILE_CACHE" in config_help()
