"""Command line:

    specrage train --dataset NAME [--seed S] [--epochs E] [--out DIR] [--set key=value ...]
                   [--stream auto|on|off] [--cache-dir DIR] [--eval-max-rows N]
    specrage train --resume DIR
    specrage embed --checkpoint DIR --input FILE --output FILE.npy [--weights FILE.npy] [--mask FILE.npy]

Argument parsing only; the work is :func:`specrage_jax.runs.experiment.run_experiment` and
:meth:`specrage_jax.SpecRaGE.load` (``specrage embed`` embeds exactly as ``transform`` does).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import textwrap
import uuid
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from specrage_jax.config import (
    ExperimentConfig,
    apply_overrides,
    config_from_dict,
    describe_fields,
    preset,
)
from specrage_jax.data import dataset_names, is_dataset_name

# Unless told otherwise `specrage train` checkpoints after its first epoch, then after an epoch when a
# minute has passed since the last checkpoint: a save blocks training ~0.05-0.25 s (digits preset, BUILD_NOTES.md "Checkpoints"),
# which every epoch would make 17% of a 0.6 s digits epoch but is nothing for long epochs.
CLI_CHECKPOINT_EVERY = 1
CLI_CHECKPOINT_MIN_SECONDS = 60.0


def config_help(dataset: str | None = None) -> str:
    """Every config field with its value and meaning, for ``specrage train --help``: the values
    ``--dataset DATASET`` would train with when given (its preset and the CLI's checkpoint
    defaults, with what the data decides marked as such), else the defaults before presets."""
    base = ExperimentConfig()
    if dataset is None or not is_dataset_name(dataset):
        config, header = base, ("configuration fields (set any with --set section.field=value; the defaults before "
                                "presets; `specrage train --dataset NAME --help` shows NAME's values):")
    else:
        config = resolve_config(dataset, None, [], False)
        header = (f"configuration fields as --dataset {dataset} trains with them (set any with --set "
                  f"section.field=value; * marks a value its preset or the data sets):")
    waiting = set(config.unresolved_fields())
    lines = [header]
    for key, value, help_text in describe_fields(config):
        if key in waiting or (key == "data.preprocess" and value == "'auto'"):
            value = "chosen from the data at the start of the run *"
        elif key == "model.n_components" and value == "0":
            value = "0 (the number of classes)"
        elif dataset is not None and value != _field_repr(base, key):
            value = f"{value} *"
        lines.append(f"  {key} = {value}")
        lines.extend(textwrap.wrap(help_text, 86, initial_indent="      ", subsequent_indent="      "))
    lines.append("")
    lines.append("--print-config prints the configuration a command line trains with, --set values included.")
    return "\n".join(lines)


def _field_repr(config: ExperimentConfig, key: str) -> str:
    section, _, name = key.partition(".")
    return repr(getattr(getattr(config, section), name))


def help_dataset(argv: Sequence[str]) -> str | None:
    """The --dataset value of a ``train ... --help`` command line (None otherwise): its help shows
    that dataset's values."""
    if "train" not in argv or not ({"-h", "--help"} & set(argv)):
        return None
    for i, arg in enumerate(argv):
        if arg == "--dataset" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--dataset="):
            return arg.partition("=")[2]
    return None


