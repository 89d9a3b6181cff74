"""Tests for specrage_jax.training.steps and specrage_jax.nets.embed: the jitted ortho/grad steps, predict, embed.

Compiling a step costs seconds, so each configuration's state is created once per module and
every test works on a copy (the steps donate their state).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from specrage_jax.config import GraphConfig, OrthoConfig
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import SpecRaGEState, create_state, embed_batch
from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.laplacian import pairwise_spectral_loss
from specrage_jax.ops.ortho import orthonormalizer
from specrage_jax.training.steps import (
    Batch,
    eval_loss,
    grad_step,
    loss_and_grads,
    ortho_step,
    train_step,
)
from tests.fixed_sections import fixed_graph, fixed_model

MODEL = fixed_model(n_components=4, view_hidden=(32, 32), weighting_hidden=(16,))
GRAPH = fixed_graph(n_neighbors=5)
DIMS = (7, 5)
M = 64
SCALES = (3.0, 2.5)  # sigma_v of the global scale mode, about the 5th-neighbour distance of the views below
MODES = [True, False]  # OrthoConfig.grad_through_r_inv


def make_state(grad_through_r_inv: bool, *, graph: GraphConfig = GRAPH, learning_rate: float = 1e-3) -> SpecRaGEState:
    return create_state(
        DIMS,
        MODEL,
        graph,
        OrthoConfig(grad_through_r_inv=grad_through_r_inv),
        learning_rate=learning_rate,
        seed=0,
        view_scales=SCALES,
    )


def copy(state: SpecRaGEState) -> SpecRaGEState:
    """A fresh-buffer copy that a donating step may consume (static fields shared, so no retrace)."""
    return jax.tree.map(jnp.copy, state)


def snapshot(tree):
    return jax.tree.map(np.array, tree)


def random_views(m: int, seed: int) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.standard_normal((m, d)), jnp.float32) for d in DIMS)


def grad_batch(state: SpecRaGEState, views, ortho_views) -> Batch:
    return Batch(views, ortho_views=ortho_views if state.ortho_config.grad_through_r_inv else None)


def assert_trees_equal(a, b) -> None:
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b) > 0
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def gram_error(y: np.ndarray) -> float:
    y = np.asarray(y, np.float64)
    return float(np.abs(y.T @ y / y.shape[0] - np.eye(y.shape[1])).max())


@pytest.fixture(scope="module")
def adam_states() -> dict[bool, SpecRaGEState]:
    return {mode: make_state(mode) for mode in MODES}


@pytest.fixture(scope="module")
def views_a():
    return random_views(M, 1)


@pytest.fixture(scope="module")
def views_b():
    return random_views(M, 2)


@pytest.mark.parametrize("mode", MODES)
def test_ortho_step_orthonormalizes_its_batch(adam_states, views_a, views_b, mode):
    state = copy(adam_states[mode])
    assert gram_error(embed_batch(state, views_a)[0]) > 1e-2  # R^-1 = I before: far from orthonormal
    state = ortho_step(state, Batch(views_a))
    assert gram_error(embed_batch(state, views_a)[0]) < 1e-4
    assert gram_error(embed_batch(state, views_b)[0]) > 1e-3  # only the fitted batch is exact


@pytest.mark.parametrize("mode", MODES)
def test_ortho_step_changes_only_r_inv(adam_states, views_a, mode):
    state = copy(adam_states[mode])
    before = snapshot(state)
    state = ortho_step(state, Batch(views_a))
    assert_trees_equal(state.params, before.params)
    assert_trees_equal(state.opt_state, before.opt_state)
    assert int(state.step) == int(before.step)
    np.testing.assert_array_equal(np.asarray(state.view_scales), before.view_scales)
    r_inv = np.asarray(state.r_inv)
    assert not np.allclose(r_inv, before.r_inv)
    np.testing.assert_array_equal(np.tril(r_inv, -1), 0.0)


@pytest.mark.parametrize("mode", MODES)
def test_grad_step_updates_params_not_r_inv(adam_states, views_a, views_b, mode):
    state = ortho_step(copy(adam_states[mode]), Batch(views_a))
    before = snapshot(state)
    state, metrics = grad_step(state, grad_batch(state, views_b, views_a))
    np.testing.assert_array_equal(np.asarray(state.r_inv), before.r_inv)
    assert int(state.step) == int(before.step) + 1
    changed = [
        not np.array_equal(np.asarray(x), y)
        for x, y in zip(jax.tree.leaves(state.params), jax.tree.leaves(before.params))
    ]
    assert all(changed)  # every layer of both view nets and of the weighting net learns
    assert np.isfinite(float(metrics["loss"])) and float(metrics["loss"]) > 0
    assert float(metrics["grad_norm"]) > 0
    np.testing.assert_allclose(float(np.sum(metrics["view_weights"])), 1.0, rtol=1e-5)


def test_grad_through_r_inv_needs_ortho_views(adam_states, views_a):
    state = copy(adam_states[True])
    with pytest.raises(ValueError, match="ortho_views"):
        grad_step(state, Batch(views_a))


def reference_loss(state: SpecRaGEState, params, views, r_inv_of_params) -> jax.Array:
    """Eq. 4 written out independently of steps.py: pairwise form, kNN graphs on the raw views."""
    model = nnx.merge(state.graphdef, params, state.ortho)
    y_tilde, alpha = model.fuse(views)
    affinities = jnp.stack(
        [
            knn_gaussian_affinity(x, GRAPH.n_neighbors, SCALES[v], bandwidth_factor=GRAPH.bandwidth_factor)
            for v, x in enumerate(views)
        ]
    )
    return pairwise_spectral_loss(y_tilde @ r_inv_of_params(params), affinities, alpha)


def step_gradient(state: SpecRaGEState, batch: Batch):
    """(gradient, loss) that grad_step uses."""
    (loss, _), grads = jax.jit(loss_and_grads)(state, batch)
    return grads, float(loss)


def assert_gradients_close(got, want) -> None:
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves) > 0
    scale = max(float(np.abs(np.asarray(w)).max()) for w in want_leaves)
    assert scale > 0
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-3, atol=1e-3 * scale)


def gradient_difference(a, b) -> float:
    return max(
        float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def test_gradient_modes(adam_states, fitted_state, views_a, views_b):
    # R^-1 fitted on views_a by an ortho_step of the Adam state (same seed, so the same params).
    assert_trees_equal(adam_states[False].params, fitted_state.params)
    constant_state = copy(adam_states[False]).replace(ortho=copy(fitted_state.ortho))
    through_state = copy(adam_states[True]).replace(ortho=copy(fitted_state.ortho))
    r_inv = np.asarray(fitted_state.r_inv)
    params = snapshot(fitted_state.params)

    def fitted_r_inv(p):
        y_tilde, _ = nnx.merge(through_state.graphdef, p, through_state.ortho).fuse(views_a)
        return orthonormalizer(y_tilde, convention="m_identity")

    @jax.jit
    def references(p):
        # grad_through_r_inv=False: R^-1 a constant; True: R^-1(theta) refitted on its ortho batch.
        constant = jax.value_and_grad(lambda q: reference_loss(constant_state, q, views_b, lambda _: r_inv))(p)
        through = jax.grad(lambda q: reference_loss(through_state, q, views_b, fitted_r_inv))(p)
        return constant, through

    (constant_loss, want_constant), want_through = references(params)
    np.testing.assert_allclose(np.asarray(fitted_r_inv(params)), r_inv, rtol=1e-5, atol=1e-5)

    got_constant, got_constant_loss = step_gradient(constant_state, Batch(views_b))
    assert got_constant_loss == pytest.approx(float(constant_loss), rel=1e-5)
    assert_gradients_close(got_constant, want_constant)

    got_through, got_through_loss = step_gradient(through_state, Batch(views_b, ortho_views=views_a))
    assert got_through_loss == pytest.approx(got_constant_loss, rel=1e-5)
    assert_gradients_close(got_through, want_through)
    scale = max(float(np.abs(np.asarray(w)).max()) for w in jax.tree.leaves(want_constant))
    assert gradient_difference(got_through, got_constant) > 1e-2 * scale


@pytest.mark.parametrize("mode", MODES)
def test_identical_rows_batch_stays_finite(adam_states, mode):
    rng = np.random.default_rng(3)
    views = tuple(jnp.asarray(np.tile(rng.standard_normal((1, d)), (M, 1)), jnp.float32) for d in DIMS)
    state = ortho_step(copy(adam_states[mode]), Batch(views))
    assert np.isfinite(np.asarray(state.r_inv)).all()
    state, metrics = grad_step(state, grad_batch(state, views, views))
    assert np.isfinite(np.asarray(state.r_inv)).all()
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))
    assert np.isfinite(float(metrics["loss"]))
    assert np.isfinite(float(metrics["grad_norm"]))
    assert np.isfinite(np.asarray(embed_batch(state, random_views(5, 4))[0])).all()


@pytest.mark.parametrize("mode", MODES)
def test_batch_smaller_than_k_stays_finite(mode):
    state = make_state(mode, graph=fixed_graph(n_neighbors=2))
    ortho_views, views = random_views(3, 5), random_views(3, 6)
    state = ortho_step(state, Batch(ortho_views))
    r_inv = np.asarray(state.r_inv)
    assert r_inv.shape == (4, 4) and np.isfinite(r_inv).all()
    y = np.asarray(embed_batch(state, ortho_views)[0])
    assert np.isfinite(y).all() and np.abs(y).max() <= np.sqrt(3) + 1e-3
    state, metrics = grad_step(state, grad_batch(state, views, ortho_views))
    np.testing.assert_array_equal(np.asarray(state.r_inv), r_inv)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))
    assert np.isfinite(float(metrics["loss"])) and np.isfinite(float(metrics["grad_norm"]))


def clustered_views(n_per_cluster: int, seed: int) -> tuple[np.ndarray, ...]:
    """Two views of 3 well separated Gaussian clusters (centres 6 apart, spread 0.3)."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), n_per_cluster)
    views = []
    for d in DIMS:
        centres = 6.0 * np.eye(3, d)
        views.append((centres[labels] + 0.3 * rng.standard_normal((labels.size, d))).astype(np.float32))
    return tuple(views)


