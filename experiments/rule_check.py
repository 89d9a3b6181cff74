"""What a change of the graph rules does on every regime, at the cost of the runs it moves.

A rule is kept only if it costs no other regime. Rerunning every fit for every candidate costs
hours on two cores; but a fit is a function of its settings (the same settings and seed give
the same embedding), so only the runs whose resolved settings move need fitting, and those only
twice. Two steps:

1. ``resolve`` (once on the tree before the change, once after it): the graph rules' settings
   (``RULE_KEYS``) on every regime the defaults are judged on (as
   ``experiments/defaults_sensitivity.py`` lists them: the development suite, the paper sets on
   the paper split and the variants at each seed; the paper sets fitted on every row; the
   command line's split), without training; a few minutes.
2. ``fit`` (on either tree: the settings are set explicitly): each run whose settings differ,
   fitted with the settings of each side, scored as its regime is scored (all rows for the suite
   and the variants, k-means seeds 0-4; the test split for the paper sets and the command line);
   per run the change, per regime the mean change, the largest loss and the bars crossed.

    PYTHONPATH=. python experiments/rule_check.py resolve --data-dir DATA --out /tmp/before.json
    # change the rule
    PYTHONPATH=. python experiments/rule_check.py resolve --data-dir DATA --out /tmp/after.json
    PYTHONPATH=. python experiments/rule_check.py fit --data-dir DATA --before /tmp/before.json \\
        --after /tmp/after.json --out experiments/results/rule_check_NAME.json

A run whose other resolved settings move (the per-view preprocessing, a view left out) cannot be
replayed by setting the rule keys. ``refit`` fits those runs with the defaults of the tree it runs
in; run it once on each tree and hand both files to ``fit``, which then scores them beside the
others:

    PYTHONPATH=OLD python experiments/rule_check.py refit --data-dir DATA --before /tmp/before.json \
        --after /tmp/after.json --out /tmp/refit_before.json   # likewise NEW -> /tmp/refit_after.json
    PYTHONPATH=. python experiments/rule_check.py fit ... --refit-before /tmp/refit_before.json \
        --refit-after /tmp/refit_after.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.data.registry import load_dataset
from specrage_jax.runs.experiment import run_experiment
from specrage_jax.runs.prepare import preset_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_proxy import load_named, resolved_fit
from defaults_sensitivity import cli_dataset, cli_resolution, judged_runs
from devsuite import (
    PAPER_DATASETS,
    VARIANTS_BASELINES,
    cpu_model,
    fit_default,
    kmeans_scores,
    release_compiled_programs,
    run_devsuite_dataset,
    run_paper_dataset,
)

RULE_KEYS = ("data.graph_inputs", "graph.n_neighbors", "model.n_components", "graph.degree_normalization")
OTHER_KEYS = ("data.preprocess", "data.unrelated_views")  # resolved, but not set by one override


def run_label(name: str, *, all_rows: bool = False, cli: bool = False) -> str:
    return f"all rows:{name}" if all_rows else f"cli:{name}" if cli else name


def settings_of(record: dict[str, Any]) -> dict[str, Any]:
    """The rule keys and the other tracked keys of a resolved record, {key: value}."""
    return {key: record[key]["value"] for key in (*RULE_KEYS, *OTHER_KEYS) if key in record}


def resolve_estimator(name: str, data_dir: str, seed: int, *, all_rows: bool = False) -> dict[str, Any]:
    data, paper = load_named(name, data_dir, seed)
    return settings_of(resolved_fit(data, paper and not all_rows, seed).record)


def resolve_cli(name: str, data_dir: str, seed: int) -> dict[str, Any]:
    return settings_of(cli_resolution(name, data_dir, seed)[1])


def resolve_all(data_dir: str, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """Every run's resolved settings: [{run, seed, settings}]."""
    return [
        {
            "run": run_label(name, all_rows=protocol == "all rows", cli=protocol == "cli"),
            "seed": seed,
            "settings": resolve_cli(name, data_dir, seed)
            if protocol == "cli"
            else resolve_estimator(name, data_dir, seed, all_rows=protocol == "all rows"),
        }
        for name, seed, protocol in judged_runs(seeds)
    ]


def overrides_for(settings: dict[str, Any]) -> list[str]:
    """``--set`` strings that fix the rule keys of ``settings``."""
    return [f"{key}={settings[key]}" for key in RULE_KEYS if key in settings]


