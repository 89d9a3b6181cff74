"""Training from data, the one path the estimator and the CLI's runs share: the global Gaussian
scales from the training rows, a fresh state, an optional resume from a training checkpoint,
and :func:`~specrage_jax.training.loop.train_loop`."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optax
from jax.sharding import Mesh

from specrage_jax.config import ExperimentConfig
from specrage_jax.data.lazy import is_streamed
from specrage_jax.nets.state import SpecRaGEState, create_state
from specrage_jax.training.checkpoint import TrainingCheckpointer
from specrage_jax.training.loop import History, estimate_view_scales, train_loop
from specrage_jax.training.spectral_init import check_spectral_init, spectral_init
from specrage_jax.validation import check_view_coverage, present_rows


def constant_views(arrays: Sequence[Any]) -> list[bool]:
    """Per view (n, d_v): True when every row that has the view is the same (all pairwise
    distances 0). Views streamed from disk are not read for this (False)."""
    return [False if is_streamed([a]) else bool(np.ptp(present_rows(np.asarray(a)), axis=0).max() == 0) for a in arrays]


def view_scales(affinity_inputs: Sequence[Any], config: ExperimentConfig, *, seed: int) -> np.ndarray | None:
    """Global sigma per view (:func:`~specrage_jax.training.loop.estimate_view_scales`; None when
    ``graph.scale_mode`` is "batch"). A view constant on the training rows carries no geometry
    (every distance 0, so every sigma gives the same affinities): sigma 1, with a warning.

    Raises:
      ValueError: when every view is constant (there is nothing to embed).
    """
    constant = constant_views(affinity_inputs)
    if all(constant):
        raise ValueError("X: every view is constant on the training rows; there is no geometry to embed")
    for v in np.flatnonzero(constant):
        warnings.warn(
            f"SpecRaGE: view {v} is constant on the training rows; it carries no geometry "
            f"(its kNN graph links arbitrary neighbours)",
            UserWarning,
            stacklevel=3,
        )
    if config.graph.scale_mode != "global":
        return None
    scales = np.ones(len(affinity_inputs), np.float32)
    varying = [c for c, flat in zip(affinity_inputs, constant) if not flat]
    scales[~np.asarray(constant)] = estimate_view_scales(varying, config.graph, config.train.batch_size, seed=seed)
    return scales


def initial_state(
    train_views: Sequence[Any],
    config: ExperimentConfig,
    *,
    seed: int,
    train_codes: Sequence[Any] | None = None,
    tx: optax.GradientTransformation | None = None,
) -> SpecRaGEState:
    """A fresh state for views of the training rows' widths, with the global scales measured on
    the affinity inputs (the Siamese codes or unreduced rows when given, else the views). The
    optimizer is ``tx``, or by default Adam at ``train.learning_rate``."""
    scales = view_scales(train_codes or train_views, config, seed=seed)
    return create_state(
        [v.shape[1] for v in train_views],
        config.model,
        config.graph,
        config.ortho,
        learning_rate=config.train.learning_rate if tx is None else None,
        tx=tx,
        seed=seed,
        view_scales=scales,
    )


def train_model(
    train_views: Sequence[Any],
    val_views: Sequence[Any],
    config: ExperimentConfig,
    *,
    seed: int,
    train_codes: Sequence[Any] | None = None,
    val_codes: Sequence[Any] | None = None,
    checkpointer: TrainingCheckpointer | None = None,
    resume: bool = False,
    mesh: Mesh | None = None,
    on_epoch_end: Callable[[SpecRaGEState, Any], None] | None = None,
    tx: optax.GradientTransformation | None = None,
) -> tuple[SpecRaGEState, History]:
    """Trains SpecRaGE on the training rows (views (n, d_v), affinity inputs (n, c_v) or None),
    validating on the validation rows (none, or too few for the kNN graph: the training loss
    drives the schedule).

    ``checkpointer`` saves training checkpoints; with ``resume`` training continues from its
    newest readable one (from scratch, with a warning, when there is none). ``tx``: the optax
    optimizer (None: Adam at ``train.learning_rate``); where it holds an injected learning rate,
    ``train.learning_rate`` must equal it (:func:`~specrage_jax.training.loop.train_loop`).
    """
    check_view_coverage(train_views, config.graph.n_neighbors)  # views missing for many samples
    if config.train.spectral_init:
        check_spectral_init(config.model)
    state = initial_state(train_views, config, seed=seed, train_codes=train_codes, tx=tx)
    progress = None
    if resume:
        if checkpointer is None:
            raise ValueError("resume=True needs a checkpointer (checkpoint.every_epochs > 0)")
        restored = checkpointer.restore_latest(state)
        if restored is None:
            warnings.warn(f"no training checkpoint in {checkpointer.directory}; training from epoch 0", stacklevel=2)
        else:
            state, progress = restored.state, restored.progress
    if progress is None and config.train.spectral_init:
        state = spectral_init(state, train_views, train_codes, batch_size=config.train.batch_size, seed=seed, mesh=mesh)
    return train_loop(
        state,
        train_views,
        val_views,
        config.train,
        seed=seed,
        train_codes=train_codes,
        val_codes=val_codes,
        checkpointer=checkpointer,
        resume=progress,
        mesh=mesh,
        on_epoch_end=on_epoch_end,
    )
