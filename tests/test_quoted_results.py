"""experiments/quoted_results.py: every headline figure quoted in README.md, the docs, BUILD_NOTES.md
and the modules' docstrings and comments equals its results file at the quoted precision."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.experiment_scripts import load_experiment

qr = load_experiment("quoted_results")


@pytest.fixture(scope="module")
def quotes() -> list:
    """Every quote of a figure in the repository's texts."""
    return qr.check()


def write(root: Path, page: str, text: str) -> None:
    """A text at ``page`` under ``root``."""
    (root / page).parent.mkdir(parents=True, exist_ok=True)
    (root / page).write_text(text, encoding="utf-8")


def test_every_quoted_figure_equals_its_results_file(quotes):
    """Fails when a text quotes a headline figure its results file no longer gives: correct the number
    or point to the generated table (`python experiments/quoted_results.py` lists each one)."""
    wrong = [str(q) for q in quotes if not q.ok]
    assert not wrong, "\n".join(wrong)


def test_every_figure_is_quoted_somewhere(quotes):
    """A figure no pattern finds is dead weight, or its quotes were reworded past their patterns."""
    assert sorted(set(qr.FIGURES) - {q.figure for q in quotes}) == []


def test_a_wrong_figure_in_a_page_is_reported(tmp_path, capsys):
    values = qr.figure_values()
    wrong, std = f"{values['handwritten_mean'] + 0.004:.3f}", f"{values['handwritten_std']:.3f}"
    write(
        tmp_path, "BUILD_NOTES.md", f"# Notes\n\n- Handwritten **{wrong} ± {std}** with the data-aware\n  defaults.\n"
    )
    found = qr.check(tmp_path)
    assert [(q.page, q.line, q.figure, q.quoted) for q in found if not q.ok] == [
        ("BUILD_NOTES.md", 3, "handwritten_mean", wrong)
    ]
    assert [q.figure for q in found if q.ok] == ["handwritten_std"]
    assert qr.main(["--root", str(tmp_path)]) == 1
    assert f"BUILD_NOTES.md:3: handwritten_mean quoted as {wrong}" in capsys.readouterr().out


def test_a_quote_wrapped_over_lines_is_read_and_an_earlier_set_is_not(tmp_path):
    text = (
        "Stress variants\n\nThe stress variants (`experiments/devsuite.py --variants all`): mean 9.99× the best\n"
        "baseline, 1 of 2 at or above. The 35 earlier variants 1.02× with 20 of 35 at or above.\n"
    )
    write(tmp_path, "docs/07-results.md", text)
    found = qr.check(tmp_path)
    assert [(q.line, q.figure, q.quoted, q.ok) for q in found] == [
        (3, "variants_mean", "9.99", False),
        (4, "variants_met", "1", False),
        (4, "variants_count", "2", False),
    ]


def test_generated_blocks_and_code_are_not_read(tmp_path):
    quote = "Handwritten **0.100 ± {}**"
    block = f"<!-- results:paper_results (generated) -->\n\n{quote.format('0.500')}\n\n<!-- /results:paper_results -->"
    write(tmp_path, "README.md", f"# Title\n\n{block}\n")
    module = f'"""{quote.format("0.501")}."""\n\nLABEL = "{quote.format("0.502")}"  # {quote.format("0.503")}\n'
    write(tmp_path, "specrage_jax/module.py", module)
    found = qr.check(tmp_path)
    assert [(q.page, q.line, q.quoted) for q in found if q.figure == "handwritten_std"] == [
        ("specrage_jax/module.py", 1, "0.501"),
        ("specrage_jax/module.py", 3, "0.503"),
    ]


def test_a_quote_is_right_within_half_a_unit_of_its_last_digit():
    def ok(quoted: str, value: float, percent: bool = False) -> bool:
        return qr.Quote("page", 1, "handwritten_mean", quoted, percent, value).ok

    assert ok("0.945", 0.94475) and ok("0.9447", 0.94475) and ok("0.9448", 0.94475)
    assert not ok("0.944", 0.94475) and not ok("0.9446", 0.94475)
    assert ok("94.5", 0.94475, percent=True) and not ok("94.3", 0.94475, percent=True)
    assert ok("1,545", 1545.4) and not ok("1,547", 1545.4)


def test_a_figure_reads_its_path_selection_and_reduction():
    payload = {"seeds": [{"a": 0.9, "b": 1.0}, {"a": 0.7, "b": 0.6}], "runs": [{"n": 10, "x": 1}, {"n": 20, "x": 2}]}

    def value(path: str, reduce: str = "value", **options) -> float:
        return qr.figure_value(qr.Figure("about", "stem", path, reduce, **options), payload)

    assert value("seeds/*/a", "mean") == pytest.approx(0.8)
    assert value("seeds/*/a", "std") == pytest.approx(0.1)
    assert (value("seeds/*/a", "min"), value("seeds/*/a", "count"), value("seeds/*/b", "at_least_1")) == (0.7, 2, 1)
    assert value("seeds/*/b", "max", minus="seeds/*/a") == pytest.approx(0.1)
    assert value("runs/[n=20]/x", scale=0.5) == 1.0
    with pytest.raises(ValueError, match="2 values"):
        value("runs/*/x")
    with pytest.raises(ValueError, match="nothing at"):
        value("runs/[n=30]/x")
