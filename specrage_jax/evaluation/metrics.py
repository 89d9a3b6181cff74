"""Downstream evaluation of embeddings: k-means clustering and a linear SVM (NumPy / scikit-learn)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.metrics import (
    accuracy_score,
    adjusted_rand_score,
    f1_score,
    normalized_mutual_info_score,
    precision_score,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from specrage_jax.validation import check_label_shape

SVM_MAX_ITER = 20_000


def _check_embedding(embedding: np.ndarray, labels: np.ndarray, *, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Checks embedding (n, k) is finite and 2-D, and labels (n,) match it; returns both as arrays."""
    embedding = np.asarray(embedding)
    if embedding.ndim != 2 or embedding.shape[0] == 0 or embedding.shape[1] == 0:
        raise ValueError(f"{what} must be a non-empty 2-D array (n_samples, k), got shape {embedding.shape}")
    if not np.issubdtype(embedding.dtype, np.number):
        raise ValueError(f"{what} must be numeric, got dtype {embedding.dtype}")
    n_nan = int(np.isnan(embedding).sum())
    if n_nan:
        raise ValueError(f"{what} holds NaN in {n_nan} entries; the model diverged or its input had NaN")
    if not np.all(np.isfinite(embedding)):
        raise ValueError(f"{what} holds infinite values; the model diverged")
    labels = check_label_shape(labels, embedding.shape[0], what=f"labels for {what}")
    return embedding, labels


def clustering_accuracy(labels_true: np.ndarray, labels_pred: np.ndarray) -> float:
    """ACC: the fraction of samples right under the best one-to-one map of clusters to classes.

    labels_true (n,), labels_pred (n,); the number of clusters may differ from the number of
    classes (samples in unmatched clusters count as wrong).
    """
    return float(np.mean(matched_samples(labels_true, labels_pred)))


def matched_samples(labels_true: np.ndarray, labels_pred: np.ndarray) -> np.ndarray:
    """(n,) bool: whether each sample's cluster maps to its class under the best one-to-one map
    of clusters to classes (the map :func:`clustering_accuracy` scores)."""
    labels_true = np.asarray(labels_true)
    if labels_true.ndim != 1 or labels_true.shape[0] == 0:
        raise ValueError(f"labels_true must be a non-empty 1-D array, got shape {labels_true.shape}")
    labels_pred = check_label_shape(labels_pred, labels_true.shape[0], what="labels_pred")
    classes, class_index = np.unique(labels_true, return_inverse=True)
    clusters, cluster_index = np.unique(labels_pred, return_inverse=True)
    contingency = np.zeros((classes.size, clusters.size), dtype=np.int64)
    np.add.at(contingency, (class_index, cluster_index), 1)
    rows, cols = linear_sum_assignment(contingency, maximize=True)
    class_of_cluster = np.full(clusters.size, -1)
    class_of_cluster[cols] = rows
    return class_of_cluster[cluster_index] == class_index


def view_group_name(has_view: Sequence[bool]) -> str:
    """'views 0+2' for a sample that has views 0 and 2 (its row of a presence mask)."""
    return "views " + "+".join(str(v) for v, has in enumerate(has_view) if has)


def view_groups(present: np.ndarray) -> list[tuple[bool, ...]]:
    """The distinct rows of a presence mask (n, V), groups with more views first, then by their views."""
    distinct = {tuple(bool(b) for b in row) for row in np.asarray(present, bool)}
    return sorted(distinct, key=lambda group: (-sum(group), np.flatnonzero(group).tolist()))


def accuracy_by_views(labels_true: np.ndarray, labels_pred: np.ndarray, present: np.ndarray) -> dict[str, Any]:
    """ACC of each group of samples that have the same views, under the one map of clusters to
    classes that scores all of them: {view_group_name: {"n": samples, "acc": ACC}}, groups with
    more views first. present: (n, V) bool."""
    right = matched_samples(labels_true, labels_pred)
    present = np.asarray(present, bool)
    if present.ndim != 2 or present.shape[0] != right.shape[0]:
        raise ValueError(f"present must be (n_samples, n_views) = ({right.shape[0]}, V), got shape {present.shape}")
    scores: dict[str, Any] = {}
    for group in view_groups(present):
        rows = np.all(present == np.asarray(group), axis=1)
        scores[view_group_name(group)] = {"n": int(rows.sum()), "acc": float(right[rows].mean())}
    return scores


