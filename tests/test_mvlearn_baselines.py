"""experiments/mvlearn_baselines.py on small synthetic sets (no data files; mvlearn is optional)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import mvlearn_baselines as mb


def test_a_missing_mvlearn_says_how_to_install_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "mvlearn", raising=False)
    monkeypatch.delitem(sys.modules, "mvlearn.cluster", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match="pip install --no-deps --target MVLEARN mvlearn"):
        mb.mvlearn_clusterers()


def test_the_best_setting_is_the_highest_mean_acc():
    baselines = {"spectral/rbf/l2": {"ACC": 0.61, "NMI": 0.4}, "coreg/knn/std": {"ACC": 0.72, "NMI": 0.3}}
    assert mb.best_setting(baselines) == {"name": "coreg/knn/std", "ACC": 0.72, "NMI": 0.3}


def test_the_table_gives_the_defaults_ratio_to_the_best_setting():
    results = {
        "blobs": {
            "n": 120,
            "baselines": {"spectral/knn/l2": {"ACC": 0.8}, "coreg/rbf/std": {"ACC": 0.4}},
            "mvlearn_best": {"name": "spectral/knn/l2", "ACC": 0.8, "NMI": 0.5},
        },
        "rings": {
            "n": 90,
            "baselines": {"spectral/knn/l2": {"ACC": 0.3}, "coreg/rbf/std": {"ACC": 0.5}, "kmeans/l2": {"ACC": 0.2}},
            "mvlearn_best": {"name": "coreg/rbf/std", "ACC": 0.5, "NMI": 0.2},
        },
    }
    table = mb.markdown_table(["blobs", "rings"], results, {"blobs": 0.6, "rings": 0.55}, "ours.json")
    assert "| blobs | 120 | 0.600 | 0.800 (spectral/knn/l2) | 0.75 |" in table
    assert "| rings | 90 | 0.550 | 0.500 (coreg/rbf/std) | 1.10 |" in table
    assert "at or above mvlearn's best on 1 of 2; ratio mean 0.93, lowest 0.75 (blobs)" in table
    # spectral/knn/l2 alone: rings only; coreg/rbf/std alone: both; kmeans/l2 ran on one set only
    assert "Against each of the 2 settings run on every set alone: 1 to 2." in table
    assert mb.table_row("blobs", results["blobs"], None) == "| blobs | 120 | - | 0.800 (spectral/knn/l2) | - |"


@pytest.mark.skipif(importlib.util.find_spec("mvlearn") is None, reason="mvlearn is optional (experiments only)")
def test_every_setting_recovers_two_views_of_well_separated_clusters():
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 40)
    centres = rng.normal(0, 8, (3, 5))
    views = [centres[labels] @ rng.normal(size=(5, d)) + rng.normal(0, 0.5, (120, d)) for d in (12, 9)]
    entry = mb.mvlearn_baselines(views, labels, 3, seeds=(0, 1))
    assert set(entry["baselines"]) == {f"{s}/{p}" for s in mb.settings(2) for p in ("std", "l2")}
    assert len(entry["baselines"]) == 12  # four spectral settings and the two two-view k-means, per prep
    assert entry["mvlearn_best"]["ACC"] == 1.0
    for name, numbers in entry["baselines"].items():
        runs = [run["ACC"] for run in numbers["per_seed"]]
        # the spectral settings on every seed; co-EM k-means may stop in a poor start's local optimum
        assert (min(runs) if name.startswith(("spectral", "coreg")) else max(runs)) == 1.0, (name, runs)


def test_a_setting_that_raises_is_recorded_not_fatal():
    class NoConvergence:
        def fit_predict(self, views):
            raise ArithmeticError("ARPACK error -1: No convergence")

    labels = np.repeat(np.arange(2), 5)
    runs = mb.setting_runs(lambda k, seed: NoConvergence(), [np.zeros((10, 2))], labels, 2, (0,))
    assert runs == "ArithmeticError: ARPACK error -1: No convergence"


def test_a_set_whose_every_setting_failed_is_named_not_tabled():
    results = {
        "blobs": {"n": 120, "baselines": {"coreg/rbf/l2": {"ACC": 0.5}}, "mvlearn_best": mb.best_setting({})},
        "rings": {
            "n": 90,
            "baselines": {"coreg/rbf/l2": {"ACC": 0.5, "NMI": 0.2}},
            "mvlearn_best": mb.best_setting({"coreg/rbf/l2": {"ACC": 0.5, "NMI": 0.2}}),
        },
    }
    table = mb.markdown_table(["blobs", "rings"], results, {"blobs": 0.6, "rings": 0.55}, "ours.json")
    assert "| blobs |" not in table and "| rings | 90 | 0.550 | 0.500 (coreg/rbf/l2) | 1.10 |" in table
    assert "at or above mvlearn's best on 1 of 1" in table and "Not in the results: blobs" in table
