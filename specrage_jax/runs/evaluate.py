"""A run's test evaluation: k-means on the test embedding, the SVM trained on the training split,
the metrics by present views and the embedding's health (:func:`evaluate_state`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specrage_jax.api import fit_pipeline as pipeline
from specrage_jax.api.fit_pipeline import EVAL_SUBSAMPLE_STREAM, evaluation_rows, select_rows
from specrage_jax.config import ExperimentConfig
from specrage_jax.data.preprocess import with_left_out_views
from specrage_jax.evaluation.clusters import nearest_centre
from specrage_jax.evaluation.health import HealthReport
from specrage_jax.evaluation.metrics import accuracy_by_views, cluster_scores, svm_metrics
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.runs.prepare import PreparedSplits
from specrage_jax.validation import present_views


def split_clusters(splits: PreparedSplits) -> int:
    """The number of clusters of a run: the classes its labels name (0 .. largest label)."""
    return int(max(splits.train_labels.max(), splits.test_labels.max()) + 1)


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate_state` measured: the test metrics (JSON-ready), the test embedding
    (n_test, k) as ``embed`` returns it, the view weights (n_test, V), the k-means centres found
    on the training embedding (n_clusters, k: what ``predict`` of the saved model assigns to) and
    the embedding's health (:mod:`specrage_jax.evaluation.health`)."""

    metrics: dict[str, Any]
    y_test: np.ndarray
    alpha_test: np.ndarray
    centres: np.ndarray
    health: HealthReport


def evaluate_state(
    state: SpecRaGEState, splits: PreparedSplits, config: ExperimentConfig, *, seed: int, max_rows: int | None = None
) -> Evaluation:
    """Test metrics (k-means on the test embedding; SVM trained on train, scored on test) and the
    embedding's health (recorded under "health": orthogonality, spread, largest cluster, problems).

    k-means runs on every test row (the paper's evaluation). ``max_rows`` (streamed runs) bounds
    the SVM's training set to at most that many seeded random training rows (so only those are
    embedded); it still scores every test row. The row counts are then recorded in the metrics
    under "eval_rows". None (the default): every row, and no "eval_rows" entry.
    """
    batch = config.eval.embed_batch_size
    n_train, n_test = len(splits.train_labels), len(splits.test_labels)
    svm_rows = evaluation_rows(n_train, max_rows, seed=seed, stream=0)
    y_train, _ = embed(state, select_rows(splits.train, svm_rows), batch_size=batch)
    train_labels = splits.train_labels if svm_rows is None else splits.train_labels[svm_rows]
    test = pipeline.embed_rows(state, splits.test, config)
    y_test, alpha_test = test.embedding, with_left_out_views(test.view_weights, splits.scalers)
    kmeans_labels = splits.test_labels
    n_clusters = split_clusters(splits)
    # scikit-learn's threads, as a run's k-means has always run (its centres' last bits depend on them)
    clusters = pipeline.cluster(y_test, n_clusters, config, seed=seed, one_thread=False)
    predicted = clusters.labels
    # the saved model's predict assigns to centres of the training embedding, as the estimator's does
    centres = pipeline.cluster(y_train, n_clusters, config, seed=seed, one_thread=False).centres
    health = pipeline.health(test.raw, predicted, n_clusters, config)
    metrics = {
        "kmeans": cluster_scores(kmeans_labels, predicted),
        "kmeans_training_centres": cluster_scores(kmeans_labels, nearest_centre(y_test, centres)),
        "svm": svm_metrics(y_train, train_labels, y_test, splits.test_labels, seed=seed),
        "orthogonality_error": health.orthogonality_error,
        "mean_view_weights": [float(w) for w in alpha_test.mean(axis=0)],
        "health": health.as_dict(),
    }
    test_present = present_views(splits.test)
    if not test_present.all():  # views missing: how each group of test samples fares
        metrics["kmeans_by_views"] = accuracy_by_views(kmeans_labels, predicted, test_present)
    if max_rows is not None:
        metrics["eval_rows"] = {
            "max_rows": int(max_rows),
            "kmeans_test_rows": len(kmeans_labels),
            "svm_train_rows": len(train_labels),
            "svm_test_rows": n_test,
            "subsample_seed": [seed, EVAL_SUBSAMPLE_STREAM],
        }
    return Evaluation(metrics=metrics, y_test=y_test, alpha_test=alpha_test, centres=centres, health=health)
