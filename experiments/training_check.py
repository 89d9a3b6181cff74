"""What a number rule_check cannot replay is worth: devsuite runs with it moved, beside the defaults.

``STEP_BUDGET``, ``MIN_STEPS_PER_EPOCH`` and ``WIDTHS_BY_ROWS`` (``training/defaults.py``) decide
how a fit trains, ``MIN_FEATURES_FOR_UNIT_ROWS`` (``data/preprocess.py``) how a view is scaled;
``experiments/rule_check.py`` replays resolved graph settings only, so each alternative is a full
``experiments/devsuite.py`` run with ``--set`` overrides. Where the whole training set is one batch
an epoch is 10 steps, so ``train.epochs=20`` is a budget of 200 steps. This script reads the runs'
JSON files, the defaults' and each alternative's (suite, paper sets and variants, one file or
several per setting), and writes per dataset the test ACC under every setting, per setting and
regime the mean ACC, the mean ratio to the bar, how many sets reach their bar and the lowest ratio,
and each setting's change against the first one on the datasets both ran. With ``--contamination``,
each setting's ``experiments/robustness_default.py`` file adds what the view weights do under
contamination: the contaminated and clean rows' mean weight over the views, and the test ACC clean
and contaminated.

    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA --datasets SUITE... --variants all \\
        --set train.epochs=20 --out /tmp/steps200
    PYTHONPATH=. python experiments/training_check.py --setting defaults=/tmp/base.json,VARIANTS.json \\
        --setting "200 steps=/tmp/steps200.json" --contamination "200 steps=/tmp/blobs200.json" \\
        --out experiments/results/training_check.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def regime_of(result: Mapping[str, Any]) -> str:
    """'variants', 'paper split' (devsuite's test-split protocol) or 'suite' for one devsuite result."""
    if result.get("variant"):
        return "variants"
    return "paper split" if result.get("protocol") == "test split" else "suite"


def bar_of(result: Mapping[str, Any]) -> float | None:
    """The ACC a result is judged against: its best naive baseline, or the paper set's target."""
    if "baseline" in result:
        return float(result["baseline"]["ACC"])
    return result.get("target_ACC")


def merged_results(paths: Sequence[str]) -> tuple[dict[str, Any], list[str], str]:
    """(results by dataset, overrides, cpu) of one setting's devsuite files; the files must agree
    on the overrides."""
    results: dict[str, Any] = {}
    overrides: list[str] | None = None
    cpus = set()
    for path in paths:
        run = json.loads(Path(path).read_text())
        if overrides is not None and run.get("overrides", []) != overrides:
            raise SystemExit(
                f"training_check: {path} has overrides {run.get('overrides')}, the setting's others {overrides}"
            )
        overrides = list(run.get("overrides", []))
        cpus.add(run.get("cpu", "unknown"))
        results.update(run["results"])
    return results, overrides or [], " / ".join(sorted(cpus))


def summary(per_dataset: Mapping[str, Mapping[str, Any]], setting: str) -> dict[str, dict[str, float]]:
    """Per regime: sets, mean ACC, mean ratio to the bar, sets at or above it, lowest ratio."""
    out: dict[str, dict[str, float]] = {}
    regimes = sorted({entry["regime"] for entry in per_dataset.values()})
    for regime in regimes:
        entries = [e for e in per_dataset.values() if e["regime"] == regime and setting in e["ACC"]]
        if not entries:
            continue
        ratios = [e["ACC"][setting] / e["bar"] for e in entries if e["bar"]]
        out[regime] = {
            "sets": len(entries),
            "mean_ACC": statistics.mean(e["ACC"][setting] for e in entries),
            "mean_ratio": statistics.mean(ratios) if ratios else float("nan"),
            "at_bar": sum(r >= 1 for r in ratios),
            "lowest_ratio": min(ratios) if ratios else float("nan"),
        }
    return out


def paired_change(per_dataset: Mapping[str, Mapping[str, Any]], reference: str, setting: str) -> dict[str, Any]:
    """``setting`` against ``reference`` on the datasets both ran: how many, the mean ACC change,
    how many moved by more than 0.0005, and the largest loss and gain (dataset, change)."""
    changes = {
        name: entry["ACC"][setting] - entry["ACC"][reference]
        for name, entry in per_dataset.items()
        if setting in entry["ACC"] and reference in entry["ACC"]
    }
    if not changes:
        return {"sets": 0}
    lowest, highest = min(changes, key=changes.__getitem__), max(changes, key=changes.__getitem__)
    return {
        "sets": len(changes),
        "mean_change": statistics.mean(changes.values()),
        "moved": sum(abs(c) > 0.0005 for c in changes.values()),
        "largest_loss": [lowest, changes[lowest]],
        "largest_gain": [highest, changes[highest]],
    }


def compare(settings: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The comparison of the settings (name -> devsuite files); datasets missing from a setting
    are left out of its summary."""
    per_dataset: dict[str, dict[str, Any]] = {}
    meta: dict[str, Any] = {}
    for setting, paths in settings.items():
        results, overrides, cpu = merged_results(paths)
        meta[setting] = {"overrides": overrides, "cpu": cpu, "files": [Path(p).name for p in paths]}
        for name, result in results.items():
            entry = per_dataset.setdefault(name, {"regime": regime_of(result), "bar": bar_of(result), "ACC": {}})
            entry["ACC"][setting] = float(result["ACC"])
    reference = next(iter(settings))
    return {
        "settings": meta,
        "datasets": per_dataset,
        "summary": {setting: summary(per_dataset, setting) for setting in settings},
        "against_" + reference: {s: paired_change(per_dataset, reference, s) for s in list(settings)[1:]},
    }


def contamination_summary(path: str) -> dict[str, Any]:
    """What one robustness_default file says of the weights: the mean over the views of the
    contaminated and the clean rows' weight under its contamination, and the test ACC of
    ``predict`` clean and contaminated (means over its seeds)."""
    run = json.loads(Path(path).read_text())
    kinds = [kind for kind in run["kinds"] if kind != "clean"]
    if len(kinds) != 1 or "clean" not in run["summary"]:
        raise SystemExit(f"training_check: {path}: expected a clean and one contaminated kind, got {run['kinds']}")
    summary = run["summary"][kinds[0]]
    weights = summary["weights"]
    return {
        "dataset": run["dataset"],
        "contamination": kinds[0],
        "fraction": run["fraction"],
        "overrides": run.get("overrides", []),
        "cpu": run.get("cpu", "unknown"),
        "contaminated_weight": statistics.mean(view["contaminated"] for view in weights),
        "clean_weight": statistics.mean(view["clean"] for view in weights),
        "clean_ACC": run["summary"]["clean"]["predict"]["acc_mean"],
        "contaminated_ACC": summary["predict"]["acc_mean"],
    }


def printed(report: Mapping[str, Any]) -> str:
    """The per-regime summary as text lines."""
    lines = []
    for setting, regimes in report["summary"].items():
        for regime, s in regimes.items():
            lines.append(
                f"{setting:>28s}  {regime:<11s} {s['sets']:3d} sets  mean ACC {s['mean_ACC']:.4f}  "
                f"ratio {s['mean_ratio']:.3f}  at bar {s['at_bar']:2d}  lowest {s['lowest_ratio']:.3f}"
            )
    for key, pairs in report.items():
        if key.startswith("against_"):
            for setting, p in pairs.items():
                if p["sets"]:
                    lines.append(
                        f"{setting:>28s}  {key.replace('_', ' ')}: {p['sets']} sets, mean change "
                        f"{p['mean_change']:+.4f}, {p['moved']} moved, largest loss {p['largest_loss'][0]} "
                        f"{p['largest_loss'][1]:+.3f}, gain {p['largest_gain'][0]} {p['largest_gain'][1]:+.3f}"
                    )
    for setting, c in report.get("contamination", {}).items():
        lines.append(
            f"{setting:>28s}  {c['dataset']} {c['fraction']:.0%} {c['contamination']}: weight contaminated "
            f"{c['contaminated_weight']:.3f} clean {c['clean_weight']:.3f}  ACC clean {c['clean_ACC']:.4f} "
            f"contaminated {c['contaminated_ACC']:.4f}"
        )
    return "\n".join(lines)


def named(item: str) -> tuple[str, str]:
    """NAME=VALUE of a command-line item."""
    name, _, value = item.partition("=")
    if not name or not value:
        raise SystemExit(f"training_check: {item!r}: expected NAME=FILE")
    return name, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--setting",
        action="append",
        required=True,
        metavar="NAME=FILE[,FILE...]",
        help="a setting's devsuite JSON files",
    )
    parser.add_argument(
        "--contamination",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a setting's experiments/robustness_default.py file",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    settings = {name: files.split(",") for name, files in (named(item) for item in args.setting)}
    report = compare(settings)
    report["contamination"] = {name: contamination_summary(path) for name, path in map(named, args.contamination)}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(printed(report))


if __name__ == "__main__":
    main()
