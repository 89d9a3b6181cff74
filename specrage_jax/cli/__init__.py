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
import sys
import textwrap
import warnings
from collections.abc import Sequence

from specrage_jax.cli.compile_cache import enable_compile_cache
from specrage_jax.cli.embed import run_embed
from specrage_jax.cli.launch import add_launch_parser, run_launch
from specrage_jax.cli.output import print_warning_line
from specrage_jax.cli.train import resolve_config, run_train
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import dataset_names, is_dataset_name
from specrage_jax.overrides import describe_fields


def config_help(dataset: str | None = None) -> str:
    """Every config field with its value and meaning, for ``specrage train --help``: the values
    ``--dataset DATASET`` would train with when given (its preset and the CLI's checkpoint
    defaults, with what the data decides marked as such), else what runs when nothing is set
    (the data-aware defaults a ``file:`` dataset and ``SpecRaGE()`` train with)."""
    base = ExperimentConfig()
    if dataset is None or not is_dataset_name(dataset):
        config, header = (
            base,
            (
                "configuration fields as they run when nothing is set: the defaults "
                "(ExperimentConfig()) that a file: dataset and SpecRaGE() train with (set any with "
                "--set section.field=value; a named dataset starts from its preset, and "
                "`specrage train --dataset NAME --help` shows NAME's values; * marks a value the data decides):"
            ),
        )
    else:
        config = resolve_config(dataset, None, [], False)
        header = (
            f"configuration fields as --dataset {dataset} trains with them (set any with --set "
            f"section.field=value; * marks a value its preset or the data sets):"
        )
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
    lines.append(
        "Compiled programs are kept in ~/.cache/specrage_jax/xla for the next command "
        "(SPECRAGE_COMPILE_CACHE=DIR moves it, =off turns it off)."
    )
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
        "train",
        help="train on a dataset, evaluate on its test split, write metrics.json and embedding.png",
        description="Train SpecRaGE on a dataset's training split, evaluate the test split (k-means ACC/NMI/ARI "
        "on the test embedding; linear SVM trained on the train embedding, scored on the test "
        "embedding), print a metrics table, and write DIR/metrics.json, DIR/embedding.png, the inference "
        "model DIR/model (for `specrage embed`) and training checkpoints in DIR/checkpoints "
        "(for --resume). Exit codes: 0 done; 2 a data or settings error (one `specrage:` line); 75 stopped "
        "by SIGTERM or SIGINT after the step in progress, with a checkpoint written and one line naming the "
        "command that resumes it (a second signal stops at once).",
        epilog=config_help(dataset_for_help),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument(
        "--dataset",
        default=None,
        help=f"dataset: {', '.join(dataset_names())}, infinitemnist:N (N samples), file:PATH[#0,2] "
        "(any .mat/.npz multi-view file; #0,2 picks views), or memmap:DIR (per-view .npy files "
        "written by data.stream.write_views_memmap)",
    )
    train.add_argument(
        "--seed", type=int, default=None, help="seed of the split, initialization and batches (default 0)"
    )
    train.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="maximum epochs of SpecRaGE itself, the last stage (same as --set train.epochs=E); the "
        "stages before it have their own bounds. The stages and their epochs are printed "
        "before training starts",
    )
    train.add_argument(
        "--autoencoder-epochs",
        type=positive_int,
        default=None,
        metavar="E",
        help="epochs of the per-view autoencoders, when the preset trains them (autoencoder.epochs)",
    )
    train.add_argument(
        "--siamese-epochs",
        type=positive_int,
        default=None,
        metavar="E",
        help="epochs of the per-view Siamese nets, when the preset trains them (siamese.epochs)",
    )
    train.add_argument(
        "--out", default=None, help="output directory (default runs/DATASET-seedS; a file: dataset by its file name)"
    )
    train.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set graph.n_neighbors=15 (repeatable)",
    )
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument(
        "--debug",
        action="store_true",
        help="on a data or settings error, show the Python traceback instead of one line",
    )
    train.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    train.add_argument("--no-figure", action="store_true", help="do not draw DIR/embedding.png")
    train.add_argument(
        "--devices",
        type=int,
        default=None,
        metavar="N",
        help="train data-parallel over the first N local devices (default: all; 1: no sharding); "
        "train.batch_size must be a multiple of N",
    )
    train.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        metavar="N",
        help="save a training checkpoint to DIR/checkpoints every N epochs, 0 = never (same as --set "
        "checkpoint.every_epochs=N); default: after an epoch once a minute has passed since the "
        "last checkpoint (the first right after the first epoch)",
    )
    train.add_argument(
        "--keep-checkpoints",
        type=int,
        default=None,
        metavar="K",
        help="training checkpoints kept, the newest (default 3; --set checkpoint.keep=K)",
    )
    train.add_argument(
        "--stream",
        choices=("auto", "on", "off"),
        default="auto",
        help="read the dataset from disk on demand instead of holding it in memory: on, off, or auto "
        "(default: on for infinitemnist:N and memmap:DIR from 250000 samples). InfiniteMNIST is "
        "then generated once into --cache-dir; needs data.preprocess=none",
    )
    train.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help="where a streamed InfiniteMNIST is generated and reused (default DATA_DIR/specrage_cache)",
    )
    train.add_argument(
        "--eval-max-rows",
        type=int,
        default=None,
        metavar="N",
        help="streamed runs: the SVM's training set uses at most N seeded random rows (default 100000; "
        "0: every row; k-means always reads every test row); recorded in metrics.json under test.eval_rows",
    )
    train.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="train over several processes: the address process 0 serves the group on (or SPECRAGE_COORDINATOR); "
        "with --num-processes and --process-id. 'auto': JAX detects the group on Cloud TPU, Slurm and Open MPI",
    )
    train.add_argument(
        "--num-processes",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes in the group (or SPECRAGE_NUM_PROCESSES)",
    )
    train.add_argument(
        "--process-id",
        type=int,
        default=None,
        metavar="I",
        help="this process's index, 0..N-1 (or SPECRAGE_PROCESS_ID); process 0 writes the outputs",
    )
    train.add_argument(
        "--resume",
        default=None,
        metavar="DIR",
        help="continue the interrupted run whose output directory is DIR from its newest readable "
        "checkpoint (its dataset, seed and configuration are reused; conflicting ones are refused)",
    )

    embed = commands.add_parser(
        "embed",
        help="embed new samples with a trained model (DIR/model of a run)",
        description="Embed the samples in FILE with the model saved by `specrage train --out DIR` (DIR, DIR/model) "
        "or by SpecRaGE.save: the fitted per-view scaling and autoencoders are applied first, exactly as "
        "SpecRaGE.load(DIR).transform does. Writes the (n, k) embedding with numpy.save.",
    )
    embed.add_argument(
        "--checkpoint", required=True, metavar="DIR", help="a run's output directory or a model directory"
    )
    embed.add_argument(
        "--input",
        required=True,
        metavar="FILE",
        help="an .npz with view_0 ... view_{V-1} (n, d_v) (labels optional), or a multi-view .mat file",
    )
    embed.add_argument("--output", required=True, metavar="FILE.npy", help="where to write the (n, k) embedding")
    embed.add_argument("--weights", default=None, metavar="FILE.npy", help="also write the (n, V) view weights")
    embed.add_argument(
        "--views",
        default=None,
        metavar="I,J",
        help="indices of the file's views to use, in order (when the model was trained on file:PATH#I,J)",
    )
    embed.add_argument(
        "--mask",
        default=None,
        metavar="FILE.npy",
        help="(n, V) boolean array, False where a sample's view is missing (a row of NaN in the "
        "input marks it missing too); a missing view is left out of that sample's fusion",
    )
    embed.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="samples per forward pass (default: the model's eval.embed_batch_size)",
    )
    embed.add_argument("--debug", action="store_true", help="on an error, show the Python traceback")
    add_launch_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(help_dataset(argv)).parse_args(argv)
    if not getattr(args, "debug", False):
        warnings.showwarning = print_warning_line  # this process is the CLI's: its warnings read as one line each
    if args.command in ("train", "embed"):  # (launch starts `train` processes, which enable it themselves)
        enable_compile_cache()  # before anything compiles: a rerun loads the programs this one compiles
    if args.command == "train":
        return run_train(args)
    if args.command == "launch":
        return run_launch(args)
    if args.command == "embed":
        return run_embed(args)
    return 0