@pytest.mark.parametrize("mode", MODES)
def test_loss_decreases_on_clustered_data(adam_states, mode):
    views = clustered_views(64, seed=7)  # 192 samples
    n = views[0].shape[0]
    rng = np.random.default_rng(8)
    eval_batch = Batch(tuple(jnp.asarray(v[::3]) for v in views))  # 64 samples, every cluster

    def held_out_loss(state):
        fitted = ortho_step(copy(state), eval_batch)
        return float(eval_loss(fitted, eval_batch))

    state = copy(adam_states[mode]).with_learning_rate(1e-2)
    initial = held_out_loss(state)
    for _ in range(30):
        ortho_idx, grad_idx = rng.choice(n, M, replace=False), rng.choice(n, M, replace=False)
        ortho_views = tuple(jnp.asarray(v[ortho_idx]) for v in views)
        state = ortho_step(state, Batch(ortho_views))
        state, metrics = grad_step(
            state, grad_batch(state, tuple(jnp.asarray(v[grad_idx]) for v in views), ortho_views)
        )
        assert np.isfinite(float(metrics["loss"]))
    final = held_out_loss(state)
    # k = 4 > 3 clusters: one direction must vary inside clusters, so the loss cannot reach 0.
    assert final < 0.7 * initial


def test_view_weights_on_simplex(adam_states, views_a):
    _, alpha = embed_batch(adam_states[True], views_a)
    alpha = np.asarray(alpha)
    assert alpha.shape == (M, len(DIMS))
    assert (alpha >= 0).all()
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, atol=1e-6)


