"""Number and Markdown formatting shared by the renderers of the generated results blocks: fractions
with three decimals, mean ± population std over seeds, signed differences, number words, seed
ranges and Markdown tables; and ``Payloads``, what every renderer takes (a block's parsed JSON
files keyed by file stem). Standard library only."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

Payloads = Mapping[str, Any]  # file stem (its path under results/, without .json) -> parsed JSON


def fmt3(value: float) -> str:
    """A fraction with 3 decimals: 0.9658 -> '0.966'."""
    return f"{value:.3f}"


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean of a non-empty sequence."""
    return math.fsum(values) / len(values)


def population_std(values: Sequence[float]) -> float:
    """Standard deviation with ddof=0, as ``specrage_jax.evaluate.summarize_seeds`` reports it."""
    centre = mean(values)
    return math.sqrt(math.fsum((v - centre) ** 2 for v in values) / len(values))


def mean_pm_std(values: Sequence[float]) -> str:
    """'0.926 ± 0.043' over seeds (population std)."""
    return f"{fmt3(mean(values))} ± {fmt3(population_std(values))}"


def signed3(value: float) -> str:
    """A difference with its sign and 3 decimals, a typographic minus: '+0.007', '−0.010'."""
    return f"{value:+.3f}".replace("-", "−")


def number_word(n: int) -> str:
    """'seven' for 7 (0-12), digits beyond."""
    words = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
    return words[n] if 0 <= n < len(words) else str(n)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table (header, rule, rows)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def seed_range(seeds: Sequence[int]) -> str:
    """'0-4' for consecutive seeds, '0, 2, 5' otherwise."""
    ordered = sorted(seeds)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ", ".join(str(s) for s in ordered)
