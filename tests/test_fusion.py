"""Fusion variants: model.fusion = weighting | average | linear | concat |
attention, everything else unchanged."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from specrage_jax.config import FUSIONS, OrthoConfig
from specrage_jax.data import make_blobs_views
from specrage_jax.nets.model import SpecRaGENet
from specrage_jax.nets.state import create_state
from specrage_jax.training.loop import train_loop
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train

DIMS = (5, 3)
SMALL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0)


def views(n: int = 12, seed: int = 0) -> list[jax.Array]:
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal((n, d)), jnp.float32) for d in DIMS]


@pytest.mark.parametrize("fusion", FUSIONS)
def test_every_fusion_gives_k_dims_and_weights_on_the_simplex(fusion: str) -> None:
    net = SpecRaGENet(DIMS, dataclasses.replace(SMALL, fusion=fusion), rngs=nnx.Rngs(0))
    y, alpha = net.fuse(views())
    assert y.shape == (12, 3) and alpha.shape == (12, 2)
    assert np.all(np.isfinite(np.asarray(y)))
    np.testing.assert_allclose(np.asarray(alpha).sum(axis=1), 1.0, rtol=1e-6)
    assert np.all(np.asarray(alpha) >= 0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_missing_view_is_left_out_of_every_fusion(fusion: str) -> None:
    net = SpecRaGENet(DIMS, dataclasses.replace(SMALL, fusion=fusion), rngs=nnx.Rngs(0))
    mask = np.ones((12, 2), bool)
    mask[3, 1] = False
    clean = views()
    noisy = [clean[0], clean[1].at[3].set(123.0)]  # what the missing row holds must not matter
    y1, a1 = net.fuse(clean, jnp.asarray(mask))
    y2, a2 = net.fuse(noisy, jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y2))
    assert float(a1[3, 1]) == 0.0 and float(a1[3, 0]) == pytest.approx(1.0)


def test_average_and_linear_fusions_start_as_the_plain_mean() -> None:
    xs = views()
    for fusion in ("average", "linear"):
        net = SpecRaGENet(DIMS, dataclasses.replace(SMALL, fusion=fusion), rngs=nnx.Rngs(0))
        y, alpha = net.fuse(xs)
        np.testing.assert_allclose(np.asarray(alpha), 0.5)
        np.testing.assert_allclose(np.asarray(y), np.asarray(net.view_outputs(xs).mean(axis=0)), rtol=1e-5, atol=1e-6)


def test_only_the_learnable_fusions_have_fusion_parameters() -> None:
    def fusion_params(fusion: str) -> set[str]:
        net = SpecRaGENet(DIMS, dataclasses.replace(SMALL, fusion=fusion), rngs=nnx.Rngs(0))
        return {str(path[0]) for path, _ in nnx.to_flat_state(nnx.state(net, nnx.Param))} - {"view_nets"}

    assert fusion_params("average") == set()
    assert fusion_params("linear") == {"view_logits"}
    assert fusion_params("concat") == {"concat_projection"}
    assert fusion_params("attention") == {"attention_query", "attention_key"}
    assert fusion_params("weighting") == {"weighting_net"}


@pytest.mark.parametrize("fusion", ["linear", "concat", "attention"])
def test_learnable_fusions_train_to_a_finite_orthogonal_embedding(fusion: str) -> None:
    data = make_blobs_views(n_samples=600, seed=0)
    model = dataclasses.replace(SMALL, n_components=data.n_classes, view_hidden=(32, 32), fusion=fusion)
    state = create_state(
        data.view_dims,
        model,
        fixed_graph(n_neighbors=10, scale_mode="batch"),
        OrthoConfig(),
        learning_rate=1e-3,
        seed=0,
    )
    state, history = train_loop(
        state,
        [v[:500] for v in data.views],
        [v[500:] for v in data.views],
        fixed_train(epochs=3, batch_size=250, progress=False),
        seed=0,
    )
    losses = [r.train_loss for r in history.epochs]
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0]
