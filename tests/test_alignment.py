"""The alignment-based baseline (per-view SpectralNets + MSE alignment, concatenated)."""

from __future__ import annotations

import numpy as np
import pytest

from specrage_jax.data import make_blobs_views
from specrage_jax.evaluation.alignment import AlignmentConfig, train_alignment
from specrage_jax.evaluation.metrics import kmeans_metrics

N_CLUSTERS = 5
SMALL = dict(hidden=(64, 64), n_components=N_CLUSTERS, n_neighbors=10, epochs=10, batch_size=256)


@pytest.fixture(scope="module")
def blobs():
    return make_blobs_views(800, N_CLUSTERS, seed=0)


@pytest.fixture(scope="module")
def models(blobs):
    return {
        lam: train_alignment(blobs.views, AlignmentConfig(alignment_weight=lam, **SMALL), seed=0) for lam in (1.0, 0.0)
    }


def mean_sq_gap(model, views) -> float:
    y1, y2 = model.view_embeddings(views)
    return float(np.mean(np.sum((y1 - y2) ** 2, axis=1)))


def test_transform_concatenates_orthonormal_view_embeddings_and_clusters(blobs, models):
    model = models[1.0]
    embedding = model.transform(blobs.views)
    assert embedding.shape == (800, 2 * N_CLUSTERS)
    assert np.all(np.isfinite(embedding))
    assert np.all(np.isfinite(model.losses))
    for y in model.view_embeddings(blobs.views):  # R_v^-1 fitted on the training set: Y^T Y = n I
        np.testing.assert_allclose(y.T @ y / y.shape[0], np.eye(N_CLUSTERS), atol=1e-3)
    assert kmeans_metrics(embedding, blobs.labels, n_clusters=N_CLUSTERS, seed=0)["acc"] >= 0.9


def test_alignment_term_pulls_view_embeddings_together(blobs, models):
    aligned, independent = mean_sq_gap(models[1.0], blobs.views), mean_sq_gap(models[0.0], blobs.views)
    assert aligned < 0.5 * independent, (aligned, independent)


def test_bad_inputs_name_the_view(blobs, models):
    model = models[1.0]
    x1, x2 = blobs.views
    with pytest.raises(ValueError, match="expected 2 views, got 1"):
        model.transform([x1])
    with pytest.raises(ValueError, match="view 1 has 3 features"):
        model.transform([x1, np.zeros((800, 3))])
    with pytest.raises(ValueError, match="view 1 has 10 rows"):
        model.transform([x1, x2[:10]])
    bad = x2.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="view 1 contains NaN"):
        model.transform([x1, bad])
    with pytest.raises(ValueError, match="at least 2 views"):
        train_alignment([x1], AlignmentConfig(**SMALL), seed=0)
    with pytest.raises(ValueError, match="n_neighbors"):
        train_alignment([x1[:8], x2[:8]], AlignmentConfig(**SMALL), seed=0)
    with pytest.raises(ValueError, match="alignment_weight"):
        AlignmentConfig(**dict(SMALL, alignment_weight=-1.0))
