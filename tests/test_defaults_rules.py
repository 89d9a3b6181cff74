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
    assert sensitivity.moves([clear, dense], "CLEAR_EIGENGAP", 1.2) == []
    moved = sensitivity.moves([clear, dense], "CLEAR_EIGENGAP", 1.6)  # 1.5 no longer clears the bar
    assert moved == [{"dataset": "a", "seed": 0, "from": [5, 3], "to": [30, None]}]
