"""experiments/variants_seed_summary.py: a rule check's moved runs replace their ratios, and every
mean is recomputed from the replaced table."""

from __future__ import annotations

import pytest

from tests.experiment_scripts import load_experiment

summary_script = load_experiment("variants_seed_summary")


def _summary() -> dict:
    ratios = {"a": {0: 1.0, 1: 0.8}, "b": {0: 1.2, 1: 1.1}}
    return summary_script.summary_of(ratios, "box")


def test_the_summary_means_follow_the_ratios():
    summary = _summary()
    assert summary["mean_by_seed"] == {0: pytest.approx(1.1), 1: pytest.approx(0.95)}
    assert summary["mean"] == pytest.approx(1.025)
    assert summary["lowest_mean"] == {"variant": "a", "ratio": pytest.approx(0.9)}
    assert summary["at_or_above_by_seed"] == {0: 2, 1: 1}


def test_a_rule_checks_moved_variant_runs_replace_their_ratios_and_are_listed():
    check = {
        "cpu": "box",
        "runs": [
            {"run": "a", "seed": 1, "regime": "variants", "moved": {"l": [5, 30]}, "after_acc": 0.5, "bar": 0.5},
            {"run": "bdgp", "seed": 1, "regime": "paper split", "moved": {"c": [7, 6]}, "after_acc": 0.9, "bar": 0.9},
        ],
    }
    updated = summary_script.with_rule_check(_summary(), check)
    assert updated["ratios"]["a"]["by_seed"] == {0: 1.0, 1: pytest.approx(1.0)}
    assert updated["mean_by_seed"][1] == pytest.approx(1.05)
    assert updated["lowest_mean"]["variant"] == "a" and updated["lowest_mean"]["ratio"] == pytest.approx(1.0)
    assert updated["replaced"] == [{"variant": "a", "seed": 1, "moved": {"l": [5, 30]}}]


def test_a_rule_check_from_another_cpu_is_refused():
    with pytest.raises(SystemExit, match="one box"):
        summary_script.with_rule_check(_summary(), {"cpu": "other", "runs": []})