def moved_runs(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[dict[str, Any]]]:
    """(runs whose rule keys alone differ, as (before, after) pairs; runs whose other keys differ)."""
    by_key = {(r["run"], r["seed"]): r for r in before}
    missing = [(r["run"], r["seed"]) for r in after if (r["run"], r["seed"]) not in by_key]
    if missing or len(before) != len(after):
        raise SystemExit(f"rule_check: the two resolutions cover different runs ({missing[:3]}...)")
    replayable, other = [], []
    for new in after:
        old = by_key[(new["run"], new["seed"])]
        if old["settings"] == new["settings"]:
            continue
        if any(old["settings"].get(key) != new["settings"].get(key) for key in OTHER_KEYS):
            other.append({"run": new["run"], "seed": new["seed"], "before": old["settings"], "after": new["settings"]})
        else:
            replayable.append((old, new))
    return replayable, other


def fitted_acc(run: str, seed: int, data_dir: str, overrides: list[str]) -> tuple[float, float | None]:
    """(ACC, the regime's bar or None) of ``run`` at ``seed`` with ``overrides`` set; the compiled
    programs are released after each fit, failed or not (:func:`release_compiled_programs`)."""
    try:
        return _fitted_acc(run, seed, data_dir, overrides)
    finally:
        release_compiled_programs()


def _fitted_acc(run: str, seed: int, data_dir: str, overrides: list[str]) -> tuple[float, float | None]:
    if run.startswith("cli:"):
        dataset = cli_dataset(run.removeprefix("cli:"), data_dir)
        config = preset_config(dataset, load_dataset(dataset, seed=seed, data_dir=data_dir).n_classes, overrides)
        metrics = run_experiment(dataset, config, seed=seed, data_dir=data_dir, figure=False)
        return float(metrics["test"]["kmeans"]["acc"]), None
    name = run.removeprefix("all rows:")
    data, paper = load_named(name, data_dir, seed)
    if run.startswith("all rows:"):
        estimator, _ = fit_default(data.views, data.n_classes, seed, overrides)
        return kmeans_scores(estimator.transform(list(data.views)), data.labels, data.n_classes)["ACC"], None
    if paper:
        result = run_paper_dataset(data, seed, overrides)
        return result["ACC"], PAPER_DATASETS[name.lower()]
    entry = regime_baselines(data_dir).get(name)
    if entry is None:
        raise SystemExit(f"rule_check: no baselines for {name!r}")
    result = run_devsuite_dataset(data, entry, seed, overrides)
    return result["ACC"], result["baseline"]["ACC"]


def regime_baselines(data_dir: str) -> dict[str, Any]:
    """Every suite set's and variant's naive baselines, by name."""
    suite = Path(data_dir) / "devsuite" / "baselines.json"
    found = json.loads(suite.read_text()) if suite.is_file() else {}
    variants = Path(VARIANTS_BASELINES)
    return {**found, **(json.loads(variants.read_text()) if variants.is_file() else {})}


def regime_of(run: str, data_dir: str) -> str:
    if run.startswith(("all rows:", "cli:")):
        return run.partition(":")[0]
    if run.lower() in PAPER_DATASETS:
        return "paper split"
    suite = Path(data_dir) / "devsuite" / f"{run}.mat"
    return "suite" if suite.is_file() else "variants"


