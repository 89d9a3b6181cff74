"""How far each tuned number of the graph rules is from changing a choice, on every regime at once.

For every dataset and seed (the development suite, the variants, and Handwritten and BDGP three
ways: the estimator on the paper split's training rows, on all rows, and the command line's
split), the measurements the neighbour and component rules read are taken once, as the library
resolves its defaults: the eigengap by candidate l, the views' neighbour agreement, the normalized
cut by candidate c and the bottom Laplacian eigenvalues.
Each tuned number of :mod:`specrage_jax.training.graph_rules` that decides from those measurements
is then moved over a grid and the choices are replayed (no graph is rebuilt): the runs whose l or c
change, and over how many datasets. A number whose every move changes nothing decides nothing on
these regimes; one that changes many datasets at a small move is tuned to the edge.

    PYTHONPATH=. python experiments/defaults_sensitivity.py --data-dir DATA --seeds 0 1 2 3 4 \\
        --out experiments/results/defaults_sensitivity.json
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from specrage_jax.config import ExperimentConfig
from specrage_jax.data.registry import load_dataset
from specrage_jax.runs.prepare import prepare_splits, preset_config, resolve_run_defaults
from specrage_jax.training import defaults, graph_rules
from specrage_jax.training.graph_rules import (
    choose_neighbor_count,
    component_choice_from,
    sparse_split_in_doubt,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_proxy import PROXY_DATASETS, load_named, resolved_fit
from devsuite import cpu_model

# The tuned numbers replayed from the measurements, each with the values it is moved to (about
# +-10 and +-20 %). The bars derived from them (graph_rules.derived_bars) move with them.
GRID: dict[str, tuple[float, ...]] = {
    "EIGENVALUE_GAP": (0.08, 0.09, 0.11, 0.12),
    "GAP_GAIN": (1.5, 1.8, 2.2, 2.5),
    "SUSTAINED_RUN": (2, 4),
    "AGREEING_VIEWS": (0.2, 0.225, 0.275, 0.3),
}
CLI_RUNS = (("handwritten", range(10)), ("file:BDGP.mat", range(5)))  # the command line's split, no preset
ALL_ROWS = ("handwritten", "bdgp")  # the paper's sets fitted on every row, as a user fits a file


@dataclass(frozen=True)
class Measured:
    """One run's rule inputs and the choices the library made from them."""

    dataset: str
    seed: int
    k: int
    scores: dict[int, float]
    agreement: float
    cuts: dict[int, float]
    eigenvalues: tuple[float, ...]
    l: int
    c: int


@contextmanager
def spying() -> Iterator[dict[str, Any]]:
    """Records what :func:`defaults.resolve_defaults` reads: the neighbour and component choices."""
    seen: dict[str, Any] = {}
    neighbor_choice, component_count = defaults.neighbor_choice, defaults.component_count

    def neighbors(*args: Any, **kwargs: Any) -> Any:
        seen["neighbors"] = neighbor_choice(*args, **kwargs)
        return seen["neighbors"]

    def components(*args: Any, **kwargs: Any) -> Any:
        seen["components"] = component_count(*args, **kwargs)
        return seen["components"]

    with (
        mock.patch.object(defaults, "neighbor_choice", neighbors),
        mock.patch.object(defaults, "component_count", components),
    ):
        yield seen


def measured(dataset: str, seed: int, k: int, seen: dict[str, Any], l: int, c: int) -> Measured:
    neighbors, components = seen["neighbors"], seen["components"]
    return Measured(
        dataset, seed, k, neighbors.scores, neighbors.agreement, components.cuts, components.eigenvalues, l, c
    )


def estimator_run(name: str, data_dir: str, seed: int, *, all_rows: bool = False) -> Measured:
    """The default estimator's resolution on ``name`` at ``seed`` (a paper dataset on the paper
    split's training rows, or on every row with ``all_rows``)."""
    data, paper = load_named(name, data_dir, seed)
    with spying() as seen:
        fit = resolved_fit(data, paper and not all_rows, seed)
    label = f"all rows:{name}" if all_rows else name
    return measured(label, seed, data.n_classes, seen, fit.config.graph.n_neighbors, fit.config.model.n_components)


def cli_dataset(name: str, data_dir: str) -> str:
    """A ``file:`` name of CLI_RUNS read from ``data_dir``; other names as they are."""
    return name.replace("file:", f"file:{data_dir}/", 1)


