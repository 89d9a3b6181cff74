"""specrage train: the configuration of a new or resumed run from the command line, its checks
before any work, and the run itself."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specrage_jax.cli.output import metrics_table, one_line, print_run_plan
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import dataset_names, is_dataset_name
from specrage_jax.overrides import apply_overrides, config_from_dict
from specrage_jax.presets import preset

# Unless told otherwise `specrage train` checkpoints after its first epoch, then after an epoch when a
# minute has passed since the last checkpoint: a save blocks training ~0.05-0.25 s (digits preset,
# BUILD_NOTES.md "Checkpoints"), which every epoch would make 17% of a 0.6 s digits epoch but is
# nothing for long epochs.
CLI_CHECKPOINT_EVERY = 1
CLI_CHECKPOINT_MIN_SECONDS = 60.0


def _with_section(config: ExperimentConfig, section: str, **changes: Any) -> ExperimentConfig:
    return dataclasses.replace(config, **{section: dataclasses.replace(getattr(config, section), **changes)})


def resolve_config(
    dataset: str,
    epochs: int | None,
    overrides: Sequence[str],
    quiet: bool,
    *,
    checkpoint_every: int | None = None,
    keep_checkpoints: int | None = None,
) -> ExperimentConfig:
    """The dataset's preset with --set overrides, --epochs, --quiet and the checkpoint options applied.

    Checkpoints: every ``checkpoint_every`` epochs if given, else as --set checkpoint.* says, else the
    CLI's default (after an epoch, once a minute has passed since the last checkpoint).
    """
    config = apply_overrides(preset(dataset), overrides)
    if epochs is not None:
        config = _with_section(config, "train", epochs=epochs)
    if quiet:
        config = _with_section(config, "train", progress=False)
    set_keys = _set_keys(overrides)
    if checkpoint_every is None and "checkpoint.every_epochs" not in set_keys:
        config = _with_section(config, "checkpoint", every_epochs=CLI_CHECKPOINT_EVERY)
        if "checkpoint.min_seconds" not in set_keys:
            config = _with_section(config, "checkpoint", min_seconds=CLI_CHECKPOINT_MIN_SECONDS)
    return _checkpoint_options(config, checkpoint_every, keep_checkpoints, set_keys)


def _set_keys(overrides: Sequence[str]) -> set[str]:
    return {item.partition("=")[0].strip() for item in overrides}


def _checkpoint_options(
    config: ExperimentConfig, every: int | None, keep: int | None, set_keys: set[str]
) -> ExperimentConfig:
    """--checkpoint-every N means every N epochs (no minimum interval unless --set gives one)."""
    if every is not None:
        config = _with_section(config, "checkpoint", every_epochs=every)
        if "checkpoint.min_seconds" not in set_keys:
            config = _with_section(config, "checkpoint", min_seconds=0.0)
    if keep is not None:
        config = _with_section(config, "checkpoint", keep=keep)
    return config


def all_overrides(args: argparse.Namespace) -> list[str]:
    """--set values, then the stage bounds (--epochs, --autoencoder-epochs, --siamese-epochs) as
    the config fields they set."""
    bounds = (
        ("train.epochs", args.epochs),
        ("autoencoder.epochs", args.autoencoder_epochs),
        ("siamese.epochs", args.siamese_epochs),
    )
    return [*args.overrides, *(f"{key}={value}" for key, value in bounds if value is not None)]


def default_run_dir(dataset: str, seed: int) -> str:
    """runs/NAME-seedS: a file or memmap dataset by its file's stem (``file:/data/3sources.mat`` ->
    ``runs/3sources-seed0``), anything else by its name with characters unsafe in a folder name
    replaced by '-'."""
    kind, _, path = dataset.partition(":")
    name = Path(path).stem if kind in ("file", "memmap") and path else dataset
    return f"runs/{re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('-.') or 'dataset'}-seed{seed}"


def resolve_resume(args: argparse.Namespace) -> tuple[str, int, ExperimentConfig, str | None]:
    """(dataset, seed, configuration, data dir) of the run to resume in ``args.resume``.

    The recorded settings are reused; --dataset, --seed, --epochs and --set may repeat them but not
    change them (the continued run would no longer be the recorded one). --quiet and the checkpoint
    options may change.

    Raises:
      ValueError: naming each conflicting setting.
    """
    from specrage_jax.runs.records import config_differences, read_run_record

    record = read_run_record(args.resume)
    recorded = config_from_dict(record["config"])
    problems = []
    if args.out is not None and Path(args.out).absolute() != Path(args.resume).absolute():
        problems.append(f"--out {args.out} (a resumed run writes to its own directory {args.resume})")
    if args.dataset is not None and args.dataset != record["dataset"]:
        problems.append(f"--dataset {args.dataset} (recorded: {record['dataset']})")
    if args.seed is not None and args.seed != record["seed"]:
        problems.append(f"--seed {args.seed} (recorded: {record['seed']})")
    requested = apply_overrides(recorded, all_overrides(args))
    problems += config_differences(recorded, requested)
    if args.checkpoint_every == 0:
        problems.append("--checkpoint-every 0 (a resumed run keeps checkpointing)")
    if problems:
        raise ValueError(
            f"cannot resume {args.resume} with other settings than it was started with: {'; '.join(problems)}"
        )
    config = _with_section(requested, "train", progress=not args.quiet)
    config = _checkpoint_options(config, args.checkpoint_every, args.keep_checkpoints, _set_keys(all_overrides(args)))
    return record["dataset"], int(record["seed"]), config, args.data_dir or record.get("data_dir")


def stream_choice(flag: str, recorded: bool | None = None) -> bool | None:
    """--stream as run_experiment's ``stream``: on True, off False, auto the recorded choice of a
    resumed run, else None (automatic by size)."""
    if flag == "on":
        return True
    if flag == "off":
        return False
    return recorded


def eval_max_rows(value: int | None) -> int | None:
    """--eval-max-rows as run_experiment's ``eval_max_rows`` (0: every row; unset: the default)."""
    from specrage_jax.runs.experiment import STREAM_EVAL_MAX_ROWS

    if value is None:
        return STREAM_EVAL_MAX_ROWS
    if value < 0:
        raise ValueError(f"--eval-max-rows must be >= 0 (0: every row), got {value}")
    return value or None


