"""The headline results as the texts quote them, checked against experiments/results/*.json.

The generated blocks of experiments/readme_tables.py are rendered from the results files; a figure
quoted in running text is not. ``FIGURES`` names each headline figure: its results file (a stem under
experiments/results/), the JSON path of the number and, where the path fans out over seeds or
datasets, how the values reduce to one. ``QUOTES`` holds regular expressions of how the texts quote
those figures, each figure a named group: ``NAME`` quotes it as a fraction (or a count, seconds, GiB:
the unit of the figure), ``NAME__pct`` in percent, and any other ``NAME__tag`` quotes it a second time
in one pattern. :func:`check` runs every pattern over README.md, docs/*.md, BUILD_NOTES.md and the
docstrings and comments of specrage_jax/ and experiments/*.py, with the generated blocks left out and
each paragraph, list item or table row joined onto one line; a quote is right when it is within half
a unit of its last digit of the figure. A figure measured on an earlier state of the code or the
suite is quoted as such ("the 35 earlier variants", "the variants of the time") and not matched.

    python experiments/quoted_results.py           # exit 1 and a line per wrong quote
    python experiments/quoted_results.py --list    # every quote found, right or wrong

Pure standard library.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import io
import json
import math
import re
import sys
import tokenize
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXPERIMENTS = Path(__file__).resolve().parent
sys.path.insert(0, str(EXPERIMENTS))
from readme_blocks import find_blocks  # noqa: E402  (the block markers' one definition)

RESULTS = EXPERIMENTS / "results"
ROOT = EXPERIMENTS.parent
PAGES = ("README.md", "BUILD_NOTES.md", "docs/*.md")  # Markdown, the generated blocks left out
SOURCES = ("specrage_jax/**/*.py", "experiments/*.py")  # their docstrings and comments only


# ---------------------------------------------------------------------------------------------
# the figures


@dataclass(frozen=True)
class Figure:
    """One number of one results file. ``path`` is a '/'-separated JSON path: ``*`` takes every item of
    a list or value of a mapping (those lacking the rest of the path skipped), ``[key=value]`` the items
    of a list whose ``key`` reads ``value``. ``minus``, a second path, makes the values the absolute
    differences of the two, item by item. ``reduce`` is ``value`` (exactly one), ``mean``, ``std``
    (population, as the tables report it), ``min``, ``max``, ``count`` or ``at_least_1`` (how many
    values are ≥ 1); the result is multiplied by ``scale``."""

    about: str
    source: str
    path: str
    reduce: str = "value"
    minus: str | None = None
    scale: float = 1.0


def seed_figures(stem: str, name: str, label: str, *kinds: str) -> dict[str, Figure]:
    """Figures of a reproduce_tables.py file (one entry per seed), ``{name}_{kind}`` for each kind:
    test k-means ACC mean, std and worst seed, NMI, SVM ACC, validation ACC, and the largest gap
    between a seed's k-means and SVM ACC."""
    acc, svm = "seeds/*/test/kmeans/acc", "seeds/*/test/svm/acc"
    every = {
        "mean": Figure(f"{label}: test k-means ACC, mean over seeds", stem, acc, "mean"),
        "std": Figure(f"{label}: test k-means ACC, std over seeds", stem, acc, "std"),
        "worst": Figure(f"{label}: test k-means ACC, worst seed", stem, acc, "min"),
        "nmi": Figure(f"{label}: test k-means NMI, mean", stem, "seeds/*/test/kmeans/nmi", "mean"),
        "svm": Figure(f"{label}: test SVM ACC, mean", stem, svm, "mean"),
        "val": Figure(f"{label}: validation k-means ACC, mean", stem, "seeds/*/val_kmeans/acc", "mean"),
        "gap": Figure(f"{label}: largest |SVM - k-means| of a seed", stem, svm, "max", minus=acc),
    }
    return {f"{name}_{kind}": every[kind] for kind in kinds}


def curve_figures(n: int, name: str) -> dict[str, Figure]:
    """The InfiniteMNIST curve's run at ``n`` samples: test k-means ACC and wall seconds."""
    run = f"runs/[n={n}]"
    label = f"InfiniteMNIST at {n:,}"
    return {
        f"{name}_acc": Figure(f"{label}: test k-means ACC", "infinitemnist_curve", f"{run}/kmeans_acc"),
        f"{name}_wall": Figure(f"{label}: wall seconds", "infinitemnist_curve", f"{run}/wall_seconds"),
    }


