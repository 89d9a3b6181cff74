"""The figure scripts (experiments/weight_histogram.py, robustness_default.py, view_forms.py, tsne_snapshots.py),
each run in-process on a tiny configuration: the JSON they write and the PNG beside it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.experiment_scripts import load_experiment

TINY = ["--set", "model.view_hidden=32,32", "--set", "model.weighting_hidden=16", "--set", "train.batch_size=256"]


def load_script(name: str):
    return load_experiment(name)


@pytest.mark.slow  # runs the figure script end to end
def test_weight_histogram_writes_per_view_clean_and_contaminated_weights(tmp_path):
    module = load_script("weight_histogram")
    out = tmp_path / "w.json"
    module.main(
        ["--n-samples", "400", "--set", "train.epochs=2", "--set", "train.steps_per_epoch=5", *TINY, "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["n_samples"] == 400 and result["fraction"] == 0.2 and result["epochs"] == 2
    assert result["weights_in_affinity"] is False and result["weight_entropy"] > 0  # FIGURE_OVERRIDES
    assert len(result["views"]) == 2 and len(result["bins"]) == 41
    n_test = 80
    for entry in result["views"]:
        clean, bad = entry["clean"], entry["contaminated"]
        assert 0 < bad["n"] < n_test and 0 < clean["n"] < n_test
        assert sum(clean["histogram"]) == clean["n"] and sum(bad["histogram"]) == bad["n"]
        assert 0.0 <= clean["mean"] <= 1.0 and 0.0 <= bad["mean"] <= 1.0
    means = [e["clean"]["mean"] for e in result["views"]]
    assert sum(means) == pytest.approx(1.0, abs=1e-5)  # clean samples: the two views' weights sum to 1
    assert 0.0 <= result["test_kmeans_acc"] <= 1.0 and isinstance(result["claim_holds"], bool)
    assert (tmp_path / "w.png").stat().st_size > 1000


@pytest.mark.slow  # a default-estimator fit; the default suite is at its time budget
def test_weight_histogram_of_the_default_estimator_and_of_one_contaminated_view(tmp_path):
    """--default-estimator fits SpecRaGE() at its data-aware defaults (weights free: T 1, alpha in the
    fusion only); --outlier-view 0 puts every outlier into view 0, so no sample has view 1 contaminated."""
    module = load_script("weight_histogram")
    out = tmp_path / "d.json"
    module.main(
        ["--n-samples", "400", "--default-estimator", "--outlier-view", "0", "--set", "train.epochs=2"]
        + ["--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["estimator"] == "default" and result["outlier_view"] == 0 and result["epochs"] == 2
    assert (
        result["temperature"] == 1.0
        and result["weights_in_affinity"] is False
        and result["overrides"] == ["train.epochs=2"]
    )
    view0, view1 = result["views"]
    assert view0["contaminated"]["n"] > 0 and view1["contaminated"]["n"] == 0
    assert view0["clean"]["n"] + view0["contaminated"]["n"] == 80  # the 20 % test rows of 400
    assert 0.0 <= result["test_kmeans_acc"] <= 1.0 and (tmp_path / "d.png").stat().st_size > 1000


def test_robustness_default_losses_are_against_the_same_seeds_clean_run():
    """summarize: each contaminated run's loss is measured against its own seed's clean run, for
    both protocols; the weights average the seeds' group means."""
    module = load_script("robustness_default")

    def run(kind, seed, acc, test_acc, clean_w, bad_w):
        group = {"n": 3, "mean": clean_w, "histogram": [3]}
        views = [{"clean": group, "contaminated": {"n": 2 if kind != "clean" else 0, "mean": bad_w, "histogram": [2]}}]
        return {
            "kind": kind,
            "seed": seed,
            "predict": {"acc": acc},
            "kmeans_on_test": {"acc": test_acc},
            "views": views,
        }

    runs = [
        run("clean", 0, 0.8, 0.9, 0.5, None),
        run("noise", 0, 0.6, 0.9, 0.6, 0.2),
        run("clean", 1, 1.0, 0.5, 0.5, None),
        run("noise", 1, 1.0, 0.45, 0.4, 0.4),
    ]
    summary = module.summarize(runs, ["clean", "noise"])
    noise = summary["noise"]
    assert noise["predict"]["per_seed"] == pytest.approx([25.0, 0.0])
    assert noise["predict"]["loss_percent_mean"] == pytest.approx(12.5)
    assert noise["kmeans_on_test"]["per_seed"] == pytest.approx([0.0, 10.0])
    assert noise["weights"] == [{"clean": pytest.approx(0.5), "contaminated": pytest.approx(0.3)}]
    assert "loss_percent_mean" not in summary["clean"]["predict"] and summary["clean"]["n_seeds"] == 2