def summary_by_regime(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per regime: runs moved, mean ACC change, the largest loss, bars crossed either way."""
    out: dict[str, dict[str, Any]] = {}
    for regime in sorted({row["regime"] for row in rows}):
        mine = [row for row in rows if row["regime"] == regime]
        changes = [row["after_acc"] - row["before_acc"] for row in mine]
        bars = [row for row in mine if row["bar"] is not None]
        out[regime] = {
            "runs": len(mine),
            "mean_change": float(np.mean(changes)),
            "largest_loss": float(min(changes)),
            "fell_below_bar": sum(r["before_acc"] >= r["bar"] > r["after_acc"] for r in bars),
            "rose_to_bar": sum(r["before_acc"] < r["bar"] <= r["after_acc"] for r in bars),
        }
    return out


def refit_others(args: argparse.Namespace) -> None:
    """Fit the runs whose other settings move with this tree's defaults: {"run@seed": [ACC, bar]}."""
    before, after = (json.loads(Path(p).read_text())["runs"] for p in (args.before, args.after))
    fitted: dict[str, tuple[float, float | None]] = {}
    for run in moved_runs(before, after)[1]:
        key = f"{run['run']}@{run['seed']}"
        fitted[key] = fitted_acc(run["run"], run["seed"], args.data_dir, [])
        print(f"{key:40s} {fitted[key][0]:.3f}", flush=True)
        write_refits(args.out, fitted)  # what is fitted survives a stop
    write_refits(args.out, fitted)


def write_refits(out: str, fitted: dict[str, tuple[float, float | None]]) -> None:
    """Write ``refit``'s {"run@seed": [ACC, bar]} with the CPU to ``out``."""
    Path(out).write_text(json.dumps({"cpu": cpu_model(), "acc": fitted}, indent=1) + "\n")


def refitted_rows(other: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows for the runs ``refit`` fitted on each tree (none without both files)."""
    if not (args.refit_before and args.refit_after):
        return []
    before, after = (json.loads(Path(p).read_text())["acc"] for p in (args.refit_before, args.refit_after))
    rows = []
    for run in other:
        key = f"{run['run']}@{run['seed']}"
        moved = {k: [run["before"].get(k), run["after"].get(k)] for k in (*RULE_KEYS, *OTHER_KEYS)}
        rows.append(
            {
                "run": run["run"],
                "seed": run["seed"],
                "regime": regime_of(run["run"], args.data_dir),
                "moved": {k: pair for k, pair in moved.items() if pair[0] != pair[1]},
                "before_acc": before[key][0],
                "after_acc": after[key][0],
                "bar": before[key][1],
            }
        )
    return rows


def fit_moved(args: argparse.Namespace) -> None:
    before, after = (json.loads(Path(p).read_text())["runs"] for p in (args.before, args.after))
    replayable, other = moved_runs(before, after)
    print(f"{len(replayable)} runs move by the rule keys alone, {len(other)} by other settings", flush=True)
    rows = refitted_rows(other, args)
    other = other if not rows else []
    for old, new in replayable:
        acc_before, bar = fitted_acc(old["run"], old["seed"], args.data_dir, overrides_for(old["settings"]))
        acc_after, _ = fitted_acc(new["run"], new["seed"], args.data_dir, overrides_for(new["settings"]))
        moved = {key: [old["settings"].get(key), new["settings"].get(key)] for key in RULE_KEYS}
        moved = {key: pair for key, pair in moved.items() if pair[0] != pair[1]}
        rows.append(
            {
                "run": new["run"],
                "seed": new["seed"],
                "regime": regime_of(new["run"], args.data_dir),
                "moved": moved,
                "before_acc": acc_before,
                "after_acc": acc_after,
                "bar": bar,
            }
        )
        print(f"{new['run']:36s} seed {new['seed']} {moved}: {acc_before:.3f} -> {acc_after:.3f}", flush=True)
        write_report(args.out, rows, other, finished=False)  # what is fitted survives a stop
    for regime, entry in write_report(args.out, rows, other, finished=True).items():
        print(f"{regime:12s} {entry}")


def write_report(out: str, rows: list[dict[str, Any]], other: list[Any], *, finished: bool) -> dict[str, Any]:
    """Write the fitted rows, their summary by regime and the runs not replayed to ``out``
    (``finished`` False while runs remain); returns the summary."""
    summary = summary_by_regime(rows) if rows else {}
    payload = {"cpu": cpu_model(), "finished": finished, "runs": rows, "by_regime": summary, "not_replayed": other}
    Path(out).write_text(json.dumps(payload, indent=1) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    resolve = commands.add_parser("resolve", help="every run's resolved rule settings, no training")
    resolve.add_argument("--data-dir", required=True)
    resolve.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    resolve.add_argument("--out", required=True)
    fit = commands.add_parser("fit", help="fit the runs whose settings differ between two resolutions")
    fit.add_argument("--data-dir", required=True)
    fit.add_argument("--before", required=True)
    fit.add_argument("--after", required=True)
    fit.add_argument("--out", required=True)
    fit.add_argument("--refit-before", help="refit's file from the tree before the change")
    fit.add_argument("--refit-after", help="refit's file from the tree after the change")
    refit = commands.add_parser("refit", help="fit the runs whose other settings move, with this tree's defaults")
    for flag in ("--data-dir", "--before", "--after", "--out"):
        refit.add_argument(flag, required=True)
    args = parser.parse_args()
    if args.command == "refit":
        refit_others(args)
    elif args.command == "resolve":
        runs = resolve_all(args.data_dir, args.seeds)
        Path(args.out).write_text(json.dumps({"cpu": cpu_model(), "runs": runs}, indent=1) + "\n")
        print(f"{len(runs)} runs resolved: {args.out}")
    else:
        fit_moved(args)


if __name__ == "__main__":
    main()
