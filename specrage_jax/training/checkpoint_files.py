"""Checkpoint directories on disk: pytrees as nested dicts of host arrays, an orbax composite save
with a JSON record, file manifests and CRC32 checksums, and the format checks every reader runs."""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from specrage_jax.training.distributed import barrier, is_primary, primary_decides, shared_token
from specrage_jax.version import __version__

FORMAT = "specrage_jax"


RECORD_ITEM = "specrage"


ARRAYS_ITEM = "arrays"


EXTRA_ITEM = "extra"


FILE_MANIFEST = "specrage_files.json"


class CheckpointError(ValueError):
    """A checkpoint that is missing, not a specrage_jax checkpoint, incompatible or damaged."""


class CheckpointWarning(UserWarning):
    """A damaged training checkpoint was skipped in favour of an older one."""


def library_version() -> str:
    """``specrage_jax.__version__``."""
    return __version__


def _key_name(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            name = str(getattr(key, attr))
            if not name or "/" in name or "." in name:
                raise ValueError(f"pytree key {name!r} cannot name a checkpoint entry ('.' and '/' are reserved)")
            return name
    raise TypeError(f"unsupported pytree key {key!r}")


def leaf_paths(tree: Any) -> list[tuple[str, Any]]:
    """[("a/b/0", leaf), ...] in flattening order."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [("/".join(_key_name(k) for k in path), leaf) for path, leaf in leaves]


def tree_to_nested(tree: Any) -> dict[str, Any]:
    """Host copies of a pytree's leaves in nested dicts keyed by path names (what orbax saves).

    Copies (not views) so that later donation of device buffers cannot change what is written.
    """
    nested: dict[str, Any] = {}
    for path, leaf in leaf_paths(tree):
        *parents, last = path.split("/")
        node = nested
        for name in parents:
            node = node.setdefault(name, {})
        node[last] = np.array(leaf, copy=True)
    return nested


def flatten_nested(nested: Mapping[str, Any], prefix: str = "") -> dict[str, np.ndarray]:
    """{"a/b/0": array} for a nested dict of arrays."""
    flat: dict[str, np.ndarray] = {}
    for name, value in nested.items():
        path = f"{prefix}/{name}" if prefix else str(name)
        if isinstance(value, Mapping):
            flat.update(flatten_nested(value, path))
        else:
            flat[path] = np.asarray(value)
    return flat


def tree_from_nested(template: Any, nested: Mapping[str, Any], *, where: str) -> Any:
    """``template``'s structure with every leaf taken from ``nested`` (same path names).

    Raises:
      CheckpointError: naming ``where`` and the entry that is missing, extra or mis-shaped.
    """
    flat = flatten_nested(nested)
    expected = leaf_paths(template)
    names = {path for path, _ in expected}
    missing = [path for path in names if path not in flat]
    extra = [path for path in flat if path not in names]
    if missing or extra:
        raise CheckpointError(
            f"{where}: the saved arrays do not match the model built from the recorded "
            f"configuration (missing {sorted(missing)[:5]}, unexpected {sorted(extra)[:5]})"
        )
    leaves = []
    for path, leaf in expected:
        value = flat[path]
        shape, dtype = _shape_dtype(leaf)
        if value.shape != shape or value.dtype != dtype:
            raise CheckpointError(
                f"{where}: {path} is saved as {value.shape} {value.dtype}, the model built "
                f"from the recorded configuration expects {shape} {dtype}"
            )
        leaves.append(jnp.asarray(value) if isinstance(leaf, (jax.Array, jax.ShapeDtypeStruct)) else value)
    return jax.tree.unflatten(jax.tree.structure(template), leaves)


def _shape_dtype(leaf: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of an array, a jax.ShapeDtypeStruct or a scalar."""
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return tuple(leaf.shape), np.dtype(leaf.dtype)
    array = np.asarray(leaf)
    return array.shape, array.dtype


def array_checksums(nested: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """CRC32 (hex) of every array's bytes, dtype and shape, keyed ``prefix/path``."""
    sums = {}
    for path, array in flatten_nested(nested).items():
        header = f"{array.dtype.str}{array.shape}".encode()
        sums[f"{prefix}/{path}"] = f"{zlib.crc32(np.ascontiguousarray(array).tobytes(), zlib.crc32(header)):08x}"
    return sums


def _verify_checksums(nested: Mapping[str, Any], prefix: str, recorded: Mapping[str, str], where: Path) -> None:
    actual = array_checksums(nested, prefix)
    expected = {k: v for k, v in recorded.items() if k.startswith(prefix + "/")}
    for key in sorted(set(actual) | set(expected)):
        if actual.get(key) != expected.get(key):
            raise CheckpointError(
                f"checkpoint {where} is corrupted: array {key} does not match its recorded "
                f"checksum (restore an older checkpoint or save again)"
            )


def _file_crc(path: Path) -> str:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


def _files(directory: Path) -> Iterator[Path]:
    return (p for p in sorted(directory.rglob("*")) if p.is_file() and p.name != FILE_MANIFEST)


def write_file_manifest(directory: Path) -> None:
    """Records the size and CRC32 of every file under ``directory`` (atomically)."""
    manifest = {
        str(p.relative_to(directory)): {"size": p.stat().st_size, "crc32": _file_crc(p)} for p in _files(directory)
    }
    _write_json_atomic(directory / FILE_MANIFEST, {"files": manifest})


def verify_file_manifest(directory: Path) -> bool:
    """Checks every recorded file's presence, size and CRC32. Returns False when there is no
    manifest (a training checkpoint whose process died right after orbax committed it).

    Raises:
      CheckpointError: naming the directory and the first missing, truncated or altered file.
    """
    path = directory / FILE_MANIFEST
    if not path.is_file():
        return False
    try:
        files = json.loads(path.read_text())["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"checkpoint {directory} is corrupted: unreadable {FILE_MANIFEST} ({err})") from None
    for name, entry in files.items():
        file = directory / name
        if not file.is_file():
            raise CheckpointError(f"checkpoint {directory} is incomplete: file {name} is missing")
        size = file.stat().st_size
        if size != entry["size"]:
            raise CheckpointError(
                f"checkpoint {directory} is corrupted: file {name} has {size} bytes, "
                f"{entry['size']} were written (truncated?)"
            )
        if _file_crc(file) != entry["crc32"]:
            raise CheckpointError(
                f"checkpoint {directory} is corrupted: file {name} does not match its recorded checksum"
            )
    return True


def _write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, path)


@contextmanager
def _composite_checkpointer() -> Iterator[ocp.Checkpointer]:
    checkpointer = ocp.Checkpointer(ocp.CompositeCheckpointHandler())
    try:
        yield checkpointer
    finally:
        checkpointer.close()


def save_trees(
    directory: str | Path, trees: Mapping[str, Any], record: Mapping[str, Any], *, overwrite: bool = False
) -> Path:
    """Writes pytrees of arrays ``trees`` (item name -> pytree) and a JSON ``record`` as one
    checkpoint directory, atomically: written with its file manifest under a hidden temporary
    sibling name, then renamed (an existing directory is replaced by two renames). The record
    gains ``items`` and ``checksums``. Returns the directory.

    Raises:
      FileExistsError: if ``directory`` exists and ``overwrite`` is False.
    """
    final = Path(directory).absolute()
    if primary_decides(final.exists() and not overwrite):
        raise FileExistsError(f"{final} already exists (pass overwrite=True to replace it)")
    final.parent.mkdir(parents=True, exist_ok=True)
    nested = {name: tree_to_nested(tree) for name, tree in trees.items() if jax.tree.leaves(tree)}
    checksums: dict[str, str] = {}
    for name, item in nested.items():
        checksums.update(array_checksums(item, name))
    payload = {**record, "items": sorted(nested), "checksums": checksums}
    json.dumps(payload)  # fail before writing anything if the record is not JSON-able
    tmp = final.with_name(f".{final.name}.{shared_token()}.saving")
    try:  # several processes: every one joins orbax's save, the primary alone moves files
        args = {name: ocp.args.StandardSave(item) for name, item in nested.items()}
        with _composite_checkpointer() as checkpointer:
            checkpointer.save(tmp, args=ocp.args.Composite(**args, **{RECORD_ITEM: ocp.args.JsonSave(payload)}))
        if is_primary():
            write_file_manifest(tmp)
            old = final.with_name(f".{final.name}.{uuid.uuid4().hex}.old")
            if final.exists():
                os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if is_primary():
            shutil.rmtree(tmp, ignore_errors=True)
    barrier(f"saved {final}")
    return final


def read_record(directory: str | Path) -> dict[str, Any]:
    """The JSON record of a checkpoint written by :func:`save_trees`, after checking its files.

    Raises:
      CheckpointError: missing directory, not a specrage_jax checkpoint, damaged files.
    """
    path = Path(directory).absolute()  # orbax reads absolute paths only
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: no such directory")
    if not (path / RECORD_ITEM).is_dir():
        raise CheckpointError(f"{path} is not a specrage_jax checkpoint (no {RECORD_ITEM}/ record inside)")
    intact = verify_file_manifest(path)
    try:
        with _composite_checkpointer() as checkpointer:
            args = ocp.args.Composite(**{RECORD_ITEM: ocp.args.JsonRestore()})
            record = checkpointer.restore(path, args=args)[RECORD_ITEM]
    except Exception as err:  # orbax/json raise many types; report them as one
        raise _read_error(path, "its record", err, intact) from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a specrage_jax checkpoint (its record has no format {FORMAT!r})")
    return record


def restore_items(directory: Path, names: list[str], record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The named array items of a checkpoint as nested dicts of NumPy arrays, checksums verified."""
    directory = Path(directory).absolute()
    available = [name for name in names if name in record.get("items", [])]
    if not available:
        return {}
    try:
        with _composite_checkpointer() as checkpointer:
            restored = checkpointer.restore(
                directory, args=ocp.args.Composite(**{name: ocp.args.StandardRestore() for name in available})
            )
    except Exception as err:  # tensorstore/orbax errors of every kind: one clear error
        # read_record has verified the files when there is a manifest
        raise _read_error(directory, "its arrays", err, (directory / FILE_MANIFEST).is_file()) from None
    items = {name: dict(restored[name]) for name in available}
    for name, item in items.items():
        _verify_checksums(item, name, record.get("checksums", {}), directory)
    return items


def _read_error(path: Path, what: str, err: Exception, files_intact: bool) -> CheckpointError:
    """A failed orbax read: corruption, unless the file manifest vouched for every file (then the
    files are as written and the failure lies elsewhere, so resume must not discard them)."""
    detail = f"{type(err).__name__}: {str(err)[:200]}"
    if files_intact:
        return CheckpointError(f"checkpoint {path}: {what} cannot be read although its files are intact ({detail})")
    return CheckpointError(f"checkpoint {path} is corrupted: {what} cannot be read ({detail})")


def check_compatible(record: Mapping[str, Any], *, kind: str, max_version: int, where: Path) -> None:
    """Refuses a record of another kind, a newer format, or another library major version."""
    if record.get("kind") != kind:
        raise CheckpointError(f"{where} holds a {record.get('kind')!r} checkpoint, not a {kind!r} one")
    version = record.get("format_version")
    if not isinstance(version, int) or not 1 <= version <= max_version:
        raise CheckpointError(
            f"{where}: checkpoint format version {version!r} is not supported by specrage_jax "
            f"{library_version()} (reads versions 1..{max_version}); it was written by "
            f"specrage_jax {record.get('library_version')}"
        )
    saved_major = str(record.get("library_version", "")).split(".")[0]
    if saved_major != library_version().split(".")[0]:
        raise CheckpointError(
            f"{where}: written by specrage_jax {record.get('library_version')}, incompatible "
            f"with this version {library_version()} (different major version)"
        )
