"""experiments/readme_tables.py: the results blocks of README.md and docs/07-results.md equal what
the results JSON files render."""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.experiment_scripts import load_experiment

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "readme_tables.py"
RESULTS = ROOT / "experiments" / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "07-results.md"


def load_script() -> ModuleType:
    return load_experiment("readme_tables")


rt = load_script()  # experiments/ now on sys.path: the modules below are the ones the script imported
blocks = importlib.import_module("readme_blocks")
render_paper = importlib.import_module("readme_render_paper")
render_suite = importlib.import_module("readme_render_suite")


def copy_sources(destination: Path) -> Path:
    """The JSON files every block reads, copied to ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    for block in blocks.BLOCKS.values():
        for stem in block.sources:
            (destination / f"{stem}.json").parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(RESULTS / f"{stem}.json", destination / f"{stem}.json")
    return destination


def copy_pages(root: Path) -> Path:
    """The pages (README.md, docs/07-results.md, BUILD_NOTES.md) copied under ``root`` (the layout ``--root`` reads)."""
    for page in blocks.PAGES:
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, root / page)
    return root


def outside_blocks(text: str) -> list[str]:
    """The pieces of a README between (and around) its generated blocks."""
    pieces, position = [], 0
    for span in blocks.find_blocks(text):
        pieces.append(text[position : span.start])
        position = span.end
    return [*pieces, text[position:]]


def test_results_blocks_match_the_results_json(capsys):
    """Fails when the pages and experiments/results/*.json disagree: run `python experiments/readme_tables.py`."""
    code = rt.main(["--check"])
    out = capsys.readouterr().out
    assert code == 0, f"results blocks are stale:\n{out}"
    assert out == ""
    assert blocks.PAGES == (
        "README.md",
        "docs/07-results.md",
        "BUILD_NOTES.md",
        "docs/03-reproducing-the-paper.md",
        "docs/02-choosing-settings.md",
    )
    for page in blocks.PAGES:
        found = {span.name for span in blocks.find_blocks((ROOT / page).read_text(encoding="utf-8"))}
        assert found == {name for name, block in blocks.BLOCKS.items() if block.page == page}


def test_check_fails_when_a_json_number_changes(tmp_path, capsys):
    results = copy_sources(tmp_path / "results")
    payload = json.loads((results / "bdgp.json").read_text(encoding="utf-8"))
    committed = np.mean([seed["test"]["kmeans"]["acc"] for seed in payload["seeds"]])
    payload["seeds"][0]["test"]["kmeans"]["acc"] = 0.5  # one seed's ACC changes: the mean and std move
    changed = np.mean([seed["test"]["kmeans"]["acc"] for seed in payload["seeds"]])
    (results / "bdgp.json").write_text(json.dumps(payload), encoding="utf-8")

    assert rt.main(["--check", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert "(block paper_results)" in out
    assert f"-| BDGP, 10 seeds | {committed:.3f} ±" in out and f"+| BDGP, 10 seeds | {changed:.3f} ±" in out
    assert "(block devsuite)" not in out and "(block robustness_bdgp)" not in out  # only the stale block


def test_the_variants_summary_names_every_variant_below_nine_tenths_of_its_bar(tmp_path, capsys):
    results = copy_sources(tmp_path / "results")
    payload = json.loads((results / "devsuite_variants.json").read_text(encoding="utf-8"))
    payload["results"]["WebKB+short"]["ratio"] = 0.5
    (results / "devsuite_variants.json").write_text(json.dumps(payload), encoding="utf-8")
    rendered = render_suite.render_devsuite_variants(blocks.load_payloads("devsuite_variants", results))
    below = [name for name, result in payload["results"].items() if result["ratio"] < 0.9]
    assert "WebKB+short" in below
    assert rendered.rstrip().endswith(f"below 0.9: {', '.join(below)}.")
    assert "lowest 0.50 (WebKB+short)" in rendered
    assert rt.main(["--check", "--results", str(results)]) == 1
    assert "BUILD_NOTES.md (block devsuite_variants)" in capsys.readouterr().out


def webkb_row(text: str) -> str:
    """The WebKB row of the devsuite block, as rendered."""
    return next(line for line in text.splitlines() if line.startswith("| WebKB | all rows | 203 | "))


def test_check_fails_when_a_block_is_edited_by_hand(tmp_path, capsys):
    root = copy_pages(tmp_path)
    page = root / "docs" / "07-results.md"
    text = page.read_text(encoding="utf-8")
    row = webkb_row(text)
    edited = row.replace("| WebKB | all rows | 203 | ", "| WebKB | all rows | 203 | 0.111 and ")
    page.write_text(text.replace(row, edited), encoding="utf-8")
    assert rt.main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "docs/07-results.md (block devsuite)" in out and f"-{edited}" in out and f"+{row}" in out
    assert "README.md" not in out  # only the stale block


def test_check_reports_a_missing_block(tmp_path, capsys):
    root = copy_pages(tmp_path)
    page = root / "docs" / "07-results.md"
    text = page.read_text(encoding="utf-8")
    span = next(s for s in blocks.find_blocks(text) if s.name == "robustness_bdgp")
    page.write_text(text[: span.start] + text[span.end :], encoding="utf-8")
    assert rt.main(["--check", "--root", str(root)]) == 1
    assert "docs/07-results.md: no block 'robustness_bdgp'" in capsys.readouterr().out
    assert rt.main(["--root", str(root)]) == 2  # a rewrite cannot place a block that has no markers


def test_a_block_on_another_page_is_reported(tmp_path, capsys):
    root = copy_pages(tmp_path)
    readme, page = root / "README.md", root / "docs" / "07-results.md"
    text = page.read_text(encoding="utf-8")
    span = next(s for s in blocks.find_blocks(text) if s.name == "devsuite")
    page.write_text(text[: span.start] + text[span.end :], encoding="utf-8")
    readme.write_text(readme.read_text(encoding="utf-8") + "\n" + text[span.start : span.end] + "\n", encoding="utf-8")
    assert rt.main(["--check", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "README.md: holds block 'devsuite', which belongs in docs/07-results.md" in out
    assert "docs/07-results.md: no block 'devsuite'" in out


def test_rendering_is_stable_and_a_rewrite_touches_only_the_blocks(tmp_path):
    first, second = blocks.render_all(), blocks.render_all()
    assert first == second
    for page in blocks.PAGES:  # the committed pages are a fixed point
        text = (ROOT / page).read_text(encoding="utf-8")
        assert blocks.rewrite(text, blocks.page_blocks(first, page)) == text

    # a stale page: a number inside a block and the opening marker's comment changed by hand
    root = copy_pages(tmp_path)
    page = root / "docs" / "07-results.md"
    text = page.read_text(encoding="utf-8")
    row = webkb_row(text)
    stale = text.replace(row, row.replace("| WebKB | all rows | 203 | ", "| WebKB | all rows | 203 | 0.111 and "))
    stale = stale.replace(blocks.opening_marker("devsuite"), "<!-- results:devsuite hand-written -->")
    assert stale != text
    page.write_bytes(stale.encode("utf-8"))
    assert rt.main(["--root", str(root)]) == 0
    rewritten = page.read_bytes().decode("utf-8")
    assert rewritten == text
    assert outside_blocks(rewritten) == outside_blocks(stale)  # byte-identical outside the markers
    assert (root / "README.md").read_bytes() == README.read_bytes()
    assert rt.main(["--check", "--root", str(root)]) == 0


def test_broken_markers_are_errors():
    body = "intro\n" + blocks.opening_marker("devsuite") + "\n\ntable\n"
    with pytest.raises(ValueError, match="no closing line"):
        blocks.find_blocks(body)
    with pytest.raises(ValueError, match="unknown block"):
        blocks.find_blocks("<!-- results:nonsense -->\n<!-- /results:nonsense -->\n")
    twice = blocks.render_all()["devsuite"] + "\n\n" + blocks.render_all()["devsuite"] + "\n"
    with pytest.raises(ValueError, match="more than once"):
        blocks.find_blocks(twice)


def test_devsuite_block_reproduces_the_table_devsuite_py_writes():
    """devsuite.md is written by experiments/devsuite.py from the same run as devsuite.json."""
    body = render_suite.render_devsuite(blocks.load_payloads("devsuite"))
    assert body.startswith((RESULTS / "devsuite.md").read_text(encoding="utf-8"))


def test_paper_numbers_come_from_reproduce_tables():
    paper = render_paper.paper_reference()
    assert paper["bdgp"]["kmeans"]["acc"] == (97.6, 0.53)
    assert render_paper.paper_kmeans_acc("noisymnist", paper) == pytest.approx((0.991, 0.0027))


def test_command_line_check_runs_without_the_package():
    """The script is standard library only: `--check` works in a bare interpreter, without specrage_jax."""
    code = (
        f"import runpy, sys\nsys.argv = [{str(SCRIPT)!r}, '--check']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n"
        "    assert 'specrage_jax' not in sys.modules and 'numpy' not in sys.modules, 'imported more than the stdlib'\n"
        "    raise\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
