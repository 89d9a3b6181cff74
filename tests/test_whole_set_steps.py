"""The whole-set training path the defaults select: the edge-list loss equals the dense one, a
whole-set step equals a train step, and a whole-set epoch is its steps one after another."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.config import OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.ops.laplacian import edge_laplacian_loss, weighted_laplacian_loss
from specrage_jax.ops.objective import batch_affinities, edge_graph
from specrage_jax.training.steps import (
    Batch,
    full_batch_epoch,
    full_batch_step,
    train_step,
)
from tests.fixed_sections import fixed_graph, fixed_model


def test_edge_list_loss_equals_the_dense_loss():
    rng = np.random.default_rng(7)
    views = tuple(jnp.asarray(rng.standard_normal((40, 3)), jnp.float32) for _ in range(2))
    affinities = batch_affinities(views, jnp.ones(2), fixed_graph(n_neighbors=5, scale_mode="batch"))
    graph = edge_graph(affinities)
    y = jnp.asarray(rng.standard_normal((40, 4)), jnp.float32)
    alpha = jax.nn.softmax(jnp.asarray(rng.standard_normal((40, 2)), jnp.float32))
    for weights in (None, alpha):
        for mass in (False, True):
            dense = weighted_laplacian_loss(y, affinities, weights, mass_normalized=mass)
            edges = edge_laplacian_loss(y, graph.senders, graph.receivers, graph.weights, weights, mass_normalized=mass)
            np.testing.assert_allclose(edges, dense, rtol=1e-5)


@pytest.mark.parametrize("through", [True, False])
def test_full_batch_step_equals_train_step_on_the_same_batch(through):
    rng = np.random.default_rng(8)
    views = tuple(jnp.asarray(rng.standard_normal((48, 5)), jnp.float32) for _ in range(2))
    graph = fixed_graph(n_neighbors=5)

    def make():
        return create_state(
            [5, 5],
            fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,)),
            graph,
            OrthoConfig(grad_through_r_inv=through),
            learning_rate=1e-3,
            seed=0,
            view_scales=[1.0, 1.0],
        )

    reference, _ = train_step(make(), Batch(views=views), Batch(views=views, ortho_views=views if through else None))
    batch = Batch(views=views, affinities=edge_graph(batch_affinities(views, jnp.ones(2), graph)))
    fused, metrics = full_batch_step(make(), batch)
    _, reference_metrics = train_step(
        make(), Batch(views=views), Batch(views=views, ortho_views=views if through else None)
    )
    np.testing.assert_allclose(metrics["loss"], reference_metrics["loss"], rtol=1e-5)
    np.testing.assert_allclose(metrics["grad_norm"], reference_metrics["grad_norm"], rtol=1e-4)
    np.testing.assert_allclose(fused.r_inv, reference.r_inv, rtol=1e-4, atol=1e-5)
    # Adam's first step moves each parameter by about lr * sign(g): where g is near 0 that sign
    # follows the rounding of the two (equal) sums, so parameters agree to a fraction of lr.
    for a, b in zip(jax.tree.leaves(fused.params), jax.tree.leaves(reference.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-2 * 1e-3)


def test_a_whole_set_epoch_is_its_steps_one_after_another():
    """full_batch_epoch (one compiled scan, what train_loop runs) ends where as many
    full_batch_step calls end: same parameters, R^-1 and per-step losses and view weights."""
    rng = np.random.default_rng(9)
    views = tuple(jnp.asarray(rng.standard_normal((40, 4)), jnp.float32) for _ in range(2))
    graph = fixed_graph(n_neighbors=5)
    batch = Batch(views=views, affinities=edge_graph(batch_affinities(views, jnp.ones(2), graph)))

    def make():
        model = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))
        return create_state([4, 4], model, graph, OrthoConfig(), learning_rate=1e-2, seed=0, view_scales=[1.0, 1.0])

    stepped, losses, weights = make(), [], []
    for _ in range(4):
        stepped, metrics = full_batch_step(stepped, batch)
        losses.append(metrics["loss"])
        weights.append(metrics["view_weights"])
    scanned, epoch = full_batch_epoch(make(), batch, 4)
    assert epoch["loss"].shape == (4,) and epoch["view_weights"].shape == (4, 2)
    assert len(set(np.asarray(losses).tolist())) == 4  # the steps moved the state
    np.testing.assert_allclose(epoch["loss"], np.asarray(losses), rtol=1e-5)
    np.testing.assert_allclose(epoch["view_weights"], np.asarray(weights), rtol=1e-5)
    np.testing.assert_allclose(scanned.r_inv, stepped.r_inv, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(scanned.params), jax.tree.leaves(stepped.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
