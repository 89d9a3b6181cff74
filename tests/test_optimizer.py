"""The optimizer belongs to the state: ``create_state(tx=...)`` takes any optax transformation, the
jitted steps and the training loop apply it, checkpoints resume it, ``load_model(tx=...)`` gives
it to a loaded model; the learning rate has one source; settings left to the data are refused
where no data resolves them."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import specrage_jax
from specrage_jax.config import OrthoConfig
from specrage_jax.nets.state import SpecRaGEState, adam_optimizer, create_state
from specrage_jax.training.checkpoint import TrainingCheckpointer, load_model, save_model
from specrage_jax.training.checkpoint_files import CheckpointError
from specrage_jax.training.loop import train_loop
from specrage_jax.training.steps import Batch, grad_step, loss_and_grads, ortho_step
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))
GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch")
ORTHO = OrthoConfig(grad_through_r_inv=False)
EPOCHS = fixed_train(epochs=3, batch_size=32, progress=False)
ADAMW = optax.adamw(1e-3, weight_decay=0.5)  # one instance: states built with it share compiled steps
CLIPPED_ADAM = optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adam)(learning_rate=2e-3))


def clustered_views(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    x = centers[rng.integers(0, 3, n)] + rng.normal(size=(n, 2))
    return [x.astype(np.float32), (x @ np.array([[0.0, -1.0], [1.0, 0.0]])).astype(np.float32)]


_BASE_STATES: dict[str, SpecRaGEState] = {}


def state_with(**optimizer):
    """A fresh copy of one initial state per optimizer setting. Copies share the static graphdef,
    so the jitted steps compile once per optimizer (separately built networks compile anew)."""
    key = repr(sorted(optimizer.items()))
    if key not in _BASE_STATES:
        _BASE_STATES[key] = create_state([2, 2], MODEL, GRAPH, ORTHO, seed=0, **optimizer)
    return jax.tree.map(jnp.array, _BASE_STATES[key])


def batch(seed: int) -> Batch:
    return Batch(views=tuple(jnp.asarray(v) for v in clustered_views(32, seed)))


def two_steps(state):
    state = ortho_step(state, batch(0))
    state, _ = grad_step(state, batch(1))
    state, _ = grad_step(state, batch(2))
    return state


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@jax.jit
def adam_step_by_hand(state, grad_batch: Batch):
    """The parameters after one step of ``optax.adam(3e-3)`` on the batch's gradients."""
    _, grads = loss_and_grads(state, grad_batch)
    adam = optax.adam(3e-3)
    updates, _ = adam.update(grads, adam.init(state.params), state.params)
    return optax.apply_updates(state.params, updates)


def test_the_default_optimizer_is_adam_at_the_given_rate():
    state = ortho_step(state_with(learning_rate=3e-3), batch(0))
    assert state.learning_rate == pytest.approx(3e-3)
    assert set(state.opt_state.hyperparams) == {"learning_rate", "b1", "b2", "eps", "eps_root"}  # Adam's, injected
    expected = adam_step_by_hand(state, batch(1))
    stepped, _ = grad_step(jax.tree.map(jnp.copy, state), batch(1))
    assert int(stepped.step) == 1
    for got, want in zip(leaves(stepped.params), leaves(expected)):
        # equal up to float32 rounding (another compiled program; Adam's betas held in float32)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_a_custom_optimizer_trains_through_the_steps_and_differs_from_the_default():
    custom = two_steps(state_with(tx=ADAMW))
    default = two_steps(state_with())
    assert custom.tx is ADAMW and custom.learning_rate is None
    assert int(custom.step) == 2 and all(np.isfinite(x).all() for x in leaves(custom.params))
    initial = leaves(state_with(tx=ADAMW).params)
    assert any(not np.array_equal(a, b) for a, b in zip(leaves(custom.params), initial))
    # weight decay 0.5 at rate 1e-3 shrinks every weight by 5e-4 of itself per step on top of Adam
    assert max(np.abs(a - b).max() for a, b in zip(leaves(custom.params), leaves(default.params))) > 1e-5


def test_a_custom_optimizer_trains_through_the_loop_at_its_own_rate():
    train, val = clustered_views(96, 0), clustered_views(40, 1)
    custom, history = train_loop(state_with(tx=ADAMW), train, val, EPOCHS, seed=0)
    default, _ = train_loop(state_with(), train, val, EPOCHS, seed=0)
    assert len(history.epochs) == 3 and history.stop_reason == "completed 3 epochs"
    assert all(np.isnan(r.learning_rate) for r in history.epochs)  # no plateau schedule to record
    assert custom.tx is ADAMW and np.isfinite(history.epochs[-1].train_loss)
    assert max(np.abs(a - b).max() for a, b in zip(leaves(custom.params), leaves(default.params))) > 1e-5


def test_the_plateau_schedule_drives_an_injected_rate_inside_a_chain():
    train, val = clustered_views(96, 0), clustered_views(40, 1)
    config = dataclasses.replace(EPOCHS, epochs=4, learning_rate=2e-3, lr_patience=0, lr_factor=0.5)
    state, history = train_loop(state_with(tx=CLIPPED_ADAM), train, val, config, seed=0)
    rates = [r.learning_rate for r in history.epochs]
    assert rates[0] == 2e-3 and min(rates) < 2e-3  # the schedule lowered it at least once
    # the state holds the last epoch's rate, or the rate the schedule set after it
    assert state.learning_rate in (pytest.approx(rates[-1]), pytest.approx(rates[-1] * 0.5))


