"""A dataset generated once into a memmap folder and reused: CRC32 fingerprints of its files, the
checks that find a damaged or half-written cache, and the build that stages, verifies and
renames it into place."""

from __future__ import annotations

import json
import os
import shutil
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from specrage_jax.data.stream import (
    LABELS_FILE,
    MASK_FILE,
    META_FILE,
    MemmapViews,
    open_views_memmap,
    read_npy_header,
    view_file,
    write_views_memmap,
)


def file_crc32(path: Path, offset: int, chunk_bytes: int = 1 << 24) -> str:
    """CRC32 (8 hex digits) of the bytes of ``path`` from ``offset`` on, read in chunks."""
    crc = 0
    with open(path, "rb") as f:
        f.seek(offset)
        while block := f.read(chunk_bytes):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def npy_data_offset(path: Path) -> int:
    """The byte offset of the data in the ``.npy`` file ``path`` (the length of its header)."""
    with open(path, "rb") as f:
        return read_npy_header(f)[3]


def data_files(data: MemmapViews) -> list[tuple[Path, int]]:
    """(path, data offset) of every file of ``data``: the views, then the labels and the mask if any."""
    files = [(data.directory / view_file(v), offset) for v, offset in enumerate(data.offsets)]
    extra = [LABELS_FILE] if data.labels is not None else []
    extra += [MASK_FILE] if data.mask is not None else []
    return files + [(data.directory / name, npy_data_offset(data.directory / name)) for name in extra]


def files_crc32(data: MemmapViews) -> list[str]:
    """The CRC32 of every file's data bytes (views, then labels, then mask), read in 16 MB chunks."""
    return [file_crc32(path, offset) for path, offset in data_files(data)]


def corrupt_cache_reason(data: MemmapViews, source: dict, *, verify_crc: bool) -> str | None:
    """Why an opened cache may not be reused (other source parameters, no labels, a CRC32 that
    disagrees with meta.json), or None when it may."""
    recorded = data.meta.get("source")
    if recorded != json.loads(json.dumps(source)):
        return f"it was generated from other parameters ({recorded} instead of {source})"
    if not data.meta.get("labels"):
        return "it holds no labels"
    if verify_crc:
        expected = data.meta.get("crc32")
        found = files_crc32(data)
        if expected != found:
            return f"its files' CRC32 {found} differ from those in meta.json {expected} (damaged files)"
    return None


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (a signal-0 probe)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def remove_dead_staging(folder: Path) -> None:
    """Removes the staging directories ``.NAME.tmp-PID-*`` of ``folder`` whose generating process
    is gone (a generation killed outright leaves one, as large as the cache)."""
    for staging in folder.parent.glob(f".{folder.name}.tmp-*"):
        pid = staging.name[len(f".{folder.name}.tmp-") :].partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
            shutil.rmtree(staging, ignore_errors=True)


def build_views_cache(
    directory: str | Path,
    source: dict,
    make_chunks: Callable[[], Iterable[Any]],
    n: int,
    *,
    dtype: str = "float32",
    verify_crc: bool = True,
) -> tuple[MemmapViews, bool]:
    """Opens the labelled dataset cached in ``directory``, generating it first when it is missing
    or unusable. Returns (the opened data, whether it was generated now).

    A cache is reused only when it is complete (meta.json present, every file of the size its
    header and meta.json give), records the same ``source`` parameters and, with ``verify_crc``,
    its files' CRC32 match meta.json (one sequential read of the files). Otherwise it is removed
    and ``make_chunks()`` (items ((V arrays), labels), adding up to n rows) is written into a
    fresh sibling directory that is renamed into place only once complete, so a generation that
    is killed leaves a hidden ``.NAME.tmp-PID-*`` directory, never a cache that is reused (the
    next generation removes those of processes that are gone).
    """
    folder = Path(directory)
    if folder.exists():
        reason = None
        try:
            data = open_views_memmap(folder)
        except (FileNotFoundError, ValueError, KeyError, OSError) as err:
            reason = f"it cannot be opened ({err})"
        else:
            reason = corrupt_cache_reason(data, source, verify_crc=verify_crc)
            if reason is None:
                return data, False
            data.close()
        warnings.warn(f"dataset cache {folder} is not reused: {reason}; generating it again", stacklevel=2)
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(folder)
    staging = folder.with_name(f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        write_views_memmap(staging, make_chunks(), n, dtype=dtype, with_labels=True, source=source)
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / META_FILE).is_file():  # not another process's finished cache
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return open_views_memmap(folder), True