OTHER_CPUS = {  # a CPU's row label in the results page's table: its folder under results/cross_cpu/
    "Intel Xeon, family 6 model 167": "xeon_f6_m167",
    "AMD EPYC, family 25 model 17": "epyc_f25_m17",
}
CPU_ROWS = {"AMD EPYC, family 23 model 49": ""} | OTHER_CPUS  # the committed runs: no folder of their own


def cpu_prefixes(folder: str) -> tuple[str, str]:
    """The figure-name prefixes (suite and variants, seed spread) of one CPU's runs."""
    return (f"{folder}_", f"{folder}_spread_") if folder else ("", "spread_")


SPREAD_ROWS = {  # (dataset, path) in seed_spread.json: its row in the notes' table
    ("handwritten", "estimator"): "Handwritten | estimator",
    ("handwritten", "cli"): "Handwritten | CLI",
    ("bdgp", "estimator"): "BDGP | estimator",
    ("bdgp", "cli"): "BDGP | CLI",
}
SEED_KINDS = ("mean", "std", "worst", "nmi", "svm", "val", "gap")
CURVE_SIZES = {"20k": (20_000, "imn_20k"), "100k": (100_000, "imn_100k"), "1M": (1_000_000, "imn_1m")}


def devsuite_figures(prefix: str, folder: str, suite: str, variants: str) -> dict[str, Figure]:
    """The development suite's and the variants' summary figures of one devsuite.py run at seed 0
    (``FOLDERdevsuite.json``, ``FOLDERdevsuite_variants.json``), keyed ``PREFIXsuite_met`` and so on."""
    ratio = "results/*/ratio"
    suite_file, variants_file = f"{folder}devsuite", f"{folder}devsuite_variants"
    return {
        f"{prefix}suite_met": Figure(f"{suite}: datasets at or above their bar", suite_file, ratio, "at_least_1"),
        f"{prefix}suite_sets": Figure(f"{suite}: datasets with a naive bar", suite_file, ratio, "count"),
        f"{prefix}variants_count": Figure(f"{variants}: how many", variants_file, ratio, "count"),
        f"{prefix}variants_mean": Figure(f"{variants}: mean ACC / bar", variants_file, ratio, "mean"),
        f"{prefix}variants_met": Figure(f"{variants}: at or above their bar", variants_file, ratio, "at_least_1"),
        f"{prefix}variants_lowest": Figure(f"{variants}: lowest ACC / bar", variants_file, ratio, "min"),
    }


def spread_figures(prefix: str, folder: str, label: str, *keys: tuple[str, str]) -> dict[str, Figure]:
    """Seed-spread summaries (``FOLDERseed_spread.json``) per SPREAD_ROWS entry, keyed
    ``PREFIX{data}_{path}{suffix}`` for each (suffix, summary key) of ``keys``."""
    return {
        f"{prefix}{data}_{path}{suffix}": Figure(
            f"{label}, seeds 0-4, {data} {path}: {key.replace('_', ' ')}",
            f"{folder}seed_spread",
            f"results/{data}/{path}/summary/{key}",
        )
        for data, path in SPREAD_ROWS
        for suffix, key in keys
    }