@pytest.mark.slow  # three default-estimator fits
def test_robustness_default_writes_runs_summary_and_figure(tmp_path):
    module = load_script("robustness_default")
    out = tmp_path / "r.json"
    module.main(
        ["--dataset", "blobs", "--seeds", "0", "--fraction", "0.2", "--set", "train.epochs=2", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert [r["kind"] for r in result["runs"]] == ["clean", "outliers", "noise"]
    clean, outliers, noise = result["runs"]
    assert clean["views"][0]["contaminated"]["n"] == 0
    assert all(outliers["views"][v]["contaminated"]["n"] > 0 for v in range(2))  # every view, by default
    assert sum(noise["views"][v]["contaminated"]["n"] for v in range(2)) > 0
    assert set(result["summary"]["noise"]["predict"]) >= {"acc_mean", "loss_percent_mean", "per_seed"}
    assert (tmp_path / "r.png").stat().st_size > 1000


def test_weight_summary_and_claim_on_a_hand_made_case():
    module = load_script("weight_histogram")
    alpha = np.array([[0.5, 0.5], [0.1, 0.9], [0.8, 0.2], [0.5, 0.5]])
    mask = np.array([[False, False], [True, False], [False, True], [False, False]])
    views = module.weight_summary(alpha, mask)
    assert views[0]["clean"]["mean"] == 0.5 and views[0]["contaminated"]["mean"] == pytest.approx(0.1)
    assert views[1]["contaminated"]["mean"] == pytest.approx(0.2)
    assert views[0]["other_view_contaminated"]["mean"] == pytest.approx(0.8)
    assert views[0]["only_this_view_contaminated"]["n"] == 1
    both = module.weight_summary(np.array([[0.3, 0.7]]), np.array([[True, True]]))
    assert both[0]["contaminated"]["n"] == 1 and both[0]["only_this_view_contaminated"]["n"] == 0
    assert not module.claim_holds(views)  # 0.2 is not below 0.2
    assert module.claim_holds(module.weight_summary(np.array([[0.5, 0.5], [0.1, 0.9], [0.85, 0.15]]), mask[:3]))


def test_inside_clean_data_tells_outliers_in_the_support_from_those_off_it():
    module = load_script("weight_histogram")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=(200, 2)) * 0.1, [[0.01, 0.0], [5.0, 5.0]]])
    clean = np.r_[np.ones(200, bool), False, False]
    inside = module.inside_clean_data(x, clean, np.array([0, 200, 201]))
    assert inside.tolist() == [True, True, False]  # a clean row, an outlier in the blob, one far off
    views = module.weight_summary(
        np.array([[0.5, 0.5], [0.4, 0.6], [0.05, 0.95]]),
        np.array([[False, False], [True, False], [True, False]]),
        np.array([[False, False], [True, False], [False, False]]),
    )
    assert views[0]["only_this_view_off_data"]["n"] == 1
    assert views[0]["only_this_view_off_data"]["mean"] == pytest.approx(0.05)


@pytest.mark.slow  # runs the figure script end to end
def test_view_forms_writes_symmetric_forms_in_three_bases(tmp_path):
    module = load_script("view_forms")
    out = tmp_path / "v.json"
    module.main(["--dataset", "digits", "--set", "train.epochs=2", *TINY, "--max-reference", "120", "--out", str(out)])
    result = json.loads(out.read_text())
    k = result["k"]
    assert result["reference_rows"] == 120 and result["epochs"] == 2 and 0 <= result["grassmann_sq"] <= k
    assert result["reference_n_neighbors"] == round(10 * 120 / 256)  # density-matched: l 10 of 256-row batches
    for basis in ("network", "ritz", "exact"):
        forms = np.asarray(result[basis]["forms"])
        assert forms.shape == (2, k, k)
        np.testing.assert_allclose(forms, np.transpose(forms, (0, 2, 1)), atol=1e-8)
        assert all(0.0 <= r <= 1.0 for r in result[basis]["off_diagonal_ratio"])
    # the Ritz and exact bases diagonalize the sum of the views' forms exactly (digits, not blobs:
    # blobs' clusters are disconnected in the graph, so its bottom eigenvalues and forms are ~0)
    for basis in ("ritz", "exact"):
        total = np.asarray(result[basis]["forms"]).sum(axis=0)
        assert np.abs(np.diag(total)).max() > 1e-6
        np.testing.assert_allclose(total - np.diag(np.diag(total)), 0.0, atol=1e-8 * np.abs(total).max())
    assert (tmp_path / "v.png").stat().st_size > 1000


@pytest.mark.slow  # runs the figure script end to end (t-SNE of every snapshot)
def test_tsne_snapshots_writes_the_chosen_epochs(tmp_path):
    module = load_script("tsne_snapshots")
    out = tmp_path / "t.json"
    module.main(["--dataset", "blobs", "--epochs", "1,2,9", "--set", "train.epochs=2", *TINY, "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["epochs"] == [1, 2] and result["missed_epochs"] == [9] and result["epochs_trained"] == 2
    n = result["val_rows"]
    assert len(result["labels"]) == n
    for snap in result["snapshots"]:
        assert snap["method"] == "t-SNE" and np.asarray(snap["xy"]).shape == (n, 2)
        assert 0.0 <= snap["kmeans_acc"] <= 1.0
    assert (tmp_path / "t.png").stat().st_size > 1000
    with pytest.raises(ValueError):
        module.parse_epochs("0,3")
