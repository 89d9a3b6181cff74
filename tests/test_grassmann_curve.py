"""experiments/grassmann_curve.py on a tiny configuration: the JSON it writes (issue 6)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "grassmann_curve.py"


def test_grassmann_curve_script_writes_a_falling_curve(tmp_path):
    spec = importlib.util.spec_from_file_location("grassmann_curve", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "g.json"
    module.main(["--dataset", "blobs", "--set", "train.epochs=4", "--set", "model.view_hidden=64,64",
                 "--max-reference", "200", "--out", str(out)])
    result = json.loads(out.read_text())
    k = result["k"]
    assert result["epochs"] == [0, 1, 2, 3] and result["reference_rows"] == 200
    assert all(0.0 <= g <= k for g in result["grassmann_sq"])
    assert result["grassmann_sq"][-1] < result["grassmann_sq"][0]
    assert len(result["final_quadratic_forms"]) == 2
    assert (tmp_path / "g.png").stat().st_size > 1000
