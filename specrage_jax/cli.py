"""Command line: ``specrage train --dataset NAME [--seed S] [--epochs E] [--out DIR] [--set key=value ...]``.

Argument parsing only; the work is :func:`specrage_jax.experiment.run_experiment`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import textwrap
from typing import Sequence

from specrage_jax.config import ExperimentConfig, apply_overrides, describe_fields, preset
from specrage_jax.data import dataset_names, is_dataset_name


def config_help() -> str:
    """Every config field with its default and meaning, for ``specrage train --help``."""
    lines = ["configuration fields (set any with --set section.field=value; defaults before presets):"]
    for key, value, help_text in describe_fields(ExperimentConfig()):
        lines.append(f"  {key} = {value}")
        lines.extend(textwrap.wrap(help_text, 86, initial_indent="      ", subsequent_indent="      "))
    lines.append("")
    lines.append("each dataset starts from its preset (specrage_jax.config.preset); --print-config shows the result.")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specrage",
        description="SpecRaGE in JAX/Flax: multi-view spectral representation learning "
                    "(fused, orthogonal, parametric embeddings with per-sample view weights).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    train = commands.add_parser(
        "train", help="train on a dataset, evaluate on its test split, write metrics.json and embedding.png",
        description="Train SpecRaGE on a dataset's training split, evaluate the test split (k-means ACC/NMI/ARI "
                    "on the test embedding; linear SVM trained on the train embedding, scored on the test "
                    "embedding), print a metrics table, and write DIR/metrics.json and DIR/embedding.png.",
        epilog=config_help(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--dataset", required=True, help=f"dataset: {', '.join(dataset_names())}, infinitemnist:N (N samples), or file:PATH[#0,2] "
                            "(any .mat/.npz multi-view file; #0,2 picks views)")
    train.add_argument("--seed", type=int, default=0, help="seed of the split, initialization and batches (default 0)")
    train.add_argument("--epochs", type=int, default=None, help="maximum epochs (same as --set train.epochs=E)")
    train.add_argument("--out", default=None, help="output directory (default runs/DATASET-seedS)")
    train.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config field, e.g. --set graph.n_neighbors=15 (repeatable)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--print-config", action="store_true", help="print the resolved configuration and exit")
    return parser


def resolve_config(dataset: str, epochs: int | None, overrides: Sequence[str], quiet: bool) -> ExperimentConfig:
    config = apply_overrides(preset(dataset), overrides)
    if epochs is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, epochs=epochs))
    if quiet:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=False))
    return config


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
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "train":
        if not is_dataset_name(args.dataset):
            print(f"specrage: unknown dataset {args.dataset!r}; known: {', '.join(dataset_names())}", file=sys.stderr)
            return 2
        try:
            config = resolve_config(args.dataset, args.epochs, args.overrides, args.quiet)
        except ValueError as err:
            print(f"specrage: {err}", file=sys.stderr)
            return 2
        if args.print_config:
            print(json.dumps(dataclasses.asdict(config), indent=2))
            return 0
        from specrage_jax.experiment import run_experiment

        out = args.out or f"runs/{args.dataset}-seed{args.seed}"
        result = run_experiment(args.dataset, config, seed=args.seed, out_dir=out, data_dir=args.data_dir)
        print(metrics_table(result))
        print(f"wrote {out}/metrics.json and {out}/embedding.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