FIGURES: dict[str, Figure] = {
    **seed_figures("handwritten", "handwritten", "Handwritten, paper table", *SEED_KINDS),
    **{
        f"handwritten_centres{suffix}": Figure(
            f"Handwritten, paper table: test ACC of the training set's k-means centres, {about}",
            "handwritten",
            "seeds/*/clustering_variants/train_unit_n10/test",
            reduce,
        )
        for suffix, about, reduce in (("", "mean", "mean"), ("_std", "std", "std"), ("_worst", "worst seed", "min"))
    },
    **seed_figures("handwritten_tuned_preset", "tuned", "Handwritten, the tuned preset", "mean", "std", "worst", "val"),
    **seed_figures("bdgp", "bdgp", "BDGP, paper table", "mean", "std", "worst", "nmi", "svm", "gap"),
    **seed_figures("noisymnist", "noisymnist", "NoisyMNIST, paper table", "mean", "std", "worst", "nmi", "svm", "val"),
    **devsuite_figures("", "", "development suite", "stress variants"),
    "nm_no_preset": Figure(
        "NoisyMNIST without its preset, the CLI: test k-means ACC",
        "noisymnist_no_preset",
        "results/noisymnist/cli/summary/mean",
    ),
    "nm_no_preset_svm": Figure(
        "NoisyMNIST without its preset, the CLI: test SVM ACC",
        "noisymnist_no_preset",
        "results/noisymnist/cli/runs/*/svm_acc",
        "mean",
    ),
    "variants_seeds_mean": Figure(
        "stress variants over fit seeds 0-4: mean ACC / bar", "devsuite_variants_seeds", "mean"
    ),
    "variants_seeds_lowest": Figure(
        "stress variants over fit seeds 0-4: lowest variant mean", "devsuite_variants_seeds", "lowest_mean/ratio"
    ),
    "variants_seeds_worst_run": Figure(
        "stress variants over fit seeds 0-4: lowest run", "devsuite_variants_seeds", "ratios/*/by_seed/*", "min"
    ),
    **{k: v for n, name in CURVE_SIZES.values() for k, v in curve_figures(n, name).items()},
    "imn_1m_svm": Figure("InfiniteMNIST at 1,000,000: test SVM ACC", "infinitemnist_curve", "runs/[n=1000000]/svm_acc"),
    "imn_1m_nmi": Figure(
        "InfiniteMNIST at 1,000,000: test k-means NMI", "infinitemnist_curve", "runs/[n=1000000]/kmeans_nmi"
    ),
    "imn_1m_peak": Figure(
        "InfiniteMNIST at 1,000,000: peak host GiB",
        "infinitemnist_curve",
        "runs/[n=1000000]/peak_host_bytes",
        scale=2.0**-30,
    ),
    **spread_figures("spread_", "", "no preset", ("", "mean"), ("_worst", "worst"), ("_gap", "largest_gap")),
    # the same runs on more CPU models (experiments/results/cross_cpu/FOLDER/)
    **{
        name: figure
        for folder in OTHER_CPUS.values()
        for name, figure in (
            devsuite_figures(cpu_prefixes(folder)[0], f"cross_cpu/{folder}/", f"{folder}: suite", f"{folder}: variants")
            | spread_figures(cpu_prefixes(folder)[1], f"cross_cpu/{folder}/", f"{folder}, no preset", ("", "mean"))
        ).items()
    },
}


# ---------------------------------------------------------------------------------------------
# the quotes

NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"


def pattern(text: str) -> re.Pattern[str]:
    """A quote pattern: ``#name`` is a number quoting figure ``name`` (``#-``: a number not checked),
    ``…`` up to 150 characters of the same paragraph."""
    text = text.replace("…", r"[^\n]{0,150}?").replace("#-", NUMBER)
    return re.compile(re.sub(r"#(\w+)", lambda m: rf"(?P<{m.group(1)}>{NUMBER})", text), re.MULTILINE)


FULL = r"(?: \(paper [^)\n]*\) — \**| \*\*)"  # "Handwritten (paper 0.919 ± 0.035) — 0.945" or "Handwritten **0.945"
COMMITTED = r"\.json`[^*\n]{0,140}?\): \*\*"  # "(`experiments/results/bdgp.json`; Zen 3 box ...): **0.981"
LATER_SET = r"(?<!earlier )variants(?! of the time)"  # not "the 35 earlier variants", "the variants of the time"