def check_stream_request(dataset: str, stream: bool | None, data_dir: str | None, config: ExperimentConfig) -> None:
    """ValueError before any work when the run would stream a dataset that cannot stream, or with a
    fitted scaler (streamed runs take data.preprocess=none)."""
    from specrage_jax.data import parse_dataset_name
    from specrage_jax.runs.experiment import should_stream

    if not should_stream(dataset, stream, data_dir):
        return
    if not parse_dataset_name(dataset).streamable:
        raise ValueError(
            f"--stream on: {dataset} cannot be streamed from disk; streaming is for infinitemnist[:N] and memmap:DIR"
        )
    if config.data.preprocess not in ("none", "auto"):
        raise ValueError(
            f"{dataset} is streamed from disk, which needs data.preprocess=none (got "
            f"{config.data.preprocess!r}): add --set data.preprocess=none, or --stream off"
        )


def join_process_group(args: argparse.Namespace) -> int:
    """Joins the processes of a multi-process run (flags or SPECRAGE_* variables) before anything
    asks JAX for its devices; returns the number of processes (1: a single-process run).

    Raises:
      ValueError: an incomplete group.
    """
    from specrage_jax.training.distributed import group_from, initialize

    group = group_from(args.coordinator, args.num_processes, args.process_id)
    return 1 if group is None else initialize(group)


def on_secondary_process(config: ExperimentConfig) -> ExperimentConfig:
    """The configuration of a process other than 0 in a multi-process run: no progress bar (process 0
    reports)."""
    return _with_section(config, "train", progress=False)


LAUNCHED_BY = "SPECRAGE_LAUNCH_LOCAL"  # set by `specrage launch --local N` in its processes: N


def resume_command(out: str, processes: int) -> str:
    """The command line that resumes the run in ``out`` (started by ``specrage launch`` when its
    variable is set, else by hand in each process of a group)."""
    launched = os.environ.get(LAUNCHED_BY)
    if launched:
        return f"specrage launch --local {launched} -- train --resume {out}"
    if processes > 1:
        return f"specrage train --resume {out} (in each of the {processes} processes, with their group flags)"
    return f"specrage train --resume {out}"


