"""Samples with one view: the single-view nets (``model.single_view_nets``, fitted after training
to the fused output) and the view alignment term (``graph.view_alignment``, ops/agreement.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax import SpecRaGE
from specrage_jax.api.pipeline import model_inputs
from specrage_jax.config import OrthoConfig
from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.nets.state import create_state, embed_batch
from specrage_jax.ops.agreement import aligned_objective, view_disagreement
from tests.fixed_sections import fixed_graph, fixed_model

SMALL = dict(
    n_clusters=10,
    n_neighbors=10,
    batch_size=512,
    max_epochs=3,  # 3 epochs of 10 steps: 30 steps on 630 training rows in batches of 512
    view_hidden=(64, 64),
    weighting_hidden=(16,),
    random_state=0,
)


@pytest.fixture(scope="module")
def digits():
    data = load_dataset("digits", seed=0)
    rows = np.random.default_rng(0).permutation(data.n_samples)[:700]
    return [np.asarray(v[rows], np.float32) for v in data.views], data.labels[rows]


@pytest.fixture(scope="module")
def fitted(digits):
    views, _ = digits
    with_nets = SpecRaGE(**SMALL).fit(views)
    without = SpecRaGE(**SMALL, config_overrides=("model.single_view_nets=false",)).fit(views)
    return with_nets, without


def one_view_mask(n: int, view: int) -> np.ndarray:
    mask = np.zeros((n, 2), bool)
    mask[:, view] = True
    return mask


def test_single_view_nets_leave_samples_with_every_view_bitwise_unchanged(digits, fitted):
    views, _ = digits
    with_nets, without = fitted
    assert with_nets.config_.model.single_view_nets and not without.config_.model.single_view_nets
    np.testing.assert_array_equal(with_nets.transform(views), without.transform(views))
    np.testing.assert_array_equal(with_nets.labels_, without.labels_)


def test_a_one_view_sample_lands_nearer_the_fused_point_than_its_view_nets_part(digits, fitted):
    """Each view's one-view embedding against the complete embedding of the same rows: the
    single-view net's rows lie nearer (in the unit-row embedding k-means reads) than the view
    net's part of the fused sum, and cluster nearly as well as the complete rows."""
    views, labels = digits
    with_nets, without = fitted
    n = len(labels)
    complete = with_nets.transform(views)
    complete_acc = kmeans_metrics(complete, labels, n_clusters=10, seed=0)["acc"]
    for v in range(2):
        alone = with_nets.transform(views, mask=one_view_mask(n, v))
        part = without.transform(views, mask=one_view_mask(n, v))
        near = np.mean(np.sum((alone - complete) ** 2, axis=1))
        far = np.mean(np.sum((part - complete) ** 2, axis=1))
        assert near < 0.5 * far, f"view {v}: {near:.3f} against {far:.3f}"
        acc = kmeans_metrics(alone, labels, n_clusters=10, seed=0)["acc"]
        assert acc >= complete_acc - 0.05, f"view {v}: ACC {acc:.3f} against {complete_acc:.3f} complete"


def test_single_view_nets_survive_save_and_load(digits, fitted, tmp_path):
    views, _ = digits
    with_nets, _ = fitted
    mask = one_view_mask(len(views[0]), 1)
    loaded = SpecRaGE.load(with_nets.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.transform(views, mask=mask), with_nets.transform(views, mask=mask))


def test_untrained_single_view_nets_defer_to_the_fusion():
    """A state built with single-view nets but never through their stage embeds a one-view
    sample as a model without them does (the untrained nets' output layers are zero)."""
    dims = (4, 3)
    graph, ortho = fixed_graph(n_neighbors=3), OrthoConfig()
    model = fixed_model(n_components=3, view_hidden=(8,), weighting_hidden=(4,))
    states = [
        create_state(dims, m, graph, ortho, seed=0, view_scales=[1.0, 1.0])
        for m in (model, fixed_model(**{**model.__dict__, "single_view_nets": True}))
    ]
    rng = np.random.default_rng(0)
    views = tuple(jnp.asarray(rng.standard_normal((6, d)), jnp.float32) for d in dims)
    mask = jnp.asarray(np.tile([True, False], (6, 1)))
    plain, with_nets = (embed_batch(s, views, mask)[0] for s in states)
    assert not bool(states[1].model().single_view_nets_trained())
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(with_nets))


def test_view_disagreement_is_the_share_of_the_fused_power_the_views_miss():
    rng = np.random.default_rng(1)
    fused = rng.standard_normal((5, 3)).astype(np.float32)
    outputs = np.stack([fused, fused + 1.0]).astype(np.float32)  # view 0 agrees, view 1 is 1 off per entry
    expected = 5 * 3 / np.sum(fused.astype(np.float64) ** 2)
    np.testing.assert_allclose(float(view_disagreement(jnp.asarray(outputs), jnp.asarray(fused))), expected, rtol=1e-5)
    present = np.ones((5, 2), bool)
    present[:, 1] = False  # the disagreeing view is missing everywhere: nothing left to miss
    assert float(view_disagreement(jnp.asarray(outputs), jnp.asarray(fused), jnp.asarray(present))) == 0.0


def test_the_aligned_objective_pulls_the_views_only():
    """strength 0 is the loss itself; otherwise the value is loss (1 + mu D) and the fused
    target gets no gradient from the term."""
    fused = jnp.asarray(np.random.default_rng(2).standard_normal((4, 2)), jnp.float32)
    outputs = jnp.stack([fused * 0.5, fused * 1.5])
    loss = jnp.float32(0.3)
    assert aligned_objective(loss, outputs, fused, 0.0) is loss
    value = aligned_objective(loss, outputs, fused, 2.0)
    np.testing.assert_allclose(float(value), 0.3 * (1 + 2.0 * float(view_disagreement(outputs, fused))), rtol=1e-6)
    through_fused = jax.grad(lambda y: aligned_objective(loss, outputs, y, 2.0))(fused)
    np.testing.assert_array_equal(np.asarray(through_fused), 0.0)
    through_views = jax.grad(lambda o: aligned_objective(loss, o, fused, 2.0))(outputs)
    assert float(jnp.sum(jnp.abs(through_views))) > 0


def test_view_alignment_brings_the_view_nets_outputs_onto_the_fused_output(digits):
    """Trained with graph.view_alignment, each view net's output (through R^-1) lies much nearer
    the fused output than the paper's form leaves it."""
    views, _ = digits
    disagreement = {}
    for strength in (0.0, 1.0):
        est = SpecRaGE(
            **SMALL,
            config_overrides=("model.single_view_nets=false", f"graph.view_alignment={strength}"),
        ).fit(views)
        model = est.state_.model()
        inputs, _ = model_inputs(views, np.ones((len(views[0]), 2), bool), scalers=est.scalers_, encoders=None)
        scaled = [jnp.asarray(x, jnp.float32) for x in inputs]
        fused, _ = model(scaled)
        outputs = model.view_outputs(scaled) @ model.r_inv[...]
        disagreement[strength] = float(view_disagreement(outputs, fused))
    assert disagreement[1.0] < 0.5 * disagreement[0.0], disagreement