QUOTES: tuple[re.Pattern[str], ...] = (
    # Handwritten and its tuned preset (paper table, 10 seeds)
    pattern(rf"Handwritten(?:, 10 seeds: \**|{FULL})#handwritten_mean ± #handwritten_std"),
    pattern(
        rf"handwritten{COMMITTED}#handwritten_mean ± #handwritten_std\*\*"
        r"(?: \([^)\n]*\), SVM #handwritten_svm[^;\n]*; NMI #handwritten_nmi)?"
    ),
    pattern(r"#handwritten_mean in the paper table"),
    pattern(r"Handwritten's worst seed\**: #handwritten_worst"),
    pattern(r"#handwritten_centres_worst with the training-set centres"),
    pattern(
        r'"training centres" row\): #handwritten_centres ± #handwritten_centres_std, worst #handwritten_centres_worst'
    ),
    pattern(r"(?:VAL|validation split,) #handwritten_val against #tuned_val over 10 seeds"),
    pattern(r"Handwritten\*\*[^\n]{0,400}?TEST #handwritten_mean ± #handwritten_std \(worst seed #handwritten_worst"),
    pattern(r"within #handwritten_gap of its SVM\) against #tuned_mean ± #tuned_std \(worst #tuned_worst\)"),
    pattern(r"handwritten_tuned_preset\.json`…TEST #tuned_mean ± #tuned_std, worst #tuned_worst"),
    # BDGP
    pattern(rf"BDGP{FULL}#bdgp_mean ± #bdgp_std"),
    pattern(
        rf"bdgp{COMMITTED}#bdgp_mean ± #bdgp_std\*\*"
        r"(?: \([^)\n]*\), NMI #bdgp_nmi, SVM #bdgp_svm; k-means within #bdgp_gap of the SVM)?"
    ),
    pattern(r"BDGP's preset #- → #bdgp_mean over 10 seeds"),
    pattern(r"Copies take one neighbour slot\**: #- ± #- → #bdgp_mean ± #bdgp_std"),
    pattern(r"BDGP\*\*…within #bdgp_gap of its SVM \(worst seed #bdgp_worst\)"),
    # NoisyMNIST
    pattern(rf"NoisyMNIST{FULL}#noisymnist_mean ± #noisymnist_std"),
    pattern(
        rf"noisymnist{COMMITTED}#noisymnist_mean ± #noisymnist_std\*\*"
        r"(?: \(worst #noisymnist_worst\), NMI #noisymnist_nmi, ARI #-, SVM #noisymnist_svm)?"
    ),
    pattern(
        r"NoisyMNIST\*\* matches the paper's k-means ACC \(#noisymnist_mean__pct; worst seed #noisymnist_worst__pct\)"
    ),
    pattern(r"Batches of 4096\**: VAL #noisymnist_val against"),
    pattern(
        r"NoisyMNIST without its preset[^\n]{0,300}?test k-means #nm_no_preset, SVM #nm_no_preset_svm, "
        r"against #noisymnist_mean with its preset"
    ),
    pattern(r"NoisyMNIST…on validation on each of 10 seeds \(#- against #noisymnist_val mean\)"),
    # the development suite and its stress variants, no preset
    pattern(r"(?:development suite \(?|the suite is )#suite_met of #suite_sets"),
    pattern(r"the #variants_count stress variants(?! of the time)"),
    pattern(rf"{LATER_SET}[^\n]{{0,80}}?#variants_mean×[^\n]{{0,50}}?#variants_met of #variants_count__n at or above"),
    pattern(rf"{LATER_SET}[^\n]{{0,250}}?(?:one below 0\.85× \(|the lowest )[^\n]{{0,60}}?#variants_lowest×"),
    pattern(
        r"fit seeds 0–4[^:\n]{0,30}: mean #variants_seeds_mean×"
        r"[^\n]{0,80}?lowest variant mean \S+ #variants_seeds_lowest×"
    ),
    pattern(
        r"lowest variant mean \S+ #variants_seeds_lowest×(?:,| and) "
        r"(?:its )?lowest run[^\n]{0,30}? #variants_seeds_worst_run×"
    ),
    pattern(r"#variants_seeds_mean× over seeds 0–4"),
    pattern(r"Over fit seeds 0–4 on the same box the mean is #variants_seeds_mean×"),
    # InfiniteMNIST, the whole pipeline at 20k, 100k and 1M samples
    *(
        pattern(rf"\b{label} (?:in )?#{name}_wall s(?: \([^)\n]*\))?(?:,| /) (?:test (?:k-means ACC )?)?#{name}_acc")
        for label, (_, name) in CURVE_SIZES.items()
    ),
    pattern(r"\b1M on the [^:\n]*: #imn_1m_wall s wall"),
    pattern(r"\b1M\b[^\n]{0,250}?test k-means ACC #imn_1m_acc \(NMI #imn_1m_nmi, SVM #imn_1m_svm on"),
    pattern(r"\b1M\b[^\n]{0,300}?peak host #imn_1m_peak GiB"),
    # seed by seed without a preset
    pattern(
        r"seeds 0–4 without a preset: Handwritten estimator #spread_handwritten_estimator / CLI "
        r"#spread_handwritten_cli, BDGP #spread_bdgp_estimator / #spread_bdgp_cli"
    ),
    *(
        pattern(
            rf"^\| {re.escape(row)} \| [^|\n]* \| \*\*#spread_{d}_{p}\*\* "
            rf"\| #spread_{d}_{p}_worst \| #spread_{d}_{p}_gap \|"
        )
        for (d, p), row in SPREAD_ROWS.items()
    ),
    *(
        pattern(
            rf"^\| {re.escape(label)}[^|\n]* \| #{a}suite_met of #{a}suite_sets \| #{a}variants_mean× "
            rf"\(#{a}variants_met of #{a}variants_count\) \| \S+ #{a}variants_lowest× \| "
            rf"#{b}handwritten_estimator / #{b}handwritten_cli \| #{b}bdgp_estimator / #{b}bdgp_cli \|"
        )
        for label, folder in CPU_ROWS.items()
        for a, b in [cpu_prefixes(folder)]
    ),
)


