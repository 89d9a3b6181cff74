"""experiments/training_check.py: devsuite runs of several settings compared per regime."""

from __future__ import annotations

import json

import pytest

from tests.experiment_scripts import load_experiment


def devsuite_file(path, overrides, results):
    path.write_text(json.dumps({"seed": 0, "overrides": overrides, "cpu": "test cpu", "results": results}))
    return str(path)


def suite_result(acc, bar):
    return {"protocol": "all rows", "ACC": acc, "baseline": {"name": "b", "ACC": bar}}


def paper_result(acc, target):
    return {"protocol": "test split", "ACC": acc, "target_ACC": target}


def variant_result(acc, bar):
    return {**suite_result(acc, bar), "variant": True}


@pytest.fixture()
def check():
    return load_experiment("training_check")


def test_each_setting_is_summarized_per_regime_against_the_bars(check, tmp_path):
    base = [
        devsuite_file(
            tmp_path / "a.json", [], {"WebKB": suite_result(0.8, 0.5), "handwritten": paper_result(0.94, 0.93)}
        ),
        devsuite_file(tmp_path / "b.json", [], {"v1": variant_result(0.45, 0.5), "v2": variant_result(0.6, 0.5)}),
    ]
    moved = devsuite_file(
        tmp_path / "c.json",
        ["train.epochs=20"],
        {"WebKB": suite_result(0.4, 0.5), "handwritten": paper_result(0.96, 0.93), "v1": variant_result(0.5, 0.5)},
    )
    report = check.compare({"defaults": base, "200 steps": [moved]})
    assert report["datasets"]["v2"]["ACC"] == {"defaults": 0.6}
    assert report["datasets"]["handwritten"]["regime"] == "paper split"
    defaults, fewer = report["summary"]["defaults"], report["summary"]["200 steps"]
    assert defaults["variants"]["sets"] == 2 and defaults["variants"]["at_bar"] == 1
    assert defaults["variants"]["mean_ratio"] == pytest.approx((0.9 + 1.2) / 2)
    assert defaults["variants"]["lowest_ratio"] == pytest.approx(0.9)
    assert fewer["variants"]["sets"] == 1 and fewer["variants"]["at_bar"] == 1  # v2 not run: left out
    assert fewer["suite"]["mean_ratio"] == pytest.approx(0.8) and fewer["suite"]["at_bar"] == 0
    assert fewer["paper split"]["mean_ACC"] == pytest.approx(0.96)
    assert report["settings"]["200 steps"]["overrides"] == ["train.epochs=20"]
    paired = report["against_defaults"]["200 steps"]
    assert paired["sets"] == 3 and paired["moved"] == 3
    assert paired["mean_change"] == pytest.approx((-0.4 + 0.02 + 0.05) / 3)
    assert paired["largest_loss"][0] == "WebKB" and paired["largest_gain"][0] == "v1"
    assert "200 steps" in check.printed(report)


def test_files_of_one_setting_must_share_their_overrides(check, tmp_path):
    first = devsuite_file(tmp_path / "a.json", [], {"WebKB": suite_result(0.8, 0.5)})
    second = devsuite_file(tmp_path / "b.json", ["train.epochs=20"], {"v1": variant_result(0.5, 0.5)})
    with pytest.raises(SystemExit, match="overrides"):
        check.compare({"defaults": [first, second]})


def test_a_contamination_file_gives_the_weights_of_its_rows(check, tmp_path):
    run = {
        "dataset": "blobs",
        "fraction": 0.2,
        "kinds": ["clean", "outliers"],
        "overrides": ["train.epochs=20"],
        "cpu": "test cpu",
        "summary": {
            "clean": {"predict": {"acc_mean": 0.99}},
            "outliers": {
                "predict": {"acc_mean": 0.9},
                "weights": [{"clean": 0.5, "contaminated": 0.2}, {"clean": 0.4, "contaminated": 0.3}],
            },
        },
    }
    path = tmp_path / "blobs.json"
    path.write_text(json.dumps(run))
    summary = check.contamination_summary(str(path))
    assert summary["contaminated_weight"] == pytest.approx(0.25)
    assert summary["clean_weight"] == pytest.approx(0.45)
    assert (summary["clean_ACC"], summary["contaminated_ACC"]) == (0.99, 0.9)
    run["kinds"] = ["clean", "outliers", "noise"]
    path.write_text(json.dumps(run))
    with pytest.raises(SystemExit, match="one contaminated kind"):
        check.contamination_summary(str(path))
    with pytest.raises(SystemExit, match="NAME=FILE"):
        check.named("no-equals-sign")
