"""Freezing the view nets after ``train.view_net_steps`` (the fusion and R^-1 go on training): the
frozen step leaves the view nets untouched, the whole-set path's cached outputs give the step the
per-batch path gives, the loop freezes at the configured step (on every path) or, with
``VIEW_NETS_UNTIL_STALL``, once the watched loss stalls (also across a resume), and a fusion with
nothing left to train stops the run."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.config import (
    VIEW_NETS_UNTIL_STALL,
    ExperimentConfig,
    OrthoConfig,
)
from specrage_jax.nets.state import create_state, in_view_nets
from specrage_jax.training.batches import whole_set_batch
from specrage_jax.training.checkpoint import TrainingCheckpointer
from specrage_jax.training.defaults import resolve_epoch_settings
from specrage_jax.training.loop import train_loop, view_nets_frozen
from specrage_jax.training.schedule import stalls
from specrage_jax.training.steps import Batch, frozen_view_outputs, full_batch_epoch, train_step
from tests.fixed_sections import FIXED, fixed_graph, fixed_model, fixed_train

GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch")


def small_state(fusion: str = "weighting", learning_rate: float = 1e-2):
    model = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0, fusion=fusion)
    return create_state([2, 3], model, GRAPH, OrthoConfig(), learning_rate=learning_rate, seed=0)


def clustered_views(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    x = centers[labels] + rng.normal(size=(n, 2))
    wide = np.concatenate([x, rng.normal(size=(n, 1))], axis=1)
    return [x.astype(np.float32), wide.astype(np.float32)]


def split_params(params) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(the view nets' leaves, every other leaf) as host arrays."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    view = [np.asarray(x) for p, x in leaves if in_view_nets(p)]
    rest = [np.asarray(x) for p, x in leaves if not in_view_nets(p)]
    return view, rest


def assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_a_frozen_step_moves_the_fusion_and_r_inv_but_not_the_view_nets():
    views = tuple(jnp.asarray(v) for v in clustered_views(48, 0))
    batch = Batch(views=views)
    state = small_state()
    view_before, rest_before = split_params(state.params)
    r_inv_before = np.asarray(state.r_inv)
    for _ in range(3):  # Adam's momentum would move a net whose updates were not dropped
        state, metrics = train_step(state, batch, batch, frozen_view_nets=True)
    view_after, rest_after = split_params(state.params)
    assert_same(view_before, view_after)
    assert any(not np.array_equal(x, y) for x, y in zip(rest_before, rest_after))
    assert not np.allclose(np.asarray(state.r_inv), r_inv_before)
    assert np.isfinite(float(metrics["loss"]))


def test_the_whole_set_path_on_cached_outputs_takes_the_per_batch_frozen_step():
    views = clustered_views(48, 1)
    state = small_state()
    whole = whole_set_batch(state, views, None)
    outputs = frozen_view_outputs(state, whole)
    assert outputs.shape == (2, 48, 3)
    cached, _ = full_batch_epoch(small_state(), whole, 3, outputs)
    stepped = small_state()
    for _ in range(3):
        stepped, _ = train_step(stepped, whole, whole, frozen_view_nets=True)
    for x, y in zip(jax.tree.leaves(cached.params), jax.tree.leaves(stepped.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(cached.r_inv), np.asarray(stepped.r_inv), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "batch_size, on_device", [(60, False), (32, False), (32, True)]
)  # the whole set as one batch; mini-batches gathered on the host, and as one compiled epoch
def test_the_loop_freezes_the_view_nets_after_the_configured_steps(batch_size, on_device):
    train, val = clustered_views(60, 2), clustered_views(30, 3)
    base = fixed_train(
        epochs=2,
        batch_size=batch_size,
        steps_per_epoch=4,
        learning_rate=1e-2,
        min_lr=1e-9,
        progress=False,
        data_on_device=on_device,
    )
    at_freeze, _ = train_loop(small_state(), train, val, base, seed=0)
    longer = dataclasses.replace(base, epochs=5, view_net_steps=8)
    frozen, history = train_loop(small_state(), train, val, longer, seed=0)
    assert history.steps == 20
    view_at_freeze, rest_at_freeze = split_params(at_freeze.params)
    view_frozen, rest_frozen = split_params(frozen.params)
    for x, y in zip(view_at_freeze, view_frozen):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)  # the first 8 steps are the same run
    assert any(not np.allclose(x, y) for x, y in zip(rest_at_freeze, rest_frozen))
    free, _ = train_loop(small_state(), train, val, dataclasses.replace(longer, view_net_steps=0), seed=0)
    assert any(not np.allclose(x, y) for x, y in zip(split_params(free.params)[0], view_frozen))


def test_a_fusion_without_parameters_stops_when_the_view_nets_freeze():
    train, val = clustered_views(60, 2), clustered_views(30, 3)
    config = fixed_train(
        epochs=5, batch_size=60, steps_per_epoch=4, view_net_steps=8, learning_rate=1e-2, min_lr=1e-9, progress=False
    )
    _, history = train_loop(small_state("average"), train, val, config, seed=0)
    assert history.steps == 8
    assert "view_net_steps" in history.stop_reason and "no parameters" in history.stop_reason


def test_the_data_aware_defaults_leave_the_freeze_to_the_data_and_the_presets_do_not_freeze():
    assert "train.view_net_steps" in ExperimentConfig().unresolved_fields()
    assert FIXED.train.view_net_steps == 0
    with pytest.raises(ValueError, match="view_net_steps"):
        fixed_train(view_net_steps=-3)
    with pytest.raises(ValueError, match="view_net_patience"):
        fixed_train(view_net_patience=0)
    with pytest.raises(ValueError, match="view_net_min_delta"):
        fixed_train(view_net_min_delta=0.0)
    # left to the data, the loop resolves the freeze from the rows and the batch, as the defaults do
    assert resolve_epoch_settings(fixed_train(view_net_steps=-1), 60, 60).view_net_steps == VIEW_NETS_UNTIL_STALL
    assert resolve_epoch_settings(fixed_train(view_net_steps=-1), 60, 30).view_net_steps == 0
    assert resolve_epoch_settings(fixed_train(steps_per_epoch=-1), 60, 30).steps_per_epoch == 10  # the fewest
    assert resolve_epoch_settings(fixed_train(steps_per_epoch=-1), 600, 30).steps_per_epoch == 20  # one pass
    train, val = clustered_views(60, 2), clustered_views(30, 3)
    config = fixed_train(
        epochs=1, batch_size=30, view_net_steps=-1, steps_per_epoch=-1, learning_rate=1e-2, progress=False
    )
    _, history = train_loop(small_state(), train, val, config, seed=0)
    assert history.steps == 10


UNTIL_STALL = fixed_train(
    epochs=8,
    batch_size=60,
    steps_per_epoch=4,
    learning_rate=3e-2,  # the validation loss of these sets stalls within 8 epochs at this rate
    min_lr=1e-9,
    progress=False,
    view_net_steps=VIEW_NETS_UNTIL_STALL,
)
RATE_DROPS_FIRST = dataclasses.replace(UNTIL_STALL, lr_patience=0, view_net_patience=3)
LOSS_STALLS_FIRST = dataclasses.replace(UNTIL_STALL, lr_patience=100, view_net_patience=1)


def test_stalls_finds_a_run_of_epochs_without_improvement():
    assert stalls([1.0, 0.9995], 1, rel_threshold=1e-3) and not stalls([1.0, 0.9995], 1)  # 0.05 %: counts at 1e-4
    assert stalls([3.0, 2.0, 2.5, 1.0], 1)
    assert not stalls([3.0, 2.0, 1.0], 1)
    assert not stalls([3.0, 2.0, 2.5, 1.0, 1.5], 2)  # an improvement ends the run
    assert stalls([3.0, 2.0, 2.0, 2.0], 2)  # no better than the best counts as a bad epoch
    assert not stalls([], 1)


def first_stalled_epoch(losses: list[float], min_delta: float) -> int:
    """The first epoch whose loss is not ``min_delta`` (relative) below the best before it (patience 1)."""
    return next(e for e in range(1, len(losses)) if losses[e] >= min(losses[:e]) * (1 - min_delta))


@pytest.mark.parametrize("config", [RATE_DROPS_FIRST, LOSS_STALLS_FIRST], ids=["rate-drops", "loss-stalls"])
def test_until_stall_the_view_nets_stop_once_the_watched_loss_stalls(config):
    train, val = clustered_views(60, 2), clustered_views(30, 3)
    epochs: list[tuple[float, float, list[np.ndarray], list[np.ndarray]]] = []
    start = small_state(learning_rate=config.learning_rate)
    initial = split_params(start.params)  # the loop donates the state's buffers
    train_loop(
        start,
        train,
        val,
        config,
        seed=0,
        on_epoch_end=lambda state, r: epochs.append((r.learning_rate, r.val_loss, *split_params(state.params))),
    )
    if config is RATE_DROPS_FIRST:  # frozen from the first epoch at the lowered rate
        frozen = [lr < config.learning_rate for lr, *_ in epochs]
    else:  # the rate never drops: frozen from the epoch after the first that did not improve
        assert all(lr == config.learning_rate for lr, *_ in epochs)
        stalled = first_stalled_epoch([loss for _, loss, *_ in epochs], config.view_net_min_delta)
        frozen = [e > stalled for e in range(len(epochs))]
    assert any(frozen) and not all(frozen)
    params = [initial, *[(view, rest) for _, _, view, rest in epochs]]
    for (view_before, rest_before), (view, rest), is_frozen in zip(params, params[1:], frozen):
        if is_frozen:  # the view nets stay as they were, the fusion still trains
            assert_same(view_before, view)
            assert changed(rest_before, rest)
        else:
            assert changed(view_before, view)


def changed(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return any(not np.array_equal(x, y) for x, y in zip(a, b))


def test_until_stall_a_resumed_run_freezes_where_the_uninterrupted_run_did(tmp_path):
    """The stall is read from the resumed run's history: restored after the first frozen epoch,
    the resumed run starts frozen and ends bitwise where the uninterrupted one did."""
    config = LOSS_STALLS_FIRST
    train, val = clustered_views(60, 2), clustered_views(30, 3)
    full, history = train_loop(small_state(learning_rate=config.learning_rate), train, val, config, seed=0)
    first_frozen = first_stalled_epoch([r.val_loss for r in history.epochs], config.view_net_min_delta) + 1
    model = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0)
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=10, model_config=model) as ckpt:
        train_loop(small_state(learning_rate=config.learning_rate), train, val, config, seed=0, checkpointer=ckpt)
        restored = ckpt.restore(first_frozen + 1, small_state(learning_rate=config.learning_rate))
    progress = restored.progress
    assert view_nets_frozen(config, progress.history, progress.learning_rate)  # from the restored history alone
    state, _ = train_loop(restored.state, train, val, config, seed=0, resume=progress)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(full.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(state.r_inv), np.asarray(full.r_inv))