def kmeans_clusters(
    embedding: np.ndarray, *, n_clusters: int, seed: int, n_init: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """k-means on embedding (n, k): (cluster labels (n,), centres (n_clusters, k))."""
    embedding = np.asarray(embedding)
    if not 1 <= n_clusters <= embedding.shape[0]:
        raise ValueError(f"n_clusters must be in 1..{embedding.shape[0]} (the number of samples), got {n_clusters}")
    kmeans = KMeans(n_clusters=n_clusters, random_state=seed, n_init=n_init).fit(embedding)
    return kmeans.labels_, kmeans.cluster_centers_


def cluster_scores(labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Clusters predicted (n,) scored against labels (n,): {"acc", "nmi", "ari"}."""
    return {
        "acc": clustering_accuracy(labels, predicted),
        "nmi": float(normalized_mutual_info_score(labels, predicted, average_method="arithmetic")),
        "ari": float(adjusted_rand_score(labels, predicted)),
    }


def kmeans_metrics(
    embedding: np.ndarray, labels: np.ndarray, *, n_clusters: int, seed: int, n_init: int = 10
) -> dict[str, float]:
    """k-means on embedding (n, k) scored against labels (n,): {"acc", "nmi", "ari"}."""
    embedding, labels = _check_embedding(embedding, labels, what="embedding")
    predicted, _ = kmeans_clusters(embedding, n_clusters=n_clusters, seed=seed, n_init=n_init)
    return cluster_scores(labels, predicted)


def svm_metrics(
    train_embedding: np.ndarray,
    train_labels: np.ndarray,
    test_embedding: np.ndarray,
    test_labels: np.ndarray,
    *,
    seed: int,
) -> dict[str, float]:
    """A linear SVM on standardized train embedding (n_tr, k), scored on test (n_te, k).

    Returns {"acc", "f1", "precision"}, F1 and precision macro-averaged over classes.
    """
    train_embedding, train_labels = _check_embedding(train_embedding, train_labels, what="train_embedding")
    test_embedding, test_labels = _check_embedding(test_embedding, test_labels, what="test_embedding")
    if train_embedding.shape[1] != test_embedding.shape[1]:
        raise ValueError(
            f"train_embedding has {train_embedding.shape[1]} columns, test_embedding {test_embedding.shape[1]}"
        )
    if np.unique(train_labels).size < 2:
        raise ValueError("train_labels hold a single class; a classifier needs at least two")
    # The scaler sits in the pipeline so it is fitted on the training embedding only.
    classifier = make_pipeline(StandardScaler(), LinearSVC(dual="auto", max_iter=SVM_MAX_ITER, random_state=seed))
    predicted = classifier.fit(train_embedding, train_labels).predict(test_embedding)
    return {
        "acc": float(accuracy_score(test_labels, predicted)),
        "f1": float(f1_score(test_labels, predicted, average="macro", zero_division=0)),
        "precision": float(precision_score(test_labels, predicted, average="macro", zero_division=0)),
    }


def summarize_seeds(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-metric {"mean", "std"} (population std, ddof=0) over runs with the same nested keys.

    E.g. [{"kmeans": {"acc": 0.9}}, {"kmeans": {"acc": 0.8}}] -> {"kmeans": {"acc": {"mean": 0.85, "std": 0.05}}}.
    """
    if len(results) == 0:
        raise ValueError("summarize_seeds: no results to summarize")
    if not all(isinstance(result, Mapping) for result in results):
        raise ValueError("summarize_seeds: every result must be a dict of metrics")
    first = results[0]
    for i, result in enumerate(results):
        if set(result) != set(first):
            raise ValueError(f"summarize_seeds: result {i} has keys {sorted(result)}, result 0 has {sorted(first)}")
    summary: dict[str, Any] = {}
    for key, value in first.items():
        nested = [isinstance(result[key], Mapping) for result in results]
        if any(nested) and not all(nested):
            raise ValueError(f"summarize_seeds: {key!r} is a dict in some results and a number in others")
        if isinstance(value, Mapping):
            summary[key] = summarize_seeds([result[key] for result in results])
        else:
            values = np.asarray([result[key] for result in results], dtype=np.float64)
            summary[key] = {"mean": float(values.mean()), "std": float(values.std())}
    return summary
