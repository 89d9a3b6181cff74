"""The stress variants over several fit seeds: each variant's ACC / bar by seed and its mean.

``experiments/devsuite.py --variants all --seed S --out DIR/variants_seedS`` writes one file per
fit seed (the variants are drawn with their baselines' seed, so only the fit seed changes); this
reads those files and writes one small summary: per variant the ratio at each seed and its mean,
per seed the mean over the variants, and the lowest variant mean. One box's float rounding moves
a tiny set's ratio by up to 0.14, so a mean over seeds says more than one seed's figure.

    PYTHONPATH=. python experiments/variants_seed_summary.py --out experiments/results/devsuite_variants_seeds.json \\
        experiments/results/devsuite_variants.json /tmp/variants_seed1.json ...
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
    means = {name: statistics.mean(by_seed.values()) for name, by_seed in ratios.items()}
    lowest = min(means, key=means.__getitem__)
    return {
        "cpu": next(iter(runs.values()))["cpu"],
        "seeds": list(runs),
        "variants": len(names),
        "mean_by_seed": {seed: statistics.mean(ratios[name][seed] for name in names) for seed in runs},
        "mean": statistics.mean(means.values()),
        "lowest_mean": {"variant": lowest, "ratio": means[lowest]},
        "at_or_above_by_seed": {seed: sum(ratios[name][seed] >= 1.0 for name in names) for seed in runs},
        "ratios": {name: {"by_seed": by_seed, "mean": means[name]} for name, by_seed in ratios.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="devsuite.py --variants all outputs, one per fit seed")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    summary = seed_summary(load_runs(args.files))
    Path(args.out).write_text(json.dumps(summary, indent=1))
    by_seed = ", ".join(f"seed {seed} {mean:.3f}" for seed, mean in summary["mean_by_seed"].items())
    low = summary["lowest_mean"]
    print(f"{summary['variants']} variants on {summary['cpu']}: mean ACC / bar {summary['mean']:.3f} ({by_seed})")
    print(f"lowest variant mean: {low['variant']} {low['ratio']:.3f}")


if __name__ == "__main__":
    main()
