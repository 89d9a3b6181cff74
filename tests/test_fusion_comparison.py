"""experiments/fusion_comparison.py on a tiny configuration."""

from __future__ import annotations

import json
import math

import pytest

from tests.experiment_scripts import load_experiment

TINY = [
    "--max-samples",
    "300",
    "--fractions",
    "0.4",
    "--set",
    "train.epochs=2",
    "--set",
    "model.view_hidden=32,32",
    "--set",
    "model.weighting_hidden=16",
]


def load(name: str):
    return load_experiment(name)


@pytest.mark.slow  # the script end to end (~13 s); runs/robustness has its own tests
def test_fusion_script_writes_a_curve_per_fusion_and_its_runs_are_reusable(tmp_path):
    out = tmp_path / "fusion.json"
    load("fusion_comparison").main(
        ["--dataset", "blobs", "--fusions", "weighting-eq4", "average", "concat", "--out", str(out), *TINY]
    )
    result = json.loads(out.read_text())
    assert result["complete"] and result["dataset"] == "blobs" and result["fractions"] == [0.4]
    assert set(result["methods"]) == {"weighting-eq4", "average", "concat"}
    concat = result["methods"]["concat"]["overrides"]
    assert "model.fusion=concat" in concat
    assert concat[-3:] == [x for x in TINY if "=" in x]  # --set is applied last: it wins over the method's own
    for kind in ("outliers", "noise"):
        assert set(result["curves"][kind]) == {"weighting-eq4", "average", "concat"}
        for rows in result["curves"][kind].values():
            assert rows["n_seeds"] == [1] and math.isfinite(rows["degradation_mean"][0])
    assert len(result["runs"]) == 3 * 3  # (clean, outliers 40 %, noise 40 %) x 3 fusions
    assert (tmp_path / "fusion.png").stat().st_size > 1000
    # the weighting fusion under Eq. 4 is robustness_curves' "specrage": its runs are taken over, not rerun
    curves = load("robustness_curves").main(
        ["--datasets", "blobs", "--methods", "specrage", "--out-dir", str(tmp_path), "--reuse", str(out), *TINY]
    )["blobs"]
    weighting = sorted((r["kind"], r["acc"], r["seconds"]) for r in result["runs"] if r["method"] == "weighting-eq4")
    assert sorted((r["kind"], r["acc"], r["seconds"]) for r in curves["runs"]) == weighting


def test_fusion_methods_differ_only_in_the_fusion_or_the_loss():
    methods = {
        m.name: m.overrides
        for m in load("fusion_comparison").fusion_methods("bdgp", ["weighting", "average", "weighting-eq4"])
    }
    assert methods["weighting"] == (
        "model.temperature=250",
        "graph.weights_in_affinity=false",
        "model.fusion=weighting",
    )
    assert methods["average"][:2] == methods["weighting"][:2] and methods["average"][2] == "model.fusion=average"
    assert methods["weighting-eq4"] == (
        "model.temperature=250",
        "graph.weights_in_affinity=true",
        "model.fusion=weighting",
    )
