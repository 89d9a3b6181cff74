"""The pipeline's clusters: k-means fitted once on an embedding (on one OpenMP thread) and each
new row's nearest centre."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits


def nearest_centre(embedding: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre (squared Euclidean, float64) per row: (n, k), (c, k) -> (n,) int64.

    A pure function of the embedding and the stored centres, so ``predict`` gives the same
    labels before and after pickling or ``save``/``load``, and ``labels_`` equals ``predict(X)``.
    """
    y = np.asarray(embedding, np.float64)
    c = np.asarray(centres, np.float64)
    d2 = np.sum(y * y, axis=1, keepdims=True) - 2.0 * y @ c.T + np.sum(c * c, axis=1)
    return np.argmin(d2, axis=1).astype(np.int64)


def kmeans_centres(embedding: np.ndarray, n_clusters: int, n_init: int, seed: int) -> tuple[np.ndarray, float]:
    """(centres (c, k) float32, inertia) of a seeded k-means on the training embedding (n, k)
    (:func:`kmeans_centres_and_labels`)."""
    _, centres, inertia = kmeans_centres_and_labels(embedding, n_clusters, n_init, seed)
    return centres, inertia


def kmeans_centres_and_labels(
    embedding: np.ndarray, n_clusters: int, n_init: int, seed: int, *, one_thread: bool = True
) -> tuple[np.ndarray, np.ndarray, float]:
    """(k-means labels (n,), centres (c, k) float32, inertia) of a seeded k-means on an embedding (n, k).

    ``one_thread``: on one OpenMP thread (the estimator's): the input is small, and scikit-learn's
    spinning OpenMP threads beside XLA's made k-means ~100x slower on a loaded 2-core machine
    (BUILD_NOTES.md). False: scikit-learn's threads (a run's test k-means; its centres' last bits
    depend on the thread count).
    """
    with threadpool_limits(limits=1 if one_thread else None, user_api="openmp"):
        kmeans = KMeans(n_clusters=n_clusters, random_state=seed, n_init=n_init).fit(embedding)
    return kmeans.labels_, kmeans.cluster_centers_.astype(np.float32), float(kmeans.inertia_)