def cli_resolution(name: str, data_dir: str, seed: int) -> tuple[ExperimentConfig, dict[str, Any], int]:
    """``specrage train --dataset NAME``'s resolved config and record (its stratified split) at
    ``seed``, and the dataset's k; a ``file:`` name is read from ``data_dir``."""
    dataset = cli_dataset(name, data_dir)
    data = load_dataset(dataset, seed=seed, data_dir=data_dir)
    config = preset_config(dataset, data.n_classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        splits = prepare_splits(data, config, seed=seed)
        config, record = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    return config, record, data.n_classes


def cli_run(name: str, data_dir: str, seed: int) -> Measured:
    """The measurements of :func:`cli_resolution`."""
    with spying() as seen:
        config, _, k = cli_resolution(name, data_dir, seed)
    return measured(
        f"cli:{Path(cli_dataset(name, data_dir)).name}",
        seed,
        k,
        seen,
        config.graph.n_neighbors,
        config.model.n_components,
    )


def judged_runs(seeds: Sequence[int]) -> list[tuple[str, int, str]]:
    """Every run the defaults are judged on, as (name, seed, protocol): "estimator" (a suite set
    or variant on all rows, a paper set on the paper split), "all rows" (a paper set on every row)
    and "cli" (the command line's split)."""
    runs = [(name, seed, "estimator") for seed in seeds for name in PROXY_DATASETS]
    runs += [(name, seed, "all rows") for seed in seeds for name in ALL_ROWS]
    return runs + [(name, seed, "cli") for name, cli_seeds in CLI_RUNS for seed in cli_seeds]


def replayed(run: Measured) -> tuple[int, int | None]:
    """(l, c) the rules choose from ``run``'s measurements with the constants as they are now
    (c None where l moved: its cuts were measured on another graph)."""
    decided = choose_neighbor_count(run.scores, run.agreement)
    l = run.l if decided is None else decided[0]
    if l != run.l:
        return l, None
    if not run.cuts:
        return l, run.c  # no cut measured (many clusters, a tiny batch): c is not the cut's to move
    doubt = sparse_split_in_doubt(l, run.scores)
    return l, component_choice_from(run.cuts, run.eigenvalues, run.k, split_in_doubt=doubt).c


@contextmanager
def moved_number(name: str, value: float) -> Iterator[None]:
    """graph_rules.``name`` set to ``value``, and the bars derived from it recomputed."""
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(graph_rules, name, type(getattr(graph_rules, name))(value)))
        bars = graph_rules.derived_bars(graph_rules.EIGENVALUE_GAP, graph_rules.GAP_GAIN)
        for derived, bar in bars._asdict().items():
            stack.enter_context(mock.patch.object(graph_rules, derived, bar))
        yield


def moves(runs: list[Measured], name: str, value: float) -> list[dict[str, Any]]:
    """The runs whose choice changes with graph_rules.``name`` = ``value``."""
    with moved_number(name, value):
        changed = []
        for run in runs:
            l, c = replayed(run)
            if (l, c) != (run.l, run.c):
                changed.append({"dataset": run.dataset, "seed": run.seed, "from": [run.l, run.c], "to": [l, c]})
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runs = [
        cli_run(name, args.data_dir, seed)
        if protocol == "cli"
        else estimator_run(name, args.data_dir, seed, all_rows=protocol == "all rows")
        for name, seed, protocol in judged_runs(args.seeds)
    ]
    disagree = [run for run in runs if replayed(run) != (run.l, run.c)]
    if disagree:
        raise SystemExit(f"replay disagrees with the library on {len(disagree)} runs: {disagree[:3]}")
    numbers = {}
    for name, values in GRID.items():
        by_value = {str(value): moves(runs, name, value) for value in values}
        numbers[name] = {
            "value": getattr(graph_rules, name),
            "moves": {
                v: {"runs": len(c), "datasets": sorted({r["dataset"] for r in c}), "changed": c}
                for v, c in by_value.items()
            },
        }
        shown = ", ".join(f"{v}: {len(c)} runs / {len({r['dataset'] for r in c})} sets" for v, c in by_value.items())
        print(f"{name} = {getattr(graph_rules, name):g}: {shown}", flush=True)
    result = {
        "cpu": cpu_model(),
        "runs": len(runs),
        "datasets": len({run.dataset for run in runs}),
        "protocol": "rule inputs measured once per run as the library resolves its defaults; choices replayed "
        "with one constant moved (c not replayed where l moved)",
        "numbers": numbers,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