def _version() -> str:
    from specrage_jax.version import __version__

    return __version__


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def build_parser(dataset_for_help: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specrage",
        description="SpecRaGE in JAX/Flax: multi-view spectral representation learning "
                    "(fused, orthogonal, parametric embeddings with per-sample view weights).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = commands.add_parser(
        "train", help="train on a dataset, evaluate on its test split, write metrics.json and embedding.png",
        description="Train SpecRaGE on a dataset's training split, evaluate the test split (k-means ACC/NMI/ARI "
                    "on the test embedding; linear SVM trained on the train embedding, scored on the test "
                    "embedding), print a metrics table, and write DIR/metrics.json, DIR/embedding.png, the inference "
                    "model DIR/model (for `specrage embed`) and training checkpoints in DIR/checkpoints "
                    "(for --resume).",
        epilog=config_help(dataset_for_help), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--dataset", default=None, help=f"dataset: {', '.join(dataset_names())}, infinitemnist:N (N samples), file:PATH[#0,2] "
                            "(any .mat/.npz multi-view file; #0,2 picks views), or memmap:DIR (per-view .npy files "
                            "written by data.stream.write_views_memmap)")
    train.add_argument("--seed", type=int, default=None, help="seed of the split, initialization and batches (default 0)")
    train.add_argument("--epochs", type=positive_int, default=None,
                       help="maximum epochs of SpecRaGE itself, the last stage (same as --set train.epochs=E); the "
                            "stages before it have their own bounds. The stages and their epochs are printed "
                            "before training starts")
    train.add_argument("--autoencoder-epochs", type=positive_int, default=None, metavar="E",
                       help="epochs of the per-view autoencoders, when the preset trains them (autoencoder.epochs)")
    train.add_argument("--siamese-epochs", type=positive_int, default=None, metavar="E",
                       help="epochs of the per-view Siamese nets, when the preset trains them (siamese.epochs)")
    train.add_argument("--out", default=None, help="output directory (default runs/DATASET-seedS)")
    train.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field, e.g. --set graph.n_neighbors=15 (repeatable)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--debug", action="store_true",
                       help="on a data or settings error, show the Python traceback instead of one line")
    train.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    train.add_argument("--no-figure", action="store_true", help="do not draw DIR/embedding.png")
    train.add_argument("--devices", type=int, default=None, metavar="N",
                       help="train data-parallel over the first N local devices (default: all; 1: no sharding); "
                            "train.batch_size must be a multiple of N")
    train.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                       help="save a training checkpoint to DIR/checkpoints every N epochs, 0 = never (same as --set "
                            "checkpoint.every_epochs=N); default: after an epoch once a minute has passed since the "
                            "last checkpoint (the first right after the first epoch)")
    train.add_argument("--keep-checkpoints", type=int, default=None, metavar="K",
                       help="training checkpoints kept, the newest (default 3; --set checkpoint.keep=K)")
    train.add_argument("--stream", choices=("auto", "on", "off"), default="auto",
                       help="read the dataset from disk on demand instead of holding it in memory: on, off, or auto "
                            "(default: on for infinitemnist:N and memmap:DIR from 250000 samples). InfiniteMNIST is "
                            "then generated once into --cache-dir; needs data.preprocess=none")
    train.add_argument("--cache-dir", default=None, metavar="DIR",
                       help="where a streamed InfiniteMNIST is generated and reused (default DATA_DIR/specrage_cache)")
    train.add_argument("--eval-max-rows", type=int, default=None, metavar="N",
                       help="streamed runs: k-means and the SVM's training set use at most N seeded random rows "
                            "(default 100000; 0: every row); recorded in metrics.json under test.eval_rows")
    train.add_argument("--resume", default=None, metavar="DIR",
                       help="continue the interrupted run whose output directory is DIR from its newest readable "
                            "checkpoint (its dataset, seed and configuration are reused; conflicting ones are refused)")

    embed = commands.add_parser(
        "embed", help="embed new samples with a trained model (DIR/model of a run)",
        description="Embed the samples in FILE with the model saved by `specrage train --out DIR` (DIR, DIR/model) "
                    "or by SpecRaGE.save: the fitted per-view scaling and autoencoders are applied first, exactly as "
                    "SpecRaGE.load(DIR).transform does. Writes the (n, k) embedding with numpy.save.",
    )
    embed.add_argument("--checkpoint", required=True, metavar="DIR", help="a run's output directory or a model directory")
    embed.add_argument("--input", required=True, metavar="FILE",
                       help="an .npz with view_0 ... view_{V-1} (n, d_v) (labels optional), or a multi-view .mat file")
    embed.add_argument("--output", required=True, metavar="FILE.npy", help="where to write the (n, k) embedding")
    embed.add_argument("--weights", default=None, metavar="FILE.npy", help="also write the (n, V) view weights")
    embed.add_argument("--views", default=None, metavar="I,J",
                       help="indices of the file's views to use, in order (when the model was trained on file:PATH#I,J)")
    embed.add_argument("--mask", default=None, metavar="FILE.npy",
                       help="(n, V) boolean array, False where a sample's view is missing (a row of NaN in the "
                            "input marks it missing too); a missing view is left out of that sample's fusion")
    embed.add_argument("--batch-size", type=int, default=None,
                       help="samples per forward pass (default: the model's eval.embed_batch_size)")
    embed.add_argument("--debug", action="store_true", help="on an error, show the Python traceback")
    return parser


def _with_section(config: ExperimentConfig, section: str, **changes: Any) -> ExperimentConfig:
    return dataclasses.replace(config, **{section: dataclasses.replace(getattr(config, section), **changes)})


def resolve_config(dataset: str, epochs: int | None, overrides: Sequence[str], quiet: bool, *,
                   checkpoint_every: int | None = None, keep_checkpoints: int | None = None) -> ExperimentConfig:
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


def _checkpoint_options(config: ExperimentConfig, every: int | None, keep: int | None,
                        set_keys: set[str]) -> ExperimentConfig:
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
    bounds = (("train.epochs", args.epochs), ("autoencoder.epochs", args.autoencoder_epochs),
              ("siamese.epochs", args.siamese_epochs))
    return [*args.overrides, *(f"{key}={value}" for key, value in bounds if value is not None)]