# ---------------------------------------------------------------------------------------------
# reading the figures


def walk(node: Any, steps: Sequence[str]) -> Iterator[Any]:
    """The values at ``steps`` below ``node`` (see :class:`Figure`)."""
    if not steps:
        yield node
        return
    step, rest = steps[0], steps[1:]
    if step == "*":
        items = node.values() if isinstance(node, Mapping) else node
        for item in items:
            yield from walk(item, rest)
    elif step.startswith("[") and step.endswith("]"):
        key, _, wanted = step[1:-1].partition("=")
        for item in node:
            if str(item.get(key)) == wanted:
                yield from walk(item, rest)
    elif isinstance(node, Mapping) and step in node:
        yield from walk(node[step], rest)
    elif isinstance(node, list) and step.isdigit() and int(step) < len(node):
        yield from walk(node[int(step)], rest)


def figure_value(figure: Figure, payload: Any) -> float:
    """The figure's number from its parsed results file; a ValueError when its path finds nothing."""
    values = [float(v) for v in walk(payload, figure.path.split("/")) if v is not None]
    if figure.minus is not None:
        other = [float(v) for v in walk(payload, figure.minus.split("/")) if v is not None]
        values = [abs(a - b) for a, b in zip(values, other, strict=True)]
    if not values:
        raise ValueError(f"{figure.source}.json: nothing at {figure.path}")
    if figure.reduce == "value" and len(values) != 1:
        raise ValueError(f"{figure.source}.json: {len(values)} values at {figure.path}, expected one")
    centre = math.fsum(values) / len(values)
    reduced = {
        "value": values[0],
        "mean": centre,
        "std": math.sqrt(math.fsum((v - centre) ** 2 for v in values) / len(values)),
        "min": min(values),
        "max": max(values),
        "count": float(len(values)),
        "at_least_1": float(sum(v >= 1.0 for v in values)),
    }[figure.reduce]
    return reduced * figure.scale


def figure_values(results: Path = RESULTS, figures: Mapping[str, Figure] = FIGURES) -> dict[str, float]:
    """Every figure's number, each results file read once."""
    payloads: dict[str, Any] = {}
    for figure in figures.values():
        if figure.source not in payloads:
            payloads[figure.source] = json.loads((results / f"{figure.source}.json").read_text(encoding="utf-8"))
    return {name: figure_value(figure, payloads[figure.source]) for name, figure in figures.items()}


# ---------------------------------------------------------------------------------------------
# the texts

BREAK_RE = re.compile(r"\s*$|\s*(?:[-*+]|\d+\.)\s|\s*[|#>]|\s*```|\s*<!--")  # a line that starts a new unit


def without_blocks(markdown: str) -> str:
    """The page with each generated block's lines emptied (its line count kept); the blocks are
    found as experiments/readme_tables.py writes them."""
    for span in reversed(find_blocks(markdown)):
        markdown = markdown[: span.start] + "\n" * markdown.count("\n", span.start, span.end) + markdown[span.end :]
    return markdown


