"""experiments/seed_spread.py's summary and its --table-only rewrite (no fits, no data files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import seed_spread as ss


def runs_of(rows_right: list[int], test_rows: int = 400) -> list[dict]:
    return [
        {"seed": s, "kmeans_acc": r / test_rows, "svm_acc": (r + 4) / test_rows, "gap": 4 / test_rows}
        for s, r in enumerate(rows_right)
    ]


def test_a_mean_of_whole_test_rows_is_not_an_ulp_under_its_value():
    runs = runs_of([377, 381, 371, 378, 373])  # 1,880 of 2,000 rows: exactly 0.94
    assert float(np.mean([r["kmeans_acc"] for r in runs])) < 0.94  # the float sum's rounding
    s = ss.summary(runs)
    assert s["mean"] >= 0.94 and abs(s["mean"] - 0.94) < 1e-15
    assert s["worst"] == 371 / 400 and abs(s["largest_gap"] - 0.01) < 1e-15


def test_table_only_resummarizes_the_saved_runs(tmp_path, monkeypatch, capsys):
    out = tmp_path / "spread"
    runs = runs_of([377, 381, 371, 378, 373])
    saved = {
        "seeds": [0, 1, 2, 3, 4],
        "cpu": "x",
        "results": {"handwritten": {"estimator": {"runs": runs, "summary": {}}}},
    }
    out.with_suffix(".json").write_text(json.dumps(saved))
    monkeypatch.setattr(sys, "argv", ["seed_spread.py", "--table-only", "--out", str(out)])
    ss.main()
    rewritten = json.loads(out.with_suffix(".json").read_text())
    assert rewritten["results"]["handwritten"]["estimator"]["summary"]["mean"] >= 0.94
    assert "| handwritten | estimator |" in out.with_suffix(".md").read_text()
    assert "| 0.9400 |" in capsys.readouterr().out


def test_the_table_does_not_round_a_mean_onto_the_bar():
    runs = runs_of([376, 381, 371, 378, 373])  # 1,879 of 2,000 rows: 0.9395, under 0.94
    table = ss.markdown({"handwritten": {"estimator": {"runs": runs, "summary": ss.summary(runs)}}}, [0, 1, 2, 3, 4])
    assert "| 0.9395 |" in table and "0.940 |" not in table


def test_a_named_dataset_runs_by_the_cli_path_only(monkeypatch, capsys):
    argv = ["seed_spread.py", "--data-dir", "x", "--datasets", "noisymnist", "--paths", "estimator", "cli"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit):
        ss.main()
    assert "noisymnist: the CLI path only" in capsys.readouterr().err