def resolve_resume(args: argparse.Namespace) -> tuple[str, int, ExperimentConfig, str | None]:
    """(dataset, seed, configuration, data dir) of the run to resume in ``args.resume``.

    The recorded settings are reused; --dataset, --seed, --epochs and --set may repeat them but not
    change them (the continued run would no longer be the recorded one). --quiet and the checkpoint
    options may change.

    Raises:
      ValueError: naming each conflicting setting.
    """
    from specrage_jax.runs.experiment import config_differences, read_run_record

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
        raise ValueError(f"cannot resume {args.resume} with other settings than it was started with: "
                         f"{'; '.join(problems)}")
    config = _with_section(requested, "train", progress=not args.quiet)
    config = _checkpoint_options(config, args.checkpoint_every, args.keep_checkpoints, _set_keys(all_overrides(args)))
    return record["dataset"], int(record["seed"]), config, args.data_dir or record.get("data_dir")


def metrics_table(result: dict) -> str:
    """A readable table of the test metrics (percentages)."""
    test = result["test"]
    rows = [
        ("k-means ACC", test["kmeans"]["acc"]), ("k-means NMI", test["kmeans"]["nmi"]),
        ("k-means ARI", test["kmeans"]["ari"]), ("SVM accuracy", test["svm"]["acc"]),
        ("SVM macro F1", test["svm"]["f1"]), ("SVM macro precision", test["svm"]["precision"]),
    ]
    n = result["n_samples"]
    lines = [f"{result['dataset']} (seed {result['seed']}): train {n['train']}, val {n['val']}, test {n['test']} samples",
             f"{'metric':<22}{'test':>8}", "-" * 30]
    lines += [f"{name:<22}{100 * value:>7.2f}%" for name, value in rows]
    weights = ", ".join(f"{w:.2f}" for w in test["mean_view_weights"])
    lines += ["-" * 30, f"mean view weights      {weights}",
              f"train time             {result['timing']['train_seconds']:.1f} s ({result['training']['steps']} steps)"]
    problems = result["test"]["health"]["problems"]
    lines.append(f"embedding health       {'ok' if not problems else f'{len(problems)} problem(s), see the warnings'}")
    return "\n".join(lines)


def print_run_plan(resolved: dict[str, Any], stages: Sequence[Any]) -> None:
    """Prints the settings chosen from the data (if any) and the stages to train, before training."""
    from specrage_jax.runs.run_plan import format_plan
    from specrage_jax.training.defaults import format_choices

    if resolved:
        print("settings chosen from the data (any --set value wins):")
        for line in format_choices(resolved):
            print(f"  {line}")
    print("stages to train:")
    for line in format_plan(tuple(stages)):
        print(f"  {line}")
    sys.stdout.flush()


