"""The pre-training stages per view (autoencoders, Siamese nets), shared by the experiment
pipeline and the scikit-learn estimator: train one net per view, encode views, and build a
fresh net of a stage to restore saved parameters into."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flax import nnx

from specrage_jax.config import ExperimentConfig
from specrage_jax.nets.autoencoder import Autoencoder
from specrage_jax.nets.netstate import NetState, TrainedNet, create_net_state
from specrage_jax.nets.siamese import siamese_net
from specrage_jax.validation import missing_rows, present_rows


def train_view_nets(
    trainer: Callable[..., TrainedNet],
    views: Sequence[np.ndarray],
    stage_config: Any,
    config: ExperimentConfig,
    *,
    seed: int,
    **options: Any,
) -> tuple[TrainedNet, ...]:
    """One net per view, trained by ``trainer`` on that view's training rows (seed + v); where a
    view is missing for some samples (all-NaN rows, or a streamed dataset's mask), on the rows
    that have it (of a streamed view, a row source over those rows, read batch by batch).
    ``options`` go to every ``trainer`` call."""
    return tuple(
        trainer(
            present_rows(x), stage_config, seed=seed + v, progress=config.train.progress, name=f"view {v}", **options
        )
        for v, x in enumerate(views)
    )


def encode_views(nets: Sequence[TrainedNet], views: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """nets[v].encode(view v): V views (n, d_v) (arrays, or rows streamed from disk) -> V arrays
    (n, c_v). A missing view's row (all NaN) stays all NaN: only the present rows go through the
    net (of a streamed view, only those are read)."""
    return tuple(_encode_present(net, x) for net, x in zip(nets, views))


def _encode_present(net: TrainedNet, x: Any) -> np.ndarray:
    missing = missing_rows(x)
    if not missing.any():
        return net.encode(x)
    present = net.encode(present_rows(x))
    codes = np.full((len(x), present.shape[1]), np.nan, present.dtype)
    codes[~missing] = present
    return codes


def fresh_stage_net(stage: str, in_dim: int, config: ExperimentConfig) -> NetState:
    """A freshly initialized net of ``stage`` ("autoencoder" or "siamese"): the structure that
    saved parameters are restored into."""
    if stage == "autoencoder":
        return create_net_state(
            Autoencoder(in_dim, config.autoencoder, rngs=nnx.Rngs(0)), config.autoencoder.learning_rate
        )
    if stage == "siamese":
        return create_net_state(siamese_net(in_dim, config.siamese, seed=0), config.siamese.learning_rate)
    raise ValueError(f"unknown pre-training stage {stage!r}; expected 'autoencoder' or 'siamese'")
