"""Renderers of the generated results blocks on the development suite: ``devsuite`` (the default
estimator on every suite dataset, beside its bar and the best linear CCA, as experiments/devsuite.py
writes devsuite.md) and ``devsuite_variants`` (the same on the suite's stress variants, with the
summary of their ratios to their bars). Each ``render_<name>`` takes the block's parsed JSON files
keyed by file stem and returns Markdown. Standard library only."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_format import Payloads, fmt3, markdown_table, number_word, seed_range


def devsuite_bar(result: Mapping[str, Any]) -> tuple[str, str]:
    """The 'bar (ACC)' and 'ACC / bar' cells of a dataset."""
    if "baseline" in result:
        return f"{result['baseline']['ACC']:.3f} ({result['baseline']['name']})", f"{result['ratio']:.2f}"
    target = result.get("target_ACC")
    return (f"{target:.2f} (target)", f"{result['ACC'] / target:.2f}") if target else ("-", "-")


def cca_cell(cca: Mapping[str, Any], name: str) -> str:
    """The best linear CCA setting's ACC for ``name`` (experiments/cca_baselines.py), or "-"."""
    best = cca.get(name, {}).get("cca_best")
    return "-" if best is None else f"{fmt3(best['ACC'])} ({best['name']})"


def devsuite_row(name: str, result: Mapping[str, Any], cca: Mapping[str, Any]) -> list[str]:
    """One dataset's row of the development-suite table."""
    bar, ratio = devsuite_bar(result)
    resolved = result["resolved"]
    neighbours = resolved.get("graph.n_neighbors", {}).get("value", "-")
    preprocessing = ", ".join(resolved.get("data.preprocess", {}).get("value", ["-"]))
    return [
        name,
        result["protocol"],
        str(result["n"]),
        fmt3(result["ACC"]),
        fmt3(result["NMI"]),
        f"{result['fit_seconds']:.0f}",
        bar,
        ratio,
        cca_cell(cca, name),
        str(neighbours),
        preprocessing,
    ]


def devsuite_summary(results: Mapping[str, Mapping[str, Any]]) -> str:
    """How many suite datasets meet their bar, and how far the others reach."""
    suite = {name: r for name, r in results.items() if "baseline" in r}
    below = {name: r["ratio"] for name, r in suite.items() if r["ratio"] < 1.0}
    met = len(suite) - len(below)
    count = f"{number_word(met).capitalize()} of {number_word(len(suite))}" if below else f"All {number_word(met)}"
    text = f"{count} suite datasets meet their bar"
    if below:
        text += "; " + "; ".join(f"{name} reaches {ratio:.2f} of it" for name, ratio in below.items())
    return text + "."


def render_devsuite(payloads: Payloads) -> str:
    """The development-suite table (the one experiments/devsuite.py writes to devsuite.md) and its summary."""
    payload = payloads["devsuite"]
    results = payload["results"]
    intro = estimator_intro(payload, seed_label="seed")
    bar_note = (
        "The bar is the best of the suite's four naive baselines (concatenated k-means and the exact "
        "spectral embedding of the mean 10-NN graph, each under two preprocessings; "
        "`devsuite/baselines.json`) or the paper-dataset target. "
    )
    cca_note = (
        "CCA best: the best by ACC of 16 linear CCA settings (multiset and generalized CCA, four shrinkages, raw or "
        "unit rows; `devsuite_cca_baselines.json`), chosen with the labels. "
    )
    return devsuite_block(
        intro, results, bar_note + cca_note + devsuite_summary(results), payloads["devsuite_cca_baselines"]
    )


def estimator_intro(payload: Mapping[str, Any], *, seed_label: str, protocol: str = "") -> str:
    """The first line of a devsuite-style block: the fit seed, the k-means seeds, the protocol and
    the CPU the fit seconds come from."""
    seeds = kmeans_seed_range(payload["results"])
    return (
        f"Default estimator, {seed_label} {payload['seed']}, k-means seeds {seeds} (n_init 10){protocol}; "
        f"fit seconds on {payload['cpu']}."
    )


def kmeans_seed_range(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The k-means seeds a devsuite payload's results were scored over, as a range."""
    return seed_range([s["seed"] for s in next(iter(results.values())).get("per_seed", [])])


def devsuite_block(intro: str, results: Mapping[str, Mapping[str, Any]], summary: str, cca: Mapping[str, Any]) -> str:
    """A devsuite-style block: intro line, the per-dataset table (with the best linear CCA beside
    the bar), then the summary line."""
    header = [
        "dataset",
        "protocol",
        "n",
        "ACC",
        "NMI",
        "fit s",
        "bar (ACC)",
        "ACC / bar",
        "CCA best",
        "l",
        "preprocessing",
    ]
    rows = [devsuite_row(name, result, cca) for name, result in results.items()]
    return "\n".join([intro, "", *markdown_table(header, rows), "", summary]) + "\n"


def variants_summary_line(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The stress variants' ratios to their bars: mean, the lowest, how many meet the bar and how many
    fall below 0.9 of it."""
    ratios = {name: r["ratio"] for name, r in results.items()}
    lowest = min(ratios, key=ratios.__getitem__)
    met = sum(ratio >= 1.0 for ratio in ratios.values())
    under = [name for name, ratio in ratios.items() if ratio < 0.9]
    text = (
        f"ACC / bar: mean {sum(ratios.values()) / len(ratios):.2f}, lowest {ratios[lowest]:.2f} ({lowest}); "
        f"{met} of {len(ratios)} at or above their bar; "
    )
    return text + (f"below 0.9: {', '.join(under)}." if under else "none below 0.9.")


def render_devsuite_variants(payloads: Payloads) -> str:
    """The stress variants' table (as experiments/devsuite.py writes devsuite_variants.md) and its summary."""
    payload = payloads["devsuite_variants"]
    results = payload["results"]
    intro = estimator_intro(payload, seed_label="fit seed", protocol=", all rows") + (
        " The bar is the best naive baseline of each variant "
        "(`experiments/results/devsuite_variants_baselines.json`); CCA best the best of 16 linear CCA settings, "
        "chosen with the labels (`experiments/results/devsuite_variants_cca_baselines.json`)."
    )
    return devsuite_block(intro, results, variants_summary_line(results), payloads["devsuite_variants_cca_baselines"])
