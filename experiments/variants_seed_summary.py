"""The stress variants over several fit seeds: each variant's ACC / bar by seed and its mean.

``experiments/devsuite.py --variants all --seed S --out DIR/variants_seedS`` writes one file per
fit seed (the variants are drawn with their baselines' seed, so only the fit seed changes); this
reads those files and writes one small summary: per variant the ratio at each seed and its mean,
per seed the mean over the variants, and the lowest variant mean. One box's float rounding moves
a tiny set's ratio by up to 0.14, so a mean over seeds says more than one seed's figure.

    PYTHONPATH=. python experiments/variants_seed_summary.py --out experiments/results/devsuite_variants_seeds.json \\
        experiments/results/devsuite_variants.json /tmp/variants_seed1.json ...

A rule change that moves a few runs (``experiments/rule_check.py``) updates the summary without
rerunning every variant: ``--summary FILE --rule-check CHECK.json`` replaces the moved runs' ratios
and lists them under ``replaced``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def load_runs(paths: list[str]) -> dict[int, dict[str, Any]]:
    """{fit seed: that run's file}, every file from the same CPU and with no overrides."""
    runs = {}
    for path in paths:
        payload = json.loads(Path(path).read_text())
        if payload.get("overrides") or payload.get("missing"):
            raise SystemExit(f"{path}: a run with overrides or missing views is not the defaults")
        runs[int(payload["seed"])] = payload
    cpus = {payload["cpu"] for payload in runs.values()}
    if len(cpus) != 1:
        raise SystemExit(f"the files come from different CPUs ({sorted(cpus)}); compare one box's runs only")
    return dict(sorted(runs.items()))


def seed_summary(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Ratios by variant and seed, their means, and each seed's mean over the variants."""
    names = sorted(set.intersection(*(set(payload["results"]) for payload in runs.values())))
    ratios = {name: {seed: runs[seed]["results"][name]["ratio"] for seed in runs} for name in names}
    return summary_of(ratios, next(iter(runs.values()))["cpu"])


def summary_of(ratios: dict[str, dict[int, float]], cpu: str) -> dict[str, Any]:
    """The summary of ACC / bar by variant and fit seed (``ratios``): per seed the mean over the
    variants and the count at or above the bar, per variant the mean, and the lowest mean."""
    names = sorted(ratios)
    seeds = sorted(next(iter(ratios.values())))
    means = {name: statistics.mean(ratios[name].values()) for name in names}
    lowest = min(means, key=means.__getitem__)
    return {
        "cpu": cpu,
        "seeds": seeds,
        "variants": len(names),
        "mean_by_seed": {seed: statistics.mean(ratios[name][seed] for name in names) for seed in seeds},
        "mean": statistics.mean(means.values()),
        "lowest_mean": {"variant": lowest, "ratio": means[lowest]},
        "at_or_above_by_seed": {seed: sum(ratios[name][seed] >= 1.0 for name in names) for seed in seeds},
        "ratios": {name: {"by_seed": ratios[name], "mean": means[name]} for name in names},
    }


def with_rule_check(summary: dict[str, Any], check: dict[str, Any]) -> dict[str, Any]:
    """``summary`` (this script's file) with the ratios of the variant runs a rule check
    (``experiments/rule_check.py fit``) moved replaced by their ACC after the change over their bar:
    a fit is a function of its settings, so those are the runs the change alters. The replaced
    runs are listed under ``replaced``. Both files must come from one CPU."""
    if check["cpu"] != summary["cpu"]:
        raise SystemExit(
            f"the rule check ran on {check['cpu']}, the summary on {summary['cpu']}: compare one box's runs"
        )
    ratios = {name: {int(seed): r for seed, r in entry["by_seed"].items()} for name, entry in summary["ratios"].items()}
    replaced = []
    for run in check["runs"]:
        if run["regime"] == "variants" and run["run"] in ratios and run["seed"] in ratios[run["run"]]:
            ratios[run["run"]][run["seed"]] = run["after_acc"] / run["bar"]
            replaced.append({"variant": run["run"], "seed": run["seed"], "moved": run["moved"]})
    return {**summary_of(ratios, summary["cpu"]), "replaced": [*summary.get("replaced", []), *replaced]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", help="devsuite.py --variants all outputs, one per fit seed")
    parser.add_argument("--out", required=True)
    parser.add_argument("--summary", help="start from this summary instead of the per-seed files")
    parser.add_argument("--rule-check", help="replace the runs this rule_check.py fit file moved")
    args = parser.parse_args()
    if bool(args.files) == bool(args.summary):
        raise SystemExit("give either the per-seed files or --summary")
    summary = json.loads(Path(args.summary).read_text()) if args.summary else seed_summary(load_runs(args.files))
    if args.rule_check:
        summary = with_rule_check(summary, json.loads(Path(args.rule_check).read_text()))
    Path(args.out).write_text(json.dumps(summary, indent=1))
    by_seed = ", ".join(f"seed {seed} {mean:.3f}" for seed, mean in summary["mean_by_seed"].items())
    low = summary["lowest_mean"]
    print(f"{summary['variants']} variants on {summary['cpu']}: mean ACC / bar {summary['mean']:.3f} ({by_seed})")
    print(f"lowest variant mean: {low['variant']} {low['ratio']:.3f}")


if __name__ == "__main__":
    main()
