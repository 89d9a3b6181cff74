"""View-weight regularizers (specrage_jax.ops.weights) and their wiring into the loss."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.config import GraphConfig, OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.ops.weights import (
    view_weight_regularizer,
    weight_balance_penalty,
    weight_entropy_penalty,
)
from specrage_jax.overrides import apply_overrides
from specrage_jax.training.steps import Batch, loss_and_grads, spectral_loss
from tests.fixed_sections import fixed_experiment, fixed_graph, fixed_model

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0)
GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch")
DIMS = (4, 3)
M = 32


def softmax_rows(logits: np.ndarray) -> jnp.ndarray:
    return jax.nn.softmax(jnp.asarray(logits, jnp.float32), axis=-1)


def test_penalties_match_their_closed_forms_and_vanish_at_uniform():
    alpha = jnp.asarray([[0.9, 0.1], [0.1, 0.9], [0.5, 0.5]], jnp.float32)
    mean = np.array([0.5, 0.5])
    assert float(weight_balance_penalty(alpha)) == pytest.approx(float(np.sum(mean * np.log(2 * mean))), abs=1e-7)
    per_row = [0.9 * np.log(1.8) + 0.1 * np.log(0.2)] * 2 + [0.0]
    assert float(weight_entropy_penalty(alpha)) == pytest.approx(np.mean(per_row), rel=1e-6)
    uniform = jnp.full((5, 3), 1 / 3, jnp.float32)
    assert float(weight_balance_penalty(uniform)) == pytest.approx(0.0, abs=1e-6)
    assert float(weight_entropy_penalty(uniform)) == pytest.approx(0.0, abs=1e-6)
    # one-hot rows: finite (0 log 0 = 0), KL = log V
    one_hot = jnp.asarray([[1.0, 0.0, 0.0]] * 4, jnp.float32)
    assert float(weight_entropy_penalty(one_hot)) == pytest.approx(np.log(3), rel=1e-6)
    assert float(weight_balance_penalty(one_hot)) == pytest.approx(np.log(3), rel=1e-6)
    combined = view_weight_regularizer(alpha, balance=2.0, entropy=3.0)
    want = 2.0 * weight_balance_penalty(alpha) + 3.0 * weight_entropy_penalty(alpha)
    assert float(combined) == pytest.approx(float(want), rel=1e-6)
    assert float(view_weight_regularizer(alpha)) == 0.0


def test_gradients_point_towards_uniform():
    """Gradient descent on either penalty moves a view's logit down where its weight is above
    1/V; the balance penalty is blind to per-sample moves that keep the batch mean."""
    logits = np.array([[2.0, 0.0], [1.0, 0.0]], np.float32)
    for penalty in (weight_balance_penalty, weight_entropy_penalty):
        grad = jax.grad(lambda z, penalty=penalty: penalty(jax.nn.softmax(z, axis=-1)))(jnp.asarray(logits))
        assert np.all(np.asarray(grad)[:, 0] > 0) and np.all(np.asarray(grad)[:, 1] < 0)
    opposite = np.array([[2.0, 0.0], [0.0, 2.0]], np.float32)  # batch mean exactly uniform
    grad = jax.grad(lambda z: weight_balance_penalty(jax.nn.softmax(z, axis=-1)))(jnp.asarray(opposite))
    np.testing.assert_allclose(np.asarray(grad), 0.0, atol=1e-7)
    assert float(weight_entropy_penalty(softmax_rows(opposite))) > 0.1


def test_config_validates_the_coefficients():
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weight_balance"):
            fixed_graph(weight_balance=bad)
        with pytest.raises(ValueError, match="weight_entropy"):
            fixed_graph(weight_entropy=bad)
    config = apply_overrides(fixed_experiment(), ["graph.weight_entropy=0.01", "graph.weight_balance=0.5"])
    assert (config.graph.weight_entropy, config.graph.weight_balance) == (0.01, 0.5)


def _views(seed: int) -> tuple[jnp.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((M, d)), jnp.float32) for d in DIMS)


def _state(graph: GraphConfig):
    return create_state(DIMS, MODEL, graph, OrthoConfig(grad_through_r_inv=False), learning_rate=1e-3, seed=0)


def test_loss_adds_the_regularizer_and_default_off_is_bitwise_unchanged():
    views = _views(0)
    base = _state(GRAPH)
    loss0, alpha = spectral_loss(base, base.params, Batch(views), base.r_inv)
    (loss_default, _), grads_default = loss_and_grads(base, Batch(views))
    explicit_zero = _state(dataclasses.replace(GRAPH, weight_balance=0.0, weight_entropy=0.0))
    (loss_zero, _), grads_zero = loss_and_grads(explicit_zero, Batch(views))
    assert np.asarray(loss_zero).tobytes() == np.asarray(loss_default).tobytes()
    for a, b in zip(jax.tree.leaves(grads_zero), jax.tree.leaves(grads_default)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    on = _state(dataclasses.replace(GRAPH, weight_balance=0.3, weight_entropy=0.7))
    loss_on, alpha_on = spectral_loss(on, on.params, Batch(views), on.r_inv)
    np.testing.assert_allclose(np.asarray(alpha_on), np.asarray(alpha), rtol=1e-6)
    want = float(loss0) + 0.3 * float(weight_balance_penalty(alpha)) + 0.7 * float(weight_entropy_penalty(alpha))
    assert float(loss_on) == pytest.approx(want, rel=1e-5)


def test_a_strong_entropy_term_pulls_the_weights_towards_uniform():
    """A few Adam steps on a large lambda_e move every sample's weights towards 1/V."""
    from specrage_jax.training.steps import grad_step

    views = _views(1)
    state = _state(dataclasses.replace(GRAPH, weight_entropy=10.0))
    start = float(weight_entropy_penalty(spectral_loss(state, state.params, Batch(views), state.r_inv)[1]))
    for _ in range(20):
        state, _ = grad_step(state, Batch(views))
    end = float(weight_entropy_penalty(spectral_loss(state, state.params, Batch(views), state.r_inv)[1]))
    assert end < 0.75 * start
