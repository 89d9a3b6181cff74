"""experiments/defaults_proxy.py and defaults_rules.py on one small real set (../shared/datasets,
or $SPECRAGE_TEST_DATA; skipped when absent): the partitions saved are the candidates the rules
choose among, and the score of a choice is the saved partition's accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from specrage_jax.api.fit_pipeline import validation_split
from specrage_jax.config import ExperimentConfig
from tests.experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def data_dir(devsuite_data_dir: str) -> str:
    return devsuite_data_dir


@pytest.mark.slow
def test_saved_partitions_score_the_choice_the_library_makes(data_dir, tmp_path):
    proxy = load_experiment("defaults_proxy")
    rules = load_experiment("defaults_rules")
    data, paper = proxy.load_named("WebKB", data_dir, 0)
    parts = proxy.dataset_partitions(data, paper, 0)
    labels = parts["labels"]
    train_rows, _ = validation_split(data.n_samples, 0, ExperimentConfig().data.val_fraction)
    assert not paper and np.array_equal(labels, data.labels[train_rows])  # WebKB: one batch, every training row
    settings = [key for key in parts if key.count("|") == 3]
    assert {int(key.split("|")[1]) for key in settings} == {5, 8, 10, 12, 15, 20, 30}
    assert all(len(parts[key]) == len(labels) and parts[key].max() < 4 for key in settings)
    np.savez_compressed(tmp_path / "WebKB_s0.npz", **parts)
    scored = rules.score_file(tmp_path / "WebKB_s0.npz", data_dir)
    now, record = rules.resolved_now("WebKB", data_dir, 0)
    assert scored["now"]["l"] == now["l"] and scored["now"]["rule"] == record["graph.n_neighbors"]["rule"]
    assert scored["acc_at_k_by_l"][now["l"]] == scored["now"]["acc_at_k"]
    assert scored["best_acc_at_k"] == max(scored["acc_at_k_by_l"].values()) >= scored["dense_acc_at_k"]


@pytest.mark.slow
def test_the_sensitivity_replay_reproduces_the_library(data_dir):
    sensitivity = load_experiment("defaults_sensitivity")
    run = sensitivity.estimator_run("WebKB", data_dir, 0)
    assert run.scores and run.cuts and sensitivity.replayed(run) == (run.l, run.c)


def test_a_moved_number_reports_the_runs_whose_choice_changes():
    sensitivity = load_experiment("defaults_sensitivity")
    # l 5 by a clear gap (1.5 against the dense 1.05, held at l 8); no cut measured
    clear = sensitivity.Measured("a", 0, 3, {5: 1.5, 8: 1.4, 30: 1.05}, float("nan"), {}, (), 5, 3)
    dense = sensitivity.Measured("b", 0, 3, {5: 1.02, 8: 1.01, 30: 1.0}, float("nan"), {}, (), 30, 3)
    assert sensitivity.replayed(clear) == (5, 3) and sensitivity.replayed(dense) == (30, 3)
    assert sensitivity.moves([clear, dense], "EIGENVALUE_GAP", 0.1) == []
    # the clear bar 1 + GAP_GAIN x 0.3 = 1.6 moves with the tuned number: 1.5 no longer clears it
    moved = sensitivity.moves([clear, dense], "EIGENVALUE_GAP", 0.3)
    assert moved == [{"dataset": "a", "seed": 0, "from": [5, 3], "to": [30, None]}]
    assert sensitivity.moves([clear, dense], "GAP_GAIN", 6.0) == moved  # 1 + 6 x 0.1 likewise


def test_the_rule_check_fits_only_the_runs_its_rule_keys_move():
    check = load_experiment("rule_check")
    same = {"graph.n_neighbors": 30, "model.n_components": 4, "data.preprocess": ["svd_l2"]}
    before = [
        {"run": "a", "seed": 0, "settings": same},
        {"run": "b", "seed": 0, "settings": same},
        {"run": "c", "seed": 1, "settings": same},
    ]
    after = [
        {"run": "a", "seed": 0, "settings": same},
        {"run": "b", "seed": 0, "settings": {**same, "graph.n_neighbors": 10}},
        {"run": "c", "seed": 1, "settings": {**same, "data.preprocess": ["standard_l2"]}},
    ]
    replayable, other = check.moved_runs(before, after)
    assert [(old["run"], new["settings"]["graph.n_neighbors"]) for old, new in replayable] == [("b", 10)]
    assert [(row["run"], row["after"]["data.preprocess"]) for row in other] == [("c", ["standard_l2"])]
    assert check.overrides_for(after[1]["settings"]) == ["graph.n_neighbors=10", "model.n_components=4"]
    with pytest.raises(SystemExit, match="different runs"):
        check.moved_runs(before, after[:2])


def test_the_rule_check_scores_runs_refitted_on_each_tree_beside_the_others(tmp_path):
    """A run whose other settings move (a view left out) is fitted with each tree's defaults by
    ``refit``; ``fit`` reads both files and reports it with the settings that moved."""
    import argparse
    import json

    check = load_experiment("rule_check")
    other = [
        {
            "run": "c",
            "seed": 1,
            "before": {"graph.n_neighbors": 10, "data.unrelated_views": None},
            "after": {"graph.n_neighbors": 10, "data.unrelated_views": [2]},
        }
    ]
    (tmp_path / "before.json").write_text(json.dumps({"acc": {"c@1": [0.70, 0.75]}}))
    (tmp_path / "after.json").write_text(json.dumps({"acc": {"c@1": [0.80, 0.75]}}))
    args = argparse.Namespace(
        data_dir=str(tmp_path), refit_before=str(tmp_path / "before.json"), refit_after=str(tmp_path / "after.json")
    )
    rows = check.refitted_rows(other, args)
    assert rows == [
        {
            "run": "c",
            "seed": 1,
            "regime": "variants",
            "moved": {"data.unrelated_views": [None, [2]]},
            "before_acc": 0.70,
            "after_acc": 0.80,
            "bar": 0.75,
        }
    ]
    assert check.summary_by_regime(rows)["variants"]["rose_to_bar"] == 1
    assert (
        check.refitted_rows(other, argparse.Namespace(data_dir=str(tmp_path), refit_before=None, refit_after=None))
        == []
    )


def test_the_rule_check_summary_counts_the_bars_a_change_crosses():
    check = load_experiment("rule_check")
    rows = [
        {"regime": "suite", "before_acc": 0.80, "after_acc": 0.70, "bar": 0.75},
        {"regime": "suite", "before_acc": 0.60, "after_acc": 0.66, "bar": 0.65},
        {"regime": "cli", "before_acc": 0.90, "after_acc": 0.92, "bar": None},
    ]
    summary = check.summary_by_regime(rows)
    assert summary["suite"]["runs"] == 2 and summary["suite"]["fell_below_bar"] == 1
    assert summary["suite"]["rose_to_bar"] == 1 and summary["suite"]["largest_loss"] == pytest.approx(-0.10)
    assert summary["suite"]["mean_change"] == pytest.approx(-0.02)
    assert summary["cli"] == {
        "runs": 1,
        "mean_change": pytest.approx(0.02),
        "largest_loss": pytest.approx(0.02),
        "fell_below_bar": 0,
        "rose_to_bar": 0,
    }


@pytest.mark.slow
def test_a_run_fitted_with_its_resolved_rule_settings_set_is_the_default_fit(data_dir):
    check = load_experiment("rule_check")
    settings = check.resolve_estimator("WebKB", data_dir, 0)
    assert set(check.RULE_KEYS) <= set(settings)
    imposed, bar = check.fitted_acc("WebKB", 0, data_dir, check.overrides_for(settings))
    data, _ = check.load_named("WebKB", data_dir, 0)
    default = check.run_devsuite_dataset(data, check.regime_baselines(data_dir)["WebKB"], 0, [])
    assert imposed == default["ACC"] and bar == default["baseline"]["ACC"]


def test_the_rule_check_keeps_what_it_fitted_when_a_fit_fails_and_releases_programs(tmp_path, monkeypatch):
    """``fit`` writes its report after every run (``finished`` false until the last), so a check
    stopped part-way keeps its fitted runs; every fit releases JAX's compiled programs, even one
    that fails, since their memory maps otherwise accumulate over a long check."""
    import argparse
    import json

    check = load_experiment("rule_check")
    released = []
    monkeypatch.setattr(check, "release_compiled_programs", lambda: released.append(True))
    same = {"graph.n_neighbors": 30, "model.n_components": 4}
    before = [{"run": name, "seed": 0, "settings": same} for name in ("a", "b")]
    after = [{"run": name, "seed": 0, "settings": {**same, "model.n_components": 8}} for name in ("a", "b")]

    def fake_fit(run, seed, data_dir, overrides):
        if run == "b":
            raise MemoryError("cannot allocate memory")
        return (0.7 if "model.n_components=4" in overrides else 0.8), 0.75

    monkeypatch.setattr(check, "_fitted_acc", fake_fit)
    monkeypatch.setattr(check, "regime_of", lambda run, data_dir: "variants")
    for side, runs in (("before", before), ("after", after)):
        (tmp_path / f"{side}.json").write_text(json.dumps({"runs": runs}))
    out = tmp_path / "report.json"
    args = argparse.Namespace(
        data_dir=str(tmp_path),
        before=str(tmp_path / "before.json"),
        after=str(tmp_path / "after.json"),
        out=str(out),
        refit_before=None,
        refit_after=None,
    )
    with pytest.raises(MemoryError):
        check.fit_moved(args)
    report = json.loads(out.read_text())
    assert report["finished"] is False
    assert [(row["run"], row["before_acc"], row["after_acc"]) for row in report["runs"]] == [("a", 0.7, 0.8)]
    assert len(released) == 3  # a before, a after, and b's failed fit


def test_the_tie_report_counts_ties_at_the_last_neighbour_and_edges_one_list_lacks():
    ties = load_experiment("knn_ties")
    sq_dists = np.array([[1.0, 2.0, 2.0], [1.0, 2.0, 3.0]])  # row 0 ties at its 2nd neighbour
    assert ties.tie_share(sq_dists, 2) == 0.5
    assert ties.tie_share(sq_dists, 1) == 0.0
    host, jitted = np.array([[1, 2], [0, 2]]), np.array([[2, 1], [0, 3]])
    assert ties.edges_not_shared(host, jitted) == 1  # order within a list does not count
    # one-hot rows are all sqrt 2 apart: ranked by index whatever the feature order
    one_hot = np.eye(12, dtype=np.float32)
    lists = ties.batch_knn_lists(one_hot, 3)[1]
    assert ties.edges_moved_by_feature_order(one_hot, lists, seed=0) == 0.0