@pytest.fixture(scope="module")
def fitted_state(adam_states, views_a) -> SpecRaGEState:
    return ortho_step(copy(adam_states[False]), Batch(views_a))


def test_embed_in_chunks_equals_one_predict(fitted_state):
    views = tuple(np.asarray(v) for v in random_views(50, 9))
    y, alpha = embed(fitted_state, views, batch_size=16)  # 4 chunks, the last padded from 2 to 16 rows
    y_all, alpha_all = embed_batch(fitted_state, tuple(jnp.asarray(v) for v in views))
    assert y.shape == (50, 4) and alpha.shape == (50, 2)
    np.testing.assert_allclose(y, np.asarray(y_all), atol=1e-5)
    np.testing.assert_allclose(alpha, np.asarray(alpha_all), atol=1e-6)
    y_alone, alpha_alone = embed(fitted_state, [v[17:18] for v in views], batch_size=16)
    np.testing.assert_allclose(y_alone, y[17:18], atol=1e-5)
    np.testing.assert_allclose(alpha_alone, alpha[17:18], atol=1e-6)
    assert not np.allclose(y[17], y[18])  # rows differ, so a misaligned chunk would be caught


def test_embed_rejects_nan_view(fitted_state):
    views = [np.array(v) for v in random_views(10, 10)]
    views[1][3, 2] = np.nan
    with pytest.raises(ValueError, match="view 1"):
        embed(fitted_state, views)