def preempted_line(err: Any, out: str, processes: int) -> str:
    """The one line a run stopped by a signal prints: where, the checkpoint, how to resume."""
    written = f"checkpoint written to {err.checkpoint}" if err.checkpoint else "no checkpoint written"
    return f"specrage: preempted: {err}; {written}; resume with: {resume_command(out, processes)}"


def run_train(args: argparse.Namespace) -> int:
    try:
        processes = join_process_group(args)
    except ValueError as err:
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    from specrage_jax.training.distributed import is_primary

    try:
        stream = stream_choice(args.stream)
        max_rows = eval_max_rows(args.eval_max_rows)
        if args.resume is not None:
            dataset, seed, config, data_dir = resolve_resume(args)
            out = args.resume
            from specrage_jax.runs.records import read_run_record

            stream = stream_choice(args.stream, read_run_record(out).get("stream"))
        else:
            if args.dataset is None:
                print("specrage train: --dataset is required (or --resume DIR)", file=sys.stderr)
                return 2
            if not is_dataset_name(args.dataset):
                print(
                    f"specrage: unknown dataset {args.dataset!r}; known: {', '.join(dataset_names())}", file=sys.stderr
                )
                return 2
            dataset, seed, data_dir = args.dataset, 0 if args.seed is None else args.seed, args.data_dir
            config = resolve_config(
                dataset,
                None,
                all_overrides(args),
                args.quiet,
                checkpoint_every=args.checkpoint_every,
                keep_checkpoints=args.keep_checkpoints,
            )
            out = args.out or default_run_dir(dataset, seed)
        if processes > 1 and not is_primary():  # one process alone never starts JAX this early
            config = on_secondary_process(config)
    except ValueError as err:  # CheckpointError included
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(dataclasses.asdict(config), indent=2))
        return 0
    try:
        check_stream_request(dataset, stream, data_dir, config)
    except (ValueError, FileNotFoundError) as err:
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    from specrage_jax.runs.experiment import run_experiment
    from specrage_jax.training.preemption import PREEMPTED_EXIT_CODE, Preempted
    from specrage_jax.training.sharding import check_batch_divisible, make_data_mesh

    try:
        mesh = make_data_mesh(args.devices)
        check_batch_divisible(config.train.batch_size, mesh)
    except ValueError as err:
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    try:
        result = run_experiment(
            dataset,
            config,
            seed=seed,
            out_dir=out,
            data_dir=data_dir,
            figure=not args.no_figure,
            resume=args.resume is not None,
            mesh=mesh if mesh.devices.size > 1 else None,
            stream=stream,
            cache_dir=args.cache_dir,
            eval_max_rows=max_rows,
            report=print_run_plan,
        )
    except Preempted as err:  # SIGTERM / SIGINT: stopped after a step, checkpoint written
        if is_primary():
            print(preempted_line(err, out, processes), file=sys.stderr, flush=True)
        return PREEMPTED_EXIT_CODE
    except (ValueError, FileNotFoundError, FloatingPointError) as err:  # bad data or settings; CheckpointError too
        if args.debug:
            raise
        print(f"specrage: {one_line(err)} (--debug shows the traceback)", file=sys.stderr)
        return 2
    if not is_primary():
        return 0  # process 0 reports and writes the run's outputs
    print(metrics_table(result))
    for problem in result["test"]["health"]["problems"]:
        print(f"specrage: warning: {problem}", file=sys.stderr)
    resumed = result["training"].get("resumed_from_epoch")
    steps = result["training"].get("resumed_from_step")
    if resumed is not None:
        print(f"resumed from the checkpoint after epoch {resumed}" + (f" and {steps} steps" if steps else ""))
    written = (
        ["metrics.json"]
        + ([] if args.no_figure else ["embedding.png"])
        + (["model"] if config.checkpoint.save_model else [])
    )
    print(f"wrote {', '.join(f'{out}/{name}' for name in written)}")
    return 0
