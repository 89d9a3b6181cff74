"""The training loop's contract: input checks, batch streams, the schedule's effect."""

from __future__ import annotations

import numpy as np
import pytest

from specrage_jax.config import OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.training.batches import batch_indices, effective_batch_size
from specrage_jax.training.loop import estimate_view_scales, train_loop
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))
GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch")


def clustered_views(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    x = centers[labels] + rng.normal(size=(n, 2))
    return [x.astype(np.float32), (x @ np.array([[0.0, -1.0], [1.0, 0.0]])).astype(np.float32)]


def small_state():
    return create_state([2, 2], MODEL, GRAPH, OrthoConfig(), learning_rate=1e-3, seed=0)


def test_fit_names_the_view_with_nan():
    train, val = clustered_views(60, 0), clustered_views(20, 1)
    train[1][7, 0] = np.nan
    with pytest.raises(ValueError, match="train_views: view 1 .*NaN"):
        train_loop(small_state(), train, val, fixed_train(epochs=1, progress=False), seed=0)


def test_fit_names_the_view_with_wrong_width():
    train, val = clustered_views(60, 0), clustered_views(20, 1)
    val[0] = np.zeros((20, 3), np.float32)
    with pytest.raises(ValueError, match="val_views: view 0 has 3 features"):
        train_loop(small_state(), train, val, fixed_train(epochs=1, progress=False), seed=0)


def test_batch_indices_cover_every_sample_once_per_pass():
    idx = batch_indices(10, 4, 5, np.random.default_rng(0))
    assert idx.shape == (5, 4)
    assert sorted(idx.reshape(-1)[:10].tolist()) == list(range(10))
    assert all(len(set(row)) == 4 for row in idx.tolist())


def test_effective_batch_size_refuses_a_graph_larger_than_the_data():
    assert effective_batch_size(100, 1024, 30) == 100
    with pytest.raises(ValueError, match="n_neighbors"):
        effective_batch_size(20, 1024, 30)


def test_global_scale_rejects_a_view_without_geometry():
    views = [np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32), np.ones((50, 3), np.float32)]
    with pytest.raises(ValueError, match="view 1"):
        estimate_view_scales(views, fixed_graph(n_neighbors=5), 32, seed=0)


def test_plateau_lowers_the_rate_and_stops():
    train, val = clustered_views(90, 0), clustered_views(30, 1)
    config = fixed_train(epochs=200, batch_size=64, lr_patience=0, lr_factor=0.1, min_lr=1e-5, progress=False)
    state, history = train_loop(small_state(), train, val, config, seed=0)
    rates = [r.learning_rate for r in history.epochs]
    assert rates[0] == pytest.approx(1e-3)
    assert min(rates) < 1e-3
    assert "learning rate reached" in history.stop_reason
    assert len(history.epochs) < 200