def test_embed_rejects_wrong_feature_count(fitted_state):
    views = [np.zeros((10, 6), np.float32), np.zeros((10, 5), np.float32)]
    with pytest.raises(ValueError, match="view 0.*6 features"):
        embed(fitted_state, views)


def test_create_state_config_is_recorded():
    state = make_state(True, graph=dataclasses.replace(GRAPH, n_neighbors=3))
    assert state.graph.n_neighbors == 3
    np.testing.assert_array_equal(np.asarray(state.r_inv), np.eye(4))
    assert int(state.step) == 0
    assert state.learning_rate == pytest.approx(1e-3)


@pytest.mark.parametrize("mode", MODES)
def test_train_step_equals_ortho_step_then_grad_step(adam_states, views_a, views_b, mode):
    separate = ortho_step(copy(adam_states[mode]), Batch(views_a))
    separate, separate_metrics = grad_step(separate, grad_batch(separate, views_b, views_a))
    fused, fused_metrics = train_step(copy(adam_states[mode]), Batch(views_a), Batch(views_b))
    np.testing.assert_allclose(np.asarray(fused.r_inv), np.asarray(separate.r_inv), rtol=1e-5, atol=1e-6)
    assert float(fused_metrics["loss"]) == pytest.approx(float(separate_metrics["loss"]), rel=1e-5)
    for got, want in zip(jax.tree.leaves(fused.params), jax.tree.leaves(separate.params)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-6)
    assert int(fused.step) == int(separate.step) == 1


def test_loss_variants_weights_in_affinity_and_mass_normalization():
    """graph.weights_in_affinity=False is Eq. 1 on the fused output (alpha only in Y);
    graph.mass_normalized divides each view's energy by its weighted edge mass."""
    import dataclasses

    from specrage_jax.ops.laplacian import weighted_laplacian_loss
    from specrage_jax.ops.objective import batch_affinities
    from specrage_jax.training.steps import spectral_loss

    views = random_views(M, 11)
    for graph, expect in (
        (dataclasses.replace(GRAPH, weights_in_affinity=False), "eq1"),
        (dataclasses.replace(GRAPH, mass_normalized=True), "mass"),
        (GRAPH, "eq4"),
    ):
        state = make_state(False, graph=graph)
        loss, alpha = spectral_loss(state, state.params, Batch(views), state.r_inv)
        y = embed_batch(state, views)[0]
        w = batch_affinities(views, state.view_scales, graph)
        if expect == "eq1":
            want = weighted_laplacian_loss(y, w)
        elif expect == "mass":
            want = weighted_laplacian_loss(y, w, alpha, mass_normalized=True)
        else:
            want = weighted_laplacian_loss(y, w, alpha)
        np.testing.assert_allclose(float(loss), float(want), rtol=1e-5)
    assert not np.isclose(float(weighted_laplacian_loss(y, w)), float(weighted_laplacian_loss(y, w, alpha)))