def test_one_source_for_the_learning_rate():
    train, val = clustered_views(96, 0), clustered_views(40, 1)
    with pytest.raises(ValueError, match=r"train.learning_rate=0.01 disagrees with the state's optimizer \(0.001\)"):
        train_loop(state_with(learning_rate=1e-3), train, val, dataclasses.replace(EPOCHS, learning_rate=1e-2), seed=0)
    with pytest.raises(ValueError, match="learning_rate .* or tx .* not both"):
        state_with(learning_rate=1e-3, tx=ADAMW)
    with pytest.raises(ValueError, match="holds no learning rate to set"):
        state_with(tx=ADAMW).with_learning_rate(1e-4)


def test_a_run_with_a_custom_optimizer_resumes_to_the_uninterrupted_result(tmp_path):
    train, val = clustered_views(96, 0), clustered_views(40, 1)
    full, history_full = train_loop(state_with(tx=ADAMW), train, val, EPOCHS, seed=0)
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=3, model_config=MODEL) as ckpt:
        train_loop(state_with(tx=ADAMW), train, val, dataclasses.replace(EPOCHS, epochs=1), seed=0, checkpointer=ckpt)
        assert ckpt.epochs() == [1]
        restored = ckpt.restore(1, state_with(tx=ADAMW))
    assert restored.state.tx is ADAMW and np.isnan(restored.progress.learning_rate)
    resumed, history = train_loop(restored.state, train, val, EPOCHS, seed=0, resume=restored.progress)
    for got, want in zip(leaves((resumed.params, resumed.opt_state)), leaves((full.params, full.opt_state))):
        np.testing.assert_array_equal(got, want)
    assert [r.train_loss for r in history.epochs] == [r.train_loss for r in history_full.epochs]


def test_a_loaded_model_takes_the_optimizer_it_is_given(tmp_path):
    trained = two_steps(state_with(tx=ADAMW))
    save_model(tmp_path / "net", trained, model_config=MODEL)
    save_model(tmp_path / "net+opt", trained, model_config=MODEL, include_optimizer=True)
    # by default a fresh Adam, not the optimizer it trained with (the optimizer is not stored)
    plain = load_model(tmp_path / "net").state
    assert plain.tx is adam_optimizer() and plain.learning_rate == pytest.approx(1e-3)
    for got, want in zip(leaves(plain.params), leaves(trained.params)):
        np.testing.assert_array_equal(got, want)
    fresh = load_model(tmp_path / "net", tx=ADAMW).state
    assert fresh.tx is ADAMW and fresh.learning_rate is None
    for got, want in zip(leaves(fresh.opt_state), leaves(ADAMW.init(trained.params))):
        np.testing.assert_array_equal(got, want)
    assert load_model(tmp_path / "net", tx=CLIPPED_ADAM).state.learning_rate == pytest.approx(2e-3)  # its own rate
    resumed = load_model(tmp_path / "net+opt", tx=ADAMW).state  # the saved optimizer state, into tx's structure
    for got, want in zip(leaves(resumed.opt_state), leaves(trained.opt_state)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(CheckpointError, match="do not match the model"):
        load_model(tmp_path / "net+opt")  # AdamW's state does not fit the default Adam's


@pytest.mark.parametrize(
    "train_config, name",
    [
        (fixed_train(epochs=0, batch_size=32), "train.epochs=0"),
        (fixed_train(epochs=2, batch_size=0), "train.batch_size=0"),
    ],
)
def test_the_loop_refuses_training_settings_left_to_the_data(train_config, name):
    with pytest.raises(ValueError, match=f"{name} means 'resolved from the data'.*resolve_defaults") as err:
        train_loop(state_with(), clustered_views(60, 0), clustered_views(20, 1), train_config, seed=0)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "model, graph, name",
    [
        (dataclasses.replace(MODEL, n_components=-1), GRAPH, "model.n_components=-1"),
        (dataclasses.replace(MODEL, view_hidden=(0,)), GRAPH, r"model.view_hidden=\(0,\)"),
        (MODEL, dataclasses.replace(GRAPH, n_neighbors=0), "graph.n_neighbors=0"),
        (dataclasses.replace(MODEL, n_components=0), GRAPH, "model.n_components=0"),
    ],
)
def test_create_state_refuses_settings_left_to_the_data(model, graph, name):
    with pytest.raises(ValueError, match=f"{name} means '.*'.*e\\.g\\. (Model|Graph)Config") as err:
        create_state([2, 2], model, graph, ORTHO, seed=0)
    assert "\n" not in str(err.value)


def test_the_old_top_level_names_point_to_the_new_ones():
    with pytest.raises(AttributeError, match="train_loop"):
        specrage_jax.fit  # noqa: B018
    with pytest.raises(AttributeError, match="embed_batch"):
        specrage_jax.predict  # noqa: B018
    assert specrage_jax.train_loop is train_loop
