"""What `specrage train` prints after a run: the metrics table."""

from __future__ import annotations

from specrage_jax.cli.output import MAX_GROUP_ROWS, metrics_table


def run_result(by_views: dict | None = None) -> dict:
    test = {
        "kmeans": {"acc": 0.9, "nmi": 0.8, "ari": 0.7},
        "svm": {"acc": 0.95, "f1": 0.94, "precision": 0.93},
        "mean_view_weights": [0.5, 0.5],
        "health": {"problems": []},
    }
    if by_views is not None:
        test["kmeans_by_views"] = by_views
    return {
        "dataset": "toy",
        "seed": 0,
        "n_samples": {"train": 80, "val": 10, "test": 10},
        "test": test,
        "timing": {"train_seconds": 1.0},
        "training": {"steps": 5},
    }


def test_the_table_shows_each_group_of_views_only_where_test_samples_miss_views():
    complete = metrics_table(run_result())
    assert "ACC views" not in complete
    table = metrics_table(run_result({"views 0+1": {"n": 6, "acc": 1.0}, "views 0": {"n": 4, "acc": 0.75}}))
    lines = table.splitlines()
    ari = next(i for i, line in enumerate(lines) if line.startswith("k-means ARI"))
    assert lines[ari + 1].split() == ["ACC", "views", "0+1", "(6)", "100.00%"]
    assert lines[ari + 2].split() == ["ACC", "views", "0", "(4)", "75.00%"]
    assert lines[ari + 3].startswith("SVM accuracy")


def test_the_table_keeps_the_largest_groups_of_many_views_in_their_order():
    sizes = [3, 50, 1, 40, 2, 30, 20, 10, 5]  # nine groups of samples
    by_views = {f"views {i}": {"n": n, "acc": 0.5} for i, n in enumerate(sizes)}
    shown = [line.split()[2] for line in metrics_table(run_result(by_views)).splitlines() if "ACC views" in line]
    largest = sorted(range(len(sizes)), key=lambda i: -sizes[i])[:MAX_GROUP_ROWS]
    assert shown == [str(i) for i in sorted(largest)]


def test_the_table_says_when_the_svm_trained_on_a_sample_of_the_training_rows():
    assert "seeded training rows" not in metrics_table(run_result())
    sampled = run_result()
    sampled["test"]["eval_rows"] = {"svm_train_rows": 50, "kmeans_test_rows": 10}
    lines = metrics_table(sampled).splitlines()
    svm = next(i for i, line in enumerate(lines) if line.startswith("SVM macro precision"))
    assert lines[svm + 1] == "(the SVM trained on 50 seeded training rows of 80)"
