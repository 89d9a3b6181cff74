"""The training both sides of the multi-process comparison run: digits, fixed seed and global batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from specrage_jax.config import GraphConfig, ModelConfig, OrthoConfig, TrainConfig
from specrage_jax.data import load_dataset, split_indices
from specrage_jax.nets.state import SpecRaGEState, create_state
from specrage_jax.training.loop import History, train_loop
from specrage_jax.training.sharding import make_data_mesh

GLOBAL_BATCH = 256


def train_digits(*, epochs: int, mesh: bool) -> tuple[SpecRaGEState, History]:
    """``train_loop`` on digits' training split (seed 0) with a global batch of 256 rows, over the 'data'
    mesh of every visible device (every process's, in a multi-process run) or on one device."""
    data = load_dataset("digits", seed=0)
    idx = split_indices(data.labels, seed=0)
    views = [np.asarray(v, np.float32) / 16.0 for v in data.views]
    train = [v[idx.train] for v in views]
    val = [v[idx.val] for v in views]
    state = create_state(
        [v.shape[1] for v in views],
        ModelConfig(n_components=10, view_hidden=(64, 64)),
        GraphConfig(n_neighbors=10, degree_normalization="none"),
        OrthoConfig(),
        learning_rate=1e-3,
        seed=0,
        view_scales=[1.0, 1.0],
    )
    config = TrainConfig(epochs=epochs, batch_size=GLOBAL_BATCH, progress=False)
    kwargs: dict[str, Any] = {"mesh": make_data_mesh()} if mesh else {}
    return train_loop(state, train, val, config, seed=0, **kwargs)
