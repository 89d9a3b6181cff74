"""The record of a run (OUT/checkpoints/run.json: dataset, seed, configuration, data fingerprint,
status) that --resume checks, and the JSON files a run writes."""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import zlib
from pathlib import Path
from typing import Any

import jax
import numpy as np

from specrage_jax.config import ExperimentConfig
from specrage_jax.data import MultiViewData
from specrage_jax.data.lazy import StreamedViews
from specrage_jax.overrides import config_from_dict, config_to_dict
from specrage_jax.training.checkpoint_files import CheckpointError, library_version
from specrage_jax.training.distributed import barrier, is_primary, primary_decides


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Writes JSON through a temporary file and a rename, so a crash never leaves a torn file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    os.replace(tmp, path)


def environment_info() -> dict[str, Any]:
    """Python, JAX, backend, devices and machine, and the process's peak memory so far: host
    (``peak_host_bytes``, the resident set's high-water mark) and, where the backend reports it
    (GPU, TPU), the first local device's (``peak_device_bytes``; None on a CPU)."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return {
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": str(jax.devices()),
        "machine": platform.machine(),
        "peak_host_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # Linux: KiB
        "peak_device_bytes": stats.get("peak_bytes_in_use"),
    }


RUN_RECORD = "run.json"


RUN_FORMAT_VERSION = 1


def data_fingerprint(data: MultiViewData | StreamedViews) -> dict[str, Any]:
    """Sample count, view dims and a CRC32 of every view and the labels (resume refuses other data).
    A streamed dataset gives the CRC32 of each of its files instead (``StreamedViews.fingerprint``)."""
    if isinstance(data, StreamedViews):
        return data.fingerprint()
    crc = 0
    for array in (*data.views, data.labels):
        crc = zlib.crc32(np.ascontiguousarray(array).tobytes(), crc)
    return {
        "n_samples": int(data.labels.shape[0]),
        "view_dims": [int(d) for d in data.view_dims],
        "crc32": f"{crc:08x}",
    }


def comparable_config(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration without what does not change results (checkpointing, progress bars)."""
    values = json.loads(json.dumps(config_to_dict(config)))
    values.pop("checkpoint", None)
    values["train"].pop("progress", None)
    return values


def config_differences(recorded: ExperimentConfig, requested: ExperimentConfig) -> list[str]:
    """["section.field: recorded -> requested", ...] over the fields that change results."""
    a, b = comparable_config(recorded), comparable_config(requested)
    return [
        f"{section}.{name}: {a[section].get(name)!r} -> {b.get(section, {}).get(name)!r}"
        for section in a
        for name in a[section]
        if a[section].get(name) != b.get(section, {}).get(name)
    ]


def read_run_record(out_dir: str | Path) -> dict[str, Any]:
    """OUT/checkpoints/run.json of an earlier run.

    Raises:
      CheckpointError: when there is none or it cannot be read.
    """
    path = Path(out_dir) / "checkpoints" / RUN_RECORD
    if not path.is_file():
        raise CheckpointError(
            f"nothing to resume in {out_dir}: no {path} (was it trained with checkpoints on, --checkpoint-every > 0?)"
        )
    try:
        record = json.loads(path.read_text())
        config_from_dict(record["config"])
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is damaged: {err}") from None
    if record.get("kind") != "run" or record.get("format_version", 0) > RUN_FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a run record this specrage_jax ({library_version()}) reads")
    return record


def check_resume(
    record: dict[str, Any], dataset: str, seed: int, config: ExperimentConfig, fingerprint: dict[str, Any], where: Path
) -> None:
    problems = []
    if record["dataset"] != dataset:
        problems.append(f"dataset {record['dataset']!r} -> {dataset!r}")
    if record["seed"] != seed:
        problems.append(f"seed {record['seed']} -> {seed}")
    problems += config_differences(config_from_dict(record["config"]), config)
    if record.get("data") != fingerprint:
        problems.append(f"data {record.get('data')} -> {fingerprint}")
    if problems:
        raise CheckpointError(
            f"cannot resume {where}: the run was recorded with other settings "
            f"({'; '.join(problems)}); resume with the recorded ones or start a new run in "
            f"another directory"
        )


def start_run(ckpt_dir: Path, record: dict[str, Any], *, resume: bool) -> None:
    """Checks and writes OUT/checkpoints/run.json. A fresh run refuses to overwrite the checkpoints of
    a run that was interrupted (status 'running', or 'preempted': stopped by a signal after a
    checkpoint); those of a finished or failed run are replaced."""
    run_file = ckpt_dir / RUN_RECORD
    earlier: dict[str, Any] = {}
    if not resume and run_file.is_file():
        try:
            earlier = json.loads(run_file.read_text())
        except ValueError:
            pass
    if primary_decides(earlier.get("status") in ("running", "preempted")):
        raise CheckpointError(
            f"{ckpt_dir} holds the checkpoints of an interrupted run "
            f"({earlier.get('dataset')}, seed {earlier.get('seed')}); continue it with "
            f"--resume {ckpt_dir.parent}, or delete {ckpt_dir} / choose another output directory"
        )
    barrier(f"checked {run_file}")  # several processes: all have read it before the primary writes
    if is_primary():
        if not resume and ckpt_dir.exists():
            shutil.rmtree(ckpt_dir)
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_file, {**record, "status": "running", "processes": jax.process_count()})
    barrier(f"wrote {run_file}")


def set_run_status(ckpt_dir: Path, status: str) -> None:
    """Records the run's status (the primary process writes; no barrier, so a failing process
    can call it alone)."""
    if is_primary():
        run_file = ckpt_dir / RUN_RECORD
        write_json_atomic(run_file, {**json.loads(run_file.read_text()), "status": status})