def print_warning_line(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                       file: Any = None, line: str | None = None) -> None:
    """A warning as the CLI shows it: ``specrage: warning: <message on one line>`` on stderr."""
    print(f"specrage: warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def one_line(err: BaseException) -> str:
    """An exception's message on one line (what the CLI prints for an expected failure)."""
    return " ".join(str(err).split()) or type(err).__name__


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
        raise ValueError(f"--stream on: {dataset} cannot be streamed from disk; streaming is for "
                         f"infinitemnist[:N] and memmap:DIR")
    if config.data.preprocess not in ("none", "auto"):
        raise ValueError(f"{dataset} is streamed from disk, which needs data.preprocess=none (got "
                         f"{config.data.preprocess!r}): add --set data.preprocess=none, or --stream off")


def run_train(args: argparse.Namespace) -> int:
    try:
        stream = stream_choice(args.stream)
        max_rows = eval_max_rows(args.eval_max_rows)
        if args.resume is not None:
            dataset, seed, config, data_dir = resolve_resume(args)
            out = args.resume
            from specrage_jax.runs.experiment import read_run_record

            stream = stream_choice(args.stream, read_run_record(out).get("stream"))
        else:
            if args.dataset is None:
                print("specrage train: --dataset is required (or --resume DIR)", file=sys.stderr)
                return 2
            if not is_dataset_name(args.dataset):
                print(f"specrage: unknown dataset {args.dataset!r}; known: {', '.join(dataset_names())}", file=sys.stderr)
                return 2
            dataset, seed, data_dir = args.dataset, 0 if args.seed is None else args.seed, args.data_dir
            config = resolve_config(dataset, None, all_overrides(args), args.quiet,
                                    checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints)
            out = args.out or f"runs/{dataset}-seed{seed}"
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
    from specrage_jax.training.sharding import check_batch_divisible, make_data_mesh

    try:
        mesh = make_data_mesh(args.devices)
        check_batch_divisible(config.train.batch_size, mesh)
    except ValueError as err:
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    try:
        result = run_experiment(dataset, config, seed=seed, out_dir=out, data_dir=data_dir,
                                figure=not args.no_figure, resume=args.resume is not None,
                                mesh=mesh if mesh.devices.size > 1 else None, stream=stream,
                                cache_dir=args.cache_dir, eval_max_rows=max_rows, report=print_run_plan)
    except (ValueError, FileNotFoundError, FloatingPointError) as err:  # bad data or settings; CheckpointError too
        if args.debug:
            raise
        print(f"specrage: {one_line(err)} (--debug shows the traceback)", file=sys.stderr)
        return 2
    print(metrics_table(result))
    for problem in result["test"]["health"]["problems"]:
        print(f"specrage: warning: {problem}", file=sys.stderr)
    resumed = result["training"].get("resumed_from_epoch")
    if resumed is not None:
        print(f"resumed from the checkpoint after epoch {resumed}")
    written = (["metrics.json"] + ([] if args.no_figure else ["embedding.png"])
               + (["model"] if config.checkpoint.save_model else []))
    print(f"wrote {', '.join(f'{out}/{name}' for name in written)}")
    return 0


def read_input_views(
    path: str | Path, expected_dims: Sequence[int], views: Sequence[int] | None = None
) -> tuple[np.ndarray, ...]:
    """The views of an embedding input file, samples first: an .npz with view_0 ... (labels not
    needed) or a multi-view .mat (any layout ``data.loaders`` reads). A view stored features-first
    is transposed when only its first dimension matches the model's input width.

    Raises:
      FileNotFoundError, ValueError: naming the file and, for a wrong shape, the view.
    """
    from specrage_jax.data.loaders import (
        dense_float32,
        find_view_sources,
        npz_view_keys,
        read_mat_variables,
        select_views,
    )

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such input file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".npz":
        with np.load(file, allow_pickle=False) as archive:
            keys = npz_view_keys(archive.files)
            if not keys:
                raise ValueError(f"{file}: no views found; expected keys view_0, view_1, ...; found {archive.files}")
            arrays = [archive[key] for key in keys]
    elif suffix == ".mat":
        arrays = [source.array for source in find_view_sources(read_mat_variables(file), None, file=str(file))]
    else:
        raise ValueError(f"{file}: unknown input file type {suffix!r}; expected .npz or .mat")
    chosen = select_views(len(arrays), views, file=str(file))
    arrays = [arrays[v] for v in chosen]
    if len(arrays) != len(expected_dims):
        raise ValueError(f"{file}: {len(arrays)} views, the model was trained on {len(expected_dims)} "
                         f"(input widths {list(expected_dims)}); pick views with --views")
    oriented = []
    for v, (array, dim) in enumerate(zip(arrays, expected_dims)):
        if array.ndim != 2:
            raise ValueError(f"{file}: view {v} must be 2-D (n_samples, n_features), got shape {array.shape}")
        if array.shape[1] != dim and array.shape[0] == dim:
            array = array.T
        if array.shape[1] != dim:
            raise ValueError(f"{file}: view {v} has shape {tuple(array.shape)}; the model expects {dim} features")
        oriented.append(dense_float32(array))
    return tuple(oriented)


def save_npy_atomic(path: str | Path, array: np.ndarray) -> None:
    """numpy.save through a temporary file and a rename (no torn file on a crash)."""
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def read_mask(path: str | None, n_samples: int, n_views: int) -> np.ndarray | None:
    """--mask FILE.npy: an (n, V) boolean array, True = view present (None without the option)."""
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such mask file: {file}")
    mask = np.load(file, allow_pickle=False)
    if mask.shape != (n_samples, n_views) or mask.dtype != np.bool_:
        raise ValueError(f"{file}: the mask must be a boolean array of shape (n_samples, n_views) = "
                         f"{(n_samples, n_views)}, got {mask.dtype} {mask.shape}")
    return mask


def run_embed(args: argparse.Namespace) -> int:
    from specrage_jax.api.estimator import SpecRaGE

    try:
        views = None if args.views is None else [int(v) for v in args.views.split(",") if v.strip()]
        model = SpecRaGE.load(args.checkpoint)
        inputs = read_input_views(args.input, model.view_dims_, views)
        mask = read_mask(args.mask, inputs[0].shape[0], len(inputs))
        y, weights = model._embed(list(inputs), mask, batch_size=args.batch_size)
    except (ValueError, FileNotFoundError) as err:  # CheckpointError is a ValueError
        if args.debug:
            raise
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    save_npy_atomic(args.output, y)
    if args.weights:
        save_npy_atomic(args.weights, weights)
    print(f"wrote {args.output} ({y.shape[0]} x {y.shape[1]})" + (f" and {args.weights}" if args.weights else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(help_dataset(argv)).parse_args(argv)
    if not getattr(args, "debug", False):
        warnings.showwarning = print_warning_line  # this process is the CLI's: its warnings read as one line each
    if args.command == "train":
        return run_train(args)
    if args.command == "embed":
        return run_embed(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
