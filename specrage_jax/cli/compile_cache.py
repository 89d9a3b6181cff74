"""The command line's persistent compilation cache: XLA programs compiled by one ``specrage``
command are written to disk and loaded by the next one, so a rerun (another seed, another
``--set``, ``embed`` after ``train``) skips most of its compile time.

Where it lives, first match wins:

* ``JAX_COMPILATION_CACHE_DIR`` set: JAX's own setting, left as it is;
* ``SPECRAGE_COMPILE_CACHE`` = ``off`` (or ``0``, ``false``, ``no``): no cache;
* ``SPECRAGE_COMPILE_CACHE`` = a directory: there;
* otherwise ``$XDG_CACHE_HOME/specrage_jax/xla`` (``~/.cache/specrage_jax/xla``).

The directory is created private to the user (mode 0700): JAX loads and runs what it finds
there, so a cache others can write to would run their code. Entries are a few hundred kB per
dataset shape and are never evicted; delete the directory to clear it. Library code
(``SpecRaGE.fit`` in a notebook) is not affected: a process enables the cache itself with
``jax.config.update("jax_compilation_cache_dir", ...)``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

DISABLED = frozenset({"off", "0", "false", "no"})


def compile_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """The directory the cache should use under ``environ`` (None: leave JAX as it is, either
    because ``JAX_COMPILATION_CACHE_DIR`` already chooses or because the cache is off)."""
    if environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    requested = environ.get("SPECRAGE_COMPILE_CACHE", "").strip()
    if requested.lower() in DISABLED:
        return None
    if requested:
        return Path(requested).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")) / ".cache")
    return Path(base).expanduser() / "specrage_jax" / "xla"


def enable_compile_cache(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Points JAX's persistent compilation cache at :func:`compile_cache_dir` (every program,
    however quick to compile) before anything is compiled; the directory used, or None. A
    directory that cannot be created is skipped with a warning: the command runs uncached."""
    directory = compile_cache_dir(environ)
    if directory is None:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as error:
        warnings.warn(
            f"compile cache: cannot create {directory} ({error}); compiling without it "
            f"(set SPECRAGE_COMPILE_CACHE=DIR or off)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return directory