def python_prose(source: str) -> str:
    """The docstrings (string statements) and comments of a module, on their own lines; all else blank."""
    statements = {
        (node.lineno, node.col_offset)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    lines: list[list[str]] = [[] for _ in range(source.count("\n") + 2)]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.start in statements):
            for offset, piece in enumerate(token.string.split("\n")):
                lines[token.start[0] - 1 + offset].append(piece)
    return "\n".join(" ".join(parts) for parts in lines)


def joined(text: str) -> tuple[str, list[int]]:
    """The text with each paragraph, list item or table row on one line (continuation lines joined by
    one space), and the offset in it where each original line starts."""
    out: list[str] = []
    starts: list[int] = []
    size, previous_blank = 0, True
    for line in text.split("\n"):
        joins = not previous_blank and not BREAK_RE.match(line)
        piece = (" " + line.strip()) if joins else (("\n" if out else "") + line)
        starts.append(size + (1 if joins or out else 0))
        out.append(piece)
        size += len(piece)
        previous_blank = not line.strip()
    return "".join(out), starts


def texts(root: Path = ROOT) -> dict[str, str]:
    """The checked texts under ``root`` by path: the pages without their generated blocks, the
    modules' docstrings and comments."""
    found: dict[str, str] = {}
    for glob in PAGES:
        for path in sorted(root.glob(glob)):
            found[path.relative_to(root).as_posix()] = without_blocks(path.read_text(encoding="utf-8"))
    for glob in SOURCES:
        for path in sorted(root.glob(glob)):
            found[path.relative_to(root).as_posix()] = python_prose(path.read_text(encoding="utf-8"))
    return found


# ---------------------------------------------------------------------------------------------
# checking


@dataclass(frozen=True)
class Quote:
    """A number the texts quote for a figure, and whether it agrees with the results file."""

    page: str
    line: int
    figure: str
    quoted: str
    percent: bool
    value: float

    @property
    def decimals(self) -> int:
        """Digits after the decimal point in the quote."""
        return len(self.quoted.partition(".")[2])

    @property
    def ok(self) -> bool:
        """Within half a unit of the quote's last digit of the figure."""
        expected = self.value * (100 if self.percent else 1)
        return abs(float(self.quoted.replace(",", "")) - expected) <= 0.5 * 10.0**-self.decimals + 1e-9

    def __str__(self) -> str:
        figure = FIGURES[self.figure]
        expected = self.value * (100 if self.percent else 1)
        return (
            f"{self.page}:{self.line}: {self.figure} quoted as {self.quoted}{' %' if self.percent else ''}; "
            f"experiments/results/{figure.source}.json gives {expected:.{self.decimals}f} ({figure.about})"
        )


def find_quotes(
    page: str, text: str, values: Mapping[str, float], quotes: Sequence[re.Pattern[str]] = QUOTES
) -> list[Quote]:
    """Every quote of a figure in one text, in order."""
    flat, starts = joined(text)
    found: dict[tuple[int, str], Quote] = {}
    for regex in quotes:
        for match in regex.finditer(flat):
            for group, quoted in match.groupdict().items():
                if quoted is None:
                    continue
                name, _, tag = group.partition("__")
                line = bisect.bisect_right(starts, match.start(group))
                found[(match.start(group), name)] = Quote(page, line, name, quoted, tag == "pct", values[name])
    return [found[key] for key in sorted(found)]


def check(root: Path = ROOT, results: Path = RESULTS) -> list[Quote]:
    """Every quote of a figure in the texts under ``root``, checked against the files in ``results``."""
    values = figure_values(results)
    return [quote for page, text in texts(root).items() for quote in find_quotes(page, text, values)]


def main(argv: Sequence[str] | None = None) -> int:
    """Print each wrong quote (every quote with --list); 1 when any is wrong, else 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print every quote found, right or wrong")
    parser.add_argument("--root", type=Path, default=ROOT, help="the folder holding the texts")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder of the results JSON files")
    args = parser.parse_args(argv)
    quotes = check(args.root, args.results)
    wrong = [q for q in quotes if not q.ok]
    for quote in quotes if args.list else wrong:
        print(f"{'ok' if quote.ok else 'WRONG':6}{quote}" if args.list else quote)
    quoted = {q.figure for q in quotes}
    print(f"{len(quotes)} quotes of {len(quoted)} of {len(FIGURES)} figures; {len(wrong)} wrong", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
