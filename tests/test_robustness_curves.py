"""experiments/robustness_curves.py on a tiny configuration, and specrage_jax.runs.robustness."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from specrage_jax.data import make_blobs_views
from specrage_jax.runs.robustness import (
    ContaminationSpec,
    CurveSpec,
    Method,
    adopt_runs,
    contaminate,
    pending_levels,
    relative_degradation,
    subsample,
    summarize_curves,
)
from tests.experiment_scripts import load_experiment

TINY = [
    "--max-samples",
    "300",
    "--fractions",
    "0.2",
    "0.4",
    "--set",
    "train.epochs=1",
    "--set",
    "model.view_hidden=32,32",
    "--set",
    "model.weighting_hidden=16",
]


def load_script():
    return load_experiment("robustness_curves")


@pytest.mark.slow  # a script run: ~13 s; the default suite is at its time budget
def test_robustness_script_writes_both_curves_for_both_methods(tmp_path):
    module = load_script()
    module.main(["--datasets", "blobs", "--out-dir", str(tmp_path), *TINY])
    result = json.loads((tmp_path / "robustness_blobs.json").read_text())
    assert result["complete"] and result["n_seeds"] == 1 and result["fractions"] == [0.2, 0.4]
    assert set(result["methods"]) == {"specrage", "alignment"}
    assert "graph.weights_in_affinity=true" in result["methods"]["specrage"]["overrides"]  # Eq. 4, the paper's loss
    assert set(result["curves"]) == {"outliers", "noise"}
    for kind in ("outliers", "noise"):
        for name in ("specrage", "alignment"):
            rows = result["curves"][kind][name]
            assert rows["fractions"] == [0.2, 0.4] and rows["n_seeds"] == [1, 1]
            assert len(rows["degradation_mean"]) == 2 and all(math.isfinite(v) for v in rows["degradation_mean"])
            assert all(0.0 <= a <= 1.0 for a in rows["acc_mean"]) and 0.0 < rows["clean_acc_mean"] <= 1.0
    cells = {(r["method"], r["kind"], r["fraction"]) for r in result["runs"]}
    assert len(result["runs"]) == len(cells) == 2 * (1 + 2 * 2)  # clean + 2 kinds x 2 levels, per method
    specrage = [r for r in result["runs"] if r["method"] == "specrage" and r["kind"] == "outliers"]
    assert all(len(r["weights_contaminated_rows"]) == 2 for r in specrage)
    assert (tmp_path / "robustness_blobs.png").stat().st_size > 1000
    # --resume runs nothing again: the same records come back
    again = module.main(["--datasets", "blobs", "--out-dir", str(tmp_path), "--resume", *TINY])["blobs"]
    assert again["runs"] == result["runs"]


def test_relative_degradation_and_summary_over_seeds():
    assert relative_degradation(0.8, 0.6) == pytest.approx(25.0)
    with pytest.raises(ValueError):
        relative_degradation(0.0, 0.5)
    runs = [{"method": "m", "kind": "clean", "fraction": 0.0, "seed": s, "acc": 1.0} for s in (0, 1)]
    runs += [
        {"method": "m", "kind": "noise", "fraction": 0.4, "seed": 0, "acc": 0.9},
        {"method": "m", "kind": "noise", "fraction": 0.4, "seed": 1, "acc": 0.7},
    ]
    rows = summarize_curves(runs, ["m"], ["noise"], [0.2, 0.4])["noise"]["m"]
    assert rows["degradation_mean"][1] == pytest.approx(20.0) and rows["degradation_std"][1] == pytest.approx(10.0)
    assert rows["degradation_mean"][0] is None and rows["n_seeds"] == [0, 2]


def test_contaminate_changes_only_the_masked_rows_and_clean_is_identity():
    data = make_blobs_views(n_samples=200, seed=0)
    spec = ContaminationSpec(outlier_view=1)
    dirty, mask = contaminate(data, "outliers", 0.3, seed=0, spec=spec)
    assert mask.shape == (200, 2) and mask[:, 1].sum() == 60 and not mask[:, 0].any()
    np.testing.assert_array_equal(dirty.views[1][~mask[:, 1]], data.views[1][~mask[:, 1]])
    same, none = contaminate(data, "clean", 0.3, seed=0, spec=spec)
    assert same is data and not none.any()
    small = subsample(data, 50, seed=0)
    assert small.n_samples == 50 and np.bincount(small.labels).min() == 10


def test_runs_are_adopted_by_signature_and_only_missing_cells_run():
    methods = [Method("specrage", ("model.temperature=90",)), Method("alignment", alignment=True)]
    signatures = {"specrage": "aaa", "alignment": "bbb"}
    known = [
        {"method": "weighting", "signature": "aaa", "kind": "clean", "fraction": 0.0, "seed": 0, "acc": 1.0},
        {"method": "other", "signature": "zzz", "kind": "clean", "fraction": 0.0, "seed": 0, "acc": 1.0},
    ]
    adopted = adopt_runs(known, signatures)
    assert [r["method"] for r in adopted] == ["specrage"]
    done = {("aaa", "clean", 0.0, 0)}
    levels = pending_levels(methods, signatures, done, ["noise"], [0.4], [0])
    assert [(lv.kind, [m.name for m in lv.methods]) for lv in levels] == [
        ("clean", ["alignment"]),
        ("noise", ["specrage", "alignment"]),
    ]
    with pytest.raises(ValueError):
        CurveSpec(kinds=("fire",))


def test_runs_recorded_before_a_later_field_are_adopted_only_at_its_earlier_behaviour():
    from specrage_jax.overrides import apply_overrides
    from specrage_jax.presets import preset
    from specrage_jax.runs.robustness import (
        LATER_FIELDS,
        earlier_signatures,
        hash_signature,
        run_signature,
        signature_values,
    )

    method = Method("specrage", ("model.temperature=90",))
    protocol = {"dataset": "blobs"}
    config = apply_overrides(preset("blobs"), method.overrides)
    values = signature_values(config)
    for section, name, _ in LATER_FIELDS:
        del values[section][name]
    before_any = hash_signature(protocol, method, values)  # what a run recorded before every later field carries
    assert before_any != run_signature(protocol, config, method)
    assert before_any in earlier_signatures(protocol, config, method)

    def another(value):
        return not value if isinstance(value, bool) else value + 1

    section, name, value = LATER_FIELDS[0]
    changed = apply_overrides(config, (f"{section}.{name}={another(value)}",))
    assert before_any not in earlier_signatures(protocol, changed, method)  # the field changes what the run computes
    section, name, value = LATER_FIELDS[-1]
    changed = apply_overrides(config, (f"{section}.{name}={another(value)}",))
    assert earlier_signatures(protocol, changed, method) == []  # the latest field too: no earlier run is this run
    signatures = {"specrage": run_signature(protocol, config, method)}
    known = [{"method": "weighting", "signature": before_any, "kind": "noise", "fraction": 0.4, "seed": 1, "acc": 0.9}]
    (adopted,) = adopt_runs(known, signatures, {"specrage": earlier_signatures(protocol, config, method)})
    assert adopted["signature"] == signatures["specrage"] and adopted["recorded_signature"] == before_any
    assert adopted["method"] == "specrage" and adopted["acc"] == 0.9
    assert adopt_runs(known, signatures) == []  # without the earlier signatures nothing matches


def test_run_curves_without_running_only_summarizes_adopted_runs():
    from specrage_jax.presets import preset
    from specrage_jax.runs.robustness import method_signature_sets, run_curves

    spec = CurveSpec(kinds=("noise",), fractions=(0.4,), max_samples=100)
    load = lambda seed: make_blobs_views(n_samples=300, seed=seed)  # noqa: E731
    methods = [Method("specrage", ("model.temperature=90",))]
    sig = method_signature_sets("blobs", spec, preset("blobs"), methods, 5)[0]["specrage"]
    known = [{"method": "x", "signature": sig, "kind": "clean", "fraction": 0.0, "seed": 0, "acc": 0.8}]
    runs, curves = run_curves("blobs", load, methods, preset("blobs"), spec, known_runs=known, run_missing=False)
    assert [r["method"] for r in runs] == ["specrage"]
    assert curves["noise"]["specrage"]["clean_acc_mean"] == 0.8 and curves["noise"]["specrage"]["n_seeds"] == [0]


@pytest.mark.slow  # four training runs; the default suite is at its time budget
def test_curves_resolve_the_data_rule_settings_of_a_preset(tmp_path):
    """A preset may leave the view nets' widths to the data rule (model.view_hidden=(0,), as BDGP's
    does); every robustness run resolves them on its training split before building the nets."""
    module = load_script()
    args = ["--max-samples", "300", "--fractions", "0.4", "--kinds", "outliers", "--set", "train.epochs=1"]
    args += ["--set", "model.view_hidden=(0,)", "--set", "model.weighting_hidden=16"]
    result = module.main(["--datasets", "blobs", "--out-dir", str(tmp_path), *args])["blobs"]
    assert result["complete"] and len(result["runs"]) == 2 * 2  # clean + 40 % outliers, per method
    assert all(0.0 < r["acc"] <= 1.0 for r in result["runs"])
