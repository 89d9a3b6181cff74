"""experiments/readme_tables.py: the README's results blocks equal what the results JSON files render."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "readme_tables.py"
RESULTS = ROOT / "experiments" / "results"
README = ROOT / "README.md"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_tables", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_tables"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


rt = load_script()


def copy_sources(destination: Path) -> Path:
    """The JSON files every block reads, copied to ``destination``."""
    destination.mkdir(parents=True, exist_ok=True)
    for block in rt.BLOCKS.values():
        for stem in block.sources:
            shutil.copy(RESULTS / f"{stem}.json", destination / f"{stem}.json")
    return destination


def outside_blocks(text: str) -> list[str]:
    """The pieces of a README between (and around) its generated blocks."""
    pieces, position = [], 0
    for span in rt.find_blocks(text):
        pieces.append(text[position : span.start])
        position = span.end
    return [*pieces, text[position:]]


def test_readme_blocks_match_the_results_json(capsys):
    """Fails when README.md and experiments/results/*.json disagree: run `python experiments/readme_tables.py`."""
    code = rt.main(["--check"])
    out = capsys.readouterr().out
    assert code == 0, f"README results blocks are stale:\n{out}"
    assert out == ""
    assert {span.name for span in rt.find_blocks(README.read_text(encoding="utf-8"))} == set(rt.BLOCKS)


def test_check_fails_when_a_json_number_changes(tmp_path, capsys):
    results = copy_sources(tmp_path / "results")
    payload = json.loads((results / "bdgp.json").read_text(encoding="utf-8"))
    payload["seeds"][0]["test"]["kmeans"]["acc"] = 0.5  # one seed's ACC changes: the mean and std move
    (results / "bdgp.json").write_text(json.dumps(payload), encoding="utf-8")

    assert rt.main(["--check", "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert "(block paper_results)" in out
    assert "-| BDGP, 10 seeds | 0.966 ± 0.028" in out and "+| BDGP, 10 seeds | 0.917 ±" in out
    assert "(block devsuite)" not in out and "(block robustness_bdgp)" not in out  # only the stale block


def test_check_fails_when_the_readme_block_is_edited_by_hand(tmp_path, capsys):
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    assert text.count("| WebKB | all rows | 203 | 0.776 |") == 1
    readme.write_text(
        text.replace("| WebKB | all rows | 203 | 0.776 |", "| WebKB | all rows | 203 | 0.768 |"), encoding="utf-8"
    )
    assert rt.main(["--check", "--readme", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "(block devsuite)" in out and "-| WebKB | all rows | 203 | 0.768 |" in out
    assert "+| WebKB | all rows | 203 | 0.776 |" in out


def test_check_reports_a_missing_block(tmp_path, capsys):
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    span = next(s for s in rt.find_blocks(text) if s.name == "robustness_bdgp")
    readme.write_text(text[: span.start] + text[span.end :], encoding="utf-8")
    assert rt.main(["--check", "--readme", str(readme)]) == 1
    assert "no block 'robustness_bdgp'" in capsys.readouterr().out


def test_rendering_is_stable_and_a_rewrite_touches_only_the_blocks(tmp_path):
    first, second = rt.render_all(), rt.render_all()
    assert first == second
    text = README.read_text(encoding="utf-8")
    assert rt.rewrite(text, first) == text  # the committed README is a fixed point

    # a stale README: a number inside a block and the opening marker's comment changed by hand
    stale = text.replace("| WebKB | all rows | 203 | 0.776 |", "| WebKB | all rows | 203 | 0.111 |")
    stale = stale.replace(rt.opening_marker("devsuite"), "<!-- results:devsuite hand-written -->")
    assert stale != text
    readme = tmp_path / "README.md"
    readme.write_bytes(stale.encode("utf-8"))
    assert rt.main(["--readme", str(readme)]) == 0
    rewritten = readme.read_bytes().decode("utf-8")
    assert rewritten == text
    assert outside_blocks(rewritten) == outside_blocks(stale)  # byte-identical outside the markers
    assert rt.main(["--check", "--readme", str(readme)]) == 0


def test_broken_markers_are_errors():
    body = "intro\n" + rt.opening_marker("devsuite") + "\n\ntable\n"
    with pytest.raises(ValueError, match="no closing line"):
        rt.find_blocks(body)
    with pytest.raises(ValueError, match="unknown block"):
        rt.find_blocks("<!-- results:nonsense -->\n<!-- /results:nonsense -->\n")
    twice = rt.render_all()["devsuite"] + "\n\n" + rt.render_all()["devsuite"] + "\n"
    with pytest.raises(ValueError, match="more than once"):
        rt.find_blocks(twice)


def test_devsuite_block_reproduces_the_table_devsuite_py_writes():
    """devsuite.md is written by experiments/devsuite.py from the same run as devsuite.json."""
    body = rt.render_devsuite(rt.load_payloads("devsuite"))
    assert body.startswith((RESULTS / "devsuite.md").read_text(encoding="utf-8"))


def test_paper_numbers_come_from_reproduce_tables():
    paper = rt.paper_reference()
    assert paper["bdgp"]["kmeans"]["acc"] == (97.6, 0.53)
    assert rt.paper_kmeans_acc("noisymnist", paper) == pytest.approx((0.991, 0.0027))


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
