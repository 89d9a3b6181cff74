"""The table of the numbers the data-aware defaults rest on (docs/02) matches the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from specrage_jax.config import DataConfig, ExperimentConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "02-choosing-settings.md"
SECTION = "### The numbers the defaults rest on"


def table_rows() -> list[list[str]]:
    """The rows of the section's table: [constant, value, module, what, source]."""
    text = DOC.read_text()
    section = text[text.index(SECTION) :]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("| `"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def first_number(text: str) -> float:
    """The first number of a table cell: a fraction ("1/3"), or a decimal with thousands commas."""
    fraction = re.match(r"(\d+)/(\d+)", text)
    if fraction:
        return int(fraction.group(1)) / int(fraction.group(2))
    return float(re.search(r"-?\d[\d,]*\.?\d*", text).group().replace(",", ""))


def code_value(name: str, module: str) -> object:
    """The value the table's row names: a module constant, a DataConfig default or an ExperimentConfig() field."""
    if module == "config.DataConfig":
        return getattr(DataConfig(), name)
    if module == "config.ExperimentConfig()":
        auto = ExperimentConfig()
        return next(getattr(section, name) for section in (auto.model, auto.graph) if hasattr(section, name))
    return getattr(importlib.import_module(f"specrage_jax.{module}"), name)


def test_every_number_in_the_table_is_the_code_s():
    rows = table_rows()
    assert len(rows) >= 20
    for constant, value, module, _, _ in rows:
        name = constant.strip("`")
        actual = code_value(name, module.strip("`"))
        if name == "NEIGHBOR_CANDIDATES":
            assert tuple(int(v) for v in value.split(",")) == actual
        elif name == "WIDTHS_BY_ROWS":
            assert [below for below, _ in actual] == [1500, 4097, 50000]
            assert [widths for _, widths in actual] == [(512, 512, 256), (256, 256, 128), (512, 512, 256)]
        elif name == "LARGE_WIDTHS":
            assert actual == (1024, 1024, 512)
        else:
            assert first_number(value) == pytest.approx(float(actual)), name


def test_the_tuned_count_the_docs_quote_is_the_table_s():
    rows = table_rows()
    tuned = sum(1 for row in rows if row[4].startswith("tuned"))
    quoted = re.search(r"Tuned: (\d+) numbers", DOC.read_text())
    assert quoted is not None and int(quoted.group(1)) == tuned


RULE_MODULES = (
    "training/graph_rules.py",
    "training/missing_view_rules.py",
    "training/defaults.py",
    "training/unrelated_views.py",
    "data/preprocess.py",
)


def test_every_numeric_constant_of_the_rules_is_in_the_table():
    """A number added to a rule module without a row (and a source) fails here."""
    listed = {row[0].strip("`") for row in table_rows()}
    package = Path(__file__).resolve().parents[1] / "specrage_jax"
    for module in RULE_MODULES:
        source = (package / module).read_text()
        for name in re.findall(r"^([A-Z][A-Z_]+) = ", source, flags=re.MULTILINE):
            value = getattr(importlib.import_module("specrage_jax." + module[:-3].replace("/", ".")), name)
            if isinstance(value, (int, float, tuple)) and not isinstance(value, bool):
                assert name in listed, f"{module}: {name} has no row in docs/02's table"
