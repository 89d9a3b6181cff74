"""Tests for specrage_jax.evaluation.metrics: clustering accuracy, k-means and SVM metrics, seed summaries."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specrage_jax.evaluation.metrics import (
    accuracy_by_views,
    clustering_accuracy,
    kmeans_metrics,
    matched_samples,
    summarize_seeds,
    svm_metrics,
)


def brute_force_accuracy(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """Max over every one-to-one map of clusters to classes of the fraction of samples right."""
    classes, clusters = np.unique(labels_true), np.unique(labels_pred)
    best = 0
    if clusters.size <= classes.size:
        maps = (dict(zip(clusters, chosen)) for chosen in itertools.permutations(classes, clusters.size))
    else:
        maps = (dict(zip(chosen, classes)) for chosen in itertools.permutations(clusters, classes.size))
    for mapping in maps:
        right = sum(mapping.get(p) == t for p, t in zip(labels_pred, labels_true))
        best = max(best, right)
    return best / labels_true.size


def test_clustering_accuracy_is_one_for_a_relabelling():
    labels = np.random.default_rng(0).integers(0, 5, size=200)
    permutation = np.array([3, 0, 4, 1, 2])
    assert clustering_accuracy(labels, permutation[labels]) == 1.0
    assert clustering_accuracy(labels, permutation[labels] + 10) == 1.0


@settings(max_examples=60, deadline=None)
@given(
    k_true=st.integers(1, 4),
    k_pred=st.integers(1, 4),
    n=st.integers(1, 30),
    seed=st.integers(0, 2**31 - 1),
)
def test_clustering_accuracy_matches_brute_force(k_true, k_pred, n, seed):
    rng = np.random.default_rng(seed)
    labels_true, labels_pred = rng.integers(0, k_true, size=n), rng.integers(0, k_pred, size=n)
    assert clustering_accuracy(labels_true, labels_pred) == pytest.approx(
        brute_force_accuracy(labels_true, labels_pred)
    )


def test_clustering_accuracy_with_more_or_fewer_clusters_than_classes():
    labels_true = np.array([0, 0, 0, 1, 1, 1])
    # Three clusters for two classes: cluster 2 has nobody to map to.
    assert clustering_accuracy(labels_true, np.array([0, 0, 2, 1, 1, 1])) == pytest.approx(5 / 6)
    # One cluster for two classes: only one class can be right.
    assert clustering_accuracy(labels_true, np.zeros(6, dtype=int)) == pytest.approx(0.5)
    assert isinstance(clustering_accuracy(labels_true, labels_true), float)


@settings(max_examples=60, deadline=None)
@given(k_true=st.integers(1, 4), k_pred=st.integers(1, 5), n=st.integers(1, 30), seed=st.integers(0, 2**31 - 1))
def test_the_matched_samples_are_the_ones_clustering_accuracy_counts(k_true, k_pred, n, seed):
    rng = np.random.default_rng(seed)
    labels_true, labels_pred = rng.integers(0, k_true, size=n), rng.integers(0, k_pred, size=n)
    right = matched_samples(labels_true, labels_pred)
    assert right.shape == (n,) and right.dtype == np.bool_
    assert np.mean(right) == clustering_accuracy(labels_true, labels_pred)
    # the (cluster, class) pairs of the samples counted right form a one-to-one map
    pairs = set(zip(labels_pred[right].tolist(), labels_true[right].tolist()))
    assert len(pairs) == len({c for c, _ in pairs}) == len({t for _, t in pairs})


def test_accuracy_by_views_scores_each_group_under_one_map_of_clusters_to_classes():
    labels = np.array([0, 0, 1, 1, 2, 2, 2])
    clusters = np.array([5, 5, 7, 7, 7, 9, 9])  # 5 -> 0, 7 -> 1, 9 -> 2: sample 4 is wrong
    present = np.array([[1, 1], [1, 0], [1, 1], [0, 1], [1, 0], [1, 1], [0, 1]], bool)
    scores = accuracy_by_views(labels, clusters, present)
    assert list(scores) == ["views 0+1", "views 0", "views 1"]
    assert scores["views 0+1"] == {"n": 3, "acc": 1.0}
    assert scores["views 0"] == {"n": 2, "acc": 0.5}
    assert scores["views 1"] == {"n": 2, "acc": 1.0}
    # the group means weighted by their sizes are the overall ACC
    overall = sum(g["n"] * g["acc"] for g in scores.values()) / len(labels)
    assert overall == pytest.approx(clustering_accuracy(labels, clusters))
    with pytest.raises(ValueError, match="present must be"):
        accuracy_by_views(labels, clusters, present[:-1])


def separated_gaussians(n_per_class: int, n_classes: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = 20.0 * np.eye(n_classes, dim)
    labels = np.repeat(np.arange(n_classes), n_per_class)
    return centers[labels] + rng.normal(size=(labels.size, dim)), labels


def test_kmeans_metrics_on_separated_blobs_are_perfect():
    x, labels = separated_gaussians(100, 4, 6, seed=0)
    metrics = kmeans_metrics(x, labels, n_clusters=4, seed=0)
    assert set(metrics) == {"acc", "nmi", "ari"}
    assert metrics["acc"] == 1.0
    assert metrics["nmi"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["ari"] == pytest.approx(1.0, abs=1e-6)
    assert all(type(value) is float for value in metrics.values())


def test_kmeans_metrics_on_noise_are_low():
    rng = np.random.default_rng(1)
    metrics = kmeans_metrics(rng.normal(size=(400, 3)), rng.integers(0, 4, 400), n_clusters=4, seed=0, n_init=2)
    assert metrics["acc"] < 0.4 and metrics["nmi"] < 0.1 and abs(metrics["ari"]) < 0.05


def test_svm_metrics_on_separable_data_are_perfect():
    x, labels = separated_gaussians(150, 3, 5, seed=2)
    order = np.random.default_rng(0).permutation(labels.size)
    train, test = order[:300], order[300:]
    metrics = svm_metrics(x[train], labels[train], x[test], labels[test], seed=0)
    assert set(metrics) == {"acc", "f1", "precision"}
    assert metrics["acc"] == 1.0 and metrics["f1"] == 1.0 and metrics["precision"] == 1.0


def test_svm_metrics_on_random_labels_are_near_chance():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, 8))
    labels = rng.integers(0, 4, size=3000)
    metrics = svm_metrics(x[:2000], labels[:2000], x[2000:], labels[2000:], seed=0)
    assert metrics["acc"] == pytest.approx(0.25, abs=0.06)
    assert metrics["f1"] < 0.35


def test_svm_metrics_do_not_depend_on_feature_units():
    # Standardization makes the SVM blind to per-feature scale and offset.
    rng = np.random.default_rng(6)
    x = rng.normal(size=(600, 4))
    labels = (x[:, 0] + x[:, 1] + 0.8 * rng.normal(size=600) > 0).astype(int)
    rescaled = x * np.array([1e3, 1e-3, 1.0, 50.0]) + np.array([0.0, 7.0, -3.0, 1e2])
    plain = svm_metrics(x[:400], labels[:400], x[400:], labels[400:], seed=0)
    scaled = svm_metrics(rescaled[:400], labels[:400], rescaled[400:], labels[400:], seed=0)
    assert plain["acc"] > 0.75
    assert scaled == pytest.approx(plain, abs=1e-9)


def test_svm_scaler_is_fitted_on_the_training_embedding():
    # A test set of one class only: a scaler refitted on it would center it on the decision boundary.
    x, labels = separated_gaussians(100, 2, 3, seed=5)
    test = (labels == 1) & (np.arange(labels.size) % 2 == 1)
    metrics = svm_metrics(x[::2], labels[::2], x[test], labels[test], seed=0)
    assert metrics["acc"] == 1.0


def test_nan_embedding_raises():
    x, labels = separated_gaussians(20, 2, 3, seed=0)
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="embedding holds NaN"):
        kmeans_metrics(x, labels, n_clusters=2, seed=0)
    clean, _ = separated_gaussians(20, 2, 3, seed=0)
    with pytest.raises(ValueError, match="test_embedding holds NaN"):
        svm_metrics(clean, labels, x, labels, seed=0)


@pytest.mark.parametrize(
    "embedding, labels, message",
    [
        (np.zeros(10), np.zeros(10), "2-D"),
        (np.zeros((10, 2)), np.zeros(9), "9 labels for 10 samples"),
        (np.full((10, 2), np.inf), np.zeros(10), "infinite"),
    ],
)
def test_bad_embeddings_raise(embedding, labels, message):
    with pytest.raises(ValueError, match=message):
        kmeans_metrics(embedding, labels, n_clusters=2, seed=0)


def test_summarize_seeds_gives_mean_and_std_of_nested_metrics():
    results = [
        {"kmeans": {"acc": 0.9, "nmi": 0.8}, "svm": {"acc": 0.95}, "epochs": 10},
        {"kmeans": {"acc": 0.7, "nmi": 0.6}, "svm": {"acc": 0.85}, "epochs": 20},
        {"kmeans": {"acc": 0.8, "nmi": 0.4}, "svm": {"acc": 0.90}, "epochs": 30},
    ]
    summary = summarize_seeds(results)
    assert summary["kmeans"]["acc"]["mean"] == pytest.approx(0.8)
    assert summary["kmeans"]["acc"]["std"] == pytest.approx(np.std([0.9, 0.7, 0.8]))
    assert summary["kmeans"]["nmi"]["mean"] == pytest.approx(0.6)
    assert summary["svm"]["acc"]["std"] == pytest.approx(np.std([0.95, 0.85, 0.90]))
    assert summary["epochs"] == {"mean": 20.0, "std": pytest.approx(np.std([10, 20, 30]))}


def test_summarize_seeds_rejects_mismatched_results():
    with pytest.raises(ValueError, match="keys"):
        summarize_seeds([{"acc": 1.0}, {"nmi": 1.0}])
    with pytest.raises(ValueError, match="no results"):
        summarize_seeds([])
