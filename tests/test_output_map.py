"""Tests for the output map (``model.output_scaling``): the Rayleigh-Ritz and heat-kernel math of
specrage_jax.ops.spectral_scaling against float64 NumPy/SciPy, the Rayleigh matrices of a batch
(training.steps.rayleigh_matrices), the fitted map (training.output_map) and how it is applied,
saved and restored."""

from __future__ import annotations

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

from specrage_jax import SpecRaGE
from specrage_jax.config import OrthoConfig
from specrage_jax.data.preprocess import unit_rows
from specrage_jax.nets.embed import embed, embed_outputs
from specrage_jax.nets.state import create_state, embed_batch
from specrage_jax.ops.affinity import knn_gaussian_affinity
from specrage_jax.ops.laplacian import fused_weighted_affinity, laplacian
from specrage_jax.ops.spectral_scaling import heat_kernel_map, heat_kernel_weights, ritz_pairs
from specrage_jax.training.checkpoint_files import tree_to_nested
from specrage_jax.training.checkpoint_state import state_from_trees, state_trees
from specrage_jax.training.output_map import fit_output_map, output_map_rows
from specrage_jax.training.steps import Batch, rayleigh_matrices
from tests.fixed_sections import fixed_graph, fixed_model
from tests.simulated_devices import run_child_result

K = 4


def random_problem(m: int = 60, k: int = K, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(Y (m, k), L (m, m)): a random full-rank output and the Laplacian of a random symmetric graph."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((m, k))
    w = rng.random((m, m)) * (rng.random((m, m)) < 0.2)
    w = (w + w.T) / 2
    np.fill_diagonal(w, 0.0)
    return y, np.diag(w.sum(1)) - w


def test_ritz_pairs_solve_the_generalized_problem_in_float64() -> None:
    y, lap = random_problem()
    quadratic, gram = y.T @ lap @ y, y.T @ y
    values, vectors = ritz_pairs(jnp.asarray(quadratic, jnp.float32), jnp.asarray(gram, jnp.float32))
    expected = sl.eigh(quadratic, gram, eigvals_only=True)
    np.testing.assert_allclose(values, expected, rtol=1e-4)
    u = np.asarray(vectors, np.float64)
    np.testing.assert_allclose(u.T @ gram @ u, np.eye(K), atol=1e-4)
    np.testing.assert_allclose(u.T @ quadratic @ u, np.diag(expected), atol=1e-3 * expected.max())


def test_heat_kernel_weights_keep_the_bottom_k_and_decay_beyond_by_1_over_e_per_lambda_k() -> None:
    values = jnp.asarray([0.1, 0.4, 0.5, 1.0, 1.3, 2.0])
    weights = np.asarray(heat_kernel_weights(values, n_clusters=4))
    np.testing.assert_allclose(weights[:4], weights[0])
    assert np.all(np.diff(weights[3:]) < 0)
    np.testing.assert_allclose(np.mean(weights**2), 1.0, rtol=1e-6)
    np.testing.assert_allclose(weights[4] / weights[3], np.exp(-0.3), rtol=1e-5)
    np.testing.assert_allclose(weights[5] / weights[3], np.exp(-1.0), rtol=1e-5)


def test_heat_kernel_weights_drop_the_directions_beyond_k_components_cut_apart() -> None:
    weights = np.asarray(heat_kernel_weights(jnp.asarray([0.0, 0.0, 0.0, 0.5]), n_clusters=3))
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[:3], weights[0])
    assert weights[3] < 1e-6 * weights[0]


def test_heat_kernel_map_is_the_identity_without_more_components_than_clusters() -> None:
    y, lap = random_problem()
    for n_clusters in (K, K + 2):
        p = heat_kernel_map(jnp.asarray(y.T @ lap @ y), jnp.asarray(y.T @ y), n_clusters=n_clusters)
        np.testing.assert_array_equal(p, np.eye(K))


def test_heat_kernel_map_keeps_the_variance_and_diagonalizes_the_laplacian() -> None:
    y, lap = random_problem()
    p = np.asarray(heat_kernel_map(jnp.asarray(y.T @ lap @ y), jnp.asarray(y.T @ y), n_clusters=3), np.float64)
    z = y @ p
    np.testing.assert_allclose(np.linalg.norm(z), np.linalg.norm(y), rtol=1e-4)
    energy = z.T @ lap @ z
    np.testing.assert_allclose(energy - np.diag(np.diag(energy)), 0.0, atol=1e-3 * np.abs(energy).max())
    variances = np.sum(z**2, axis=0)
    np.testing.assert_allclose(variances[:3], variances[0], rtol=1e-4)  # the bottom k keep their weight
    assert variances[3] < variances[2]  # beyond k, a dearer direction weighs less


def test_heat_kernel_map_does_not_depend_on_the_rotation_of_the_output() -> None:
    """The loss leaves Y's rotation free; Y Q P(Y Q) is Y P(Y) up to the signs of its columns."""
    y, lap = random_problem(seed=3)
    q, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((K, K)))

    def mapped(out: np.ndarray) -> np.ndarray:
        p = heat_kernel_map(jnp.asarray(out.T @ lap @ out), jnp.asarray(out.T @ out), n_clusters=2)
        return out @ np.asarray(p, np.float64)

    np.testing.assert_allclose(np.abs(mapped(y @ q)), np.abs(mapped(y)), atol=1e-3 * np.abs(mapped(y)).max())


# --- a small model --------------------------------------------------------------------------

DIMS = (6, 5)
M = 48


def small_state(output_scaling: str = "heat"):
    model = fixed_model(n_components=K, view_hidden=(16,), weighting_hidden=(8,), output_scaling=output_scaling)
    return create_state(DIMS, model, fixed_graph(n_neighbors=5), OrthoConfig(), seed=0, view_scales=(2.0, 2.0))


def small_views(n: int = M, seed: int = 1) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, d)).astype(np.float32) for d in DIMS)


def test_rayleigh_matrices_are_the_weighted_laplacians_quadratic_form() -> None:
    """Eq. 4 with the weights in the affinity: Y^T (sum_v L(W_v o alpha alpha^T)) Y up to one factor."""
    state = small_state()
    views = tuple(jnp.asarray(v) for v in small_views())
    quadratic, gram = rayleigh_matrices(state, Batch(views=views))
    y, alpha = state.model()(views)
    y, alpha = np.asarray(y, np.float64), np.asarray(alpha, np.float64)
    affinities = jnp.stack([knn_gaussian_affinity(x, 5, 2.0) for x in views])
    lap = np.asarray(laplacian(fused_weighted_affinity(affinities, jnp.asarray(alpha, jnp.float32))), np.float64)
    expected = y.T @ lap @ y
    factor = np.trace(np.asarray(quadratic)) / np.trace(expected)
    assert factor > 0
    np.testing.assert_allclose(np.asarray(quadratic) / factor, expected, atol=2e-3 * np.abs(expected).max())
    np.testing.assert_allclose(gram, y.T @ y, rtol=1e-4, atol=1e-4)


def test_fit_output_map_is_the_identity_without_scaling_or_extra_components() -> None:
    state = small_state("none").replace(output_map=2 * jnp.eye(K))
    fitted = fit_output_map(state, small_views(), n_clusters=3, batch_size=16)
    np.testing.assert_array_equal(fitted.output_map, np.eye(K))
    as_many = fit_output_map(
        small_state().replace(output_map=2 * jnp.eye(K)), small_views(), n_clusters=K, batch_size=16
    )
    np.testing.assert_array_equal(as_many.output_map, np.eye(K))  # heat, but no more components than clusters


def test_fit_output_map_sums_seeded_batches_of_the_training_batch_size() -> None:
    rows = output_map_rows(M, 16, seed=5)
    assert rows.shape == (3, 16) and len(np.unique(rows)) == 48  # disjoint: 48 // 16 = 3 batches
    np.testing.assert_array_equal(rows, output_map_rows(M, 16, seed=5))
    assert output_map_rows(M, M, seed=5).shape == (1, M)  # one batch: every row once
    views = small_views()
    state = small_state()
    fitted = fit_output_map(state, views, n_clusters=3, batch_size=16, seed=5)
    quadratic = gram = 0.0
    for batch_rows in rows:
        q, g = rayleigh_matrices(state, Batch(views=tuple(jnp.asarray(v[batch_rows]) for v in views)))
        quadratic, gram = quadratic + q, gram + g
    np.testing.assert_allclose(fitted.output_map, heat_kernel_map(quadratic, gram, 3), rtol=1e-5, atol=1e-6)


def test_fit_output_map_reads_missing_views_from_nan_rows_of_the_batch() -> None:
    views = small_views()
    holes = (views[0], views[1].copy())
    holes[1][:6] = np.nan  # view 1 missing for six samples
    fitted = fit_output_map(small_state(), holes, n_clusters=3, batch_size=M)
    assert np.isfinite(np.asarray(fitted.output_map)).all()
    mask = np.ones((M, 2), bool)
    mask[:6, 1] = False
    zeroed = (views[0], np.where(mask[:, 1:], views[1], 0.0).astype(np.float32))
    q, g = rayleigh_matrices(small_state(), Batch(views=tuple(jnp.asarray(v) for v in zeroed), mask=jnp.asarray(mask)))
    np.testing.assert_allclose(fitted.output_map, heat_kernel_map(q, g, 3), rtol=1e-5, atol=1e-6)


def test_a_degenerate_output_keeps_the_identity_map_with_a_warning() -> None:
    state = small_state()
    collapsed = state.replace(ortho=jax.tree.map(jnp.zeros_like, state.ortho))  # R^-1 = 0: Y = 0
    with pytest.warns(RuntimeWarning, match="output map could not be fitted"):
        fitted = fit_output_map(collapsed, small_views(), n_clusters=3, batch_size=16)
    np.testing.assert_array_equal(fitted.output_map, np.eye(K))


def test_embed_applies_the_output_map_and_keeps_the_trained_rows() -> None:
    state = small_state()
    views = small_views()
    fitted = fit_output_map(state, views, n_clusters=3, batch_size=32)
    p = np.asarray(fitted.output_map)
    assert not np.allclose(p, np.eye(K))
    outputs = embed_outputs(fitted, views, batch_size=32)
    trained, _ = embed(state, views, batch_size=32)  # identity map: the output as trained
    np.testing.assert_array_equal(outputs.trained, trained)
    np.testing.assert_allclose(outputs.mapped, trained @ p, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(embed(fitted, views, batch_size=32, rows="raw")[0], outputs.mapped)
    np.testing.assert_array_equal(embed(fitted, views, batch_size=32, rows="trained")[0], trained)
    first = tuple(jnp.asarray(v[:32]) for v in views)
    np.testing.assert_array_equal(embed_batch(fitted, first)[0], outputs.mapped[:32])
    with pytest.raises(ValueError, match="rows must be one of raw, unit, trained"):
        embed(fitted, views, rows="scaled")


def test_a_state_saved_without_an_output_map_restores_with_the_identity() -> None:
    state = small_state().replace(output_map=3 * jnp.eye(K))
    saved = tree_to_nested(state_trees(state, include_optimizer=False))  # as read back from disk
    restored = state_from_trees(small_state(), saved, where="here")
    np.testing.assert_array_equal(restored.output_map, 3 * np.eye(K))
    del saved["output_map"]
    restored = state_from_trees(jax.eval_shape(small_state), saved, where="here")
    np.testing.assert_array_equal(restored.output_map, np.eye(K))


@pytest.mark.slow  # two estimator fits (~10 s)
def test_the_estimator_scales_by_default_and_not_with_none() -> None:
    views = [np.random.default_rng(0).standard_normal((90, d)).astype(np.float32) for d in DIMS]
    scaled = SpecRaGE(n_components=5, n_clusters=3, random_state=0).fit(views)
    assert not np.allclose(scaled.state_.output_map, np.eye(scaled.n_components_))
    z = scaled.transform(views)
    p = np.asarray(scaled.state_.output_map)
    unmapped = copy.copy(scaled)
    unmapped.state_ = scaled.state_.replace(output_map=jnp.eye(scaled.n_components_))
    # unit rows by default: scaling a row commutes with P, so unit(unit(Y) P) = unit(Y P)
    np.testing.assert_allclose(z, unit_rows(unmapped.transform(views) @ p), rtol=1e-4, atol=1e-5)
    plain = SpecRaGE(n_components=5, n_clusters=3, random_state=0, config_overrides=("model.output_scaling=none",))
    plain.fit(views)
    np.testing.assert_array_equal(plain.state_.output_map, np.eye(plain.n_components_))
    restored = pickle.loads(pickle.dumps(scaled))
    np.testing.assert_array_equal(restored.transform(views), z)


MESH_CHILD = """
import json
import jax, numpy as np
from specrage_jax.config import OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.training import sharding as sh
from specrage_jax.training.output_map import fit_output_map
from tests.fixed_sections import fixed_graph, fixed_model

assert jax.device_count() == 2, jax.devices()
model = fixed_model(n_components=4, view_hidden=(16,), weighting_hidden=(8,))
state = create_state((6, 5), model, fixed_graph(n_neighbors=5), OrthoConfig(), seed=0, view_scales=(2.0, 2.0))
rng = np.random.default_rng(1)
views = tuple(rng.standard_normal((96, d)).astype(np.float32) for d in (6, 5))
mesh = sh.make_data_mesh(2)
single = fit_output_map(state, views, n_clusters=3, batch_size=32, seed=3)
sharded = fit_output_map(sh.replicate(state, mesh), views, n_clusters=3, batch_size=32, seed=3, mesh=mesh)
print("RESULT " + json.dumps({
    "max_abs_diff": float(np.max(np.abs(np.asarray(single.output_map) - np.asarray(sharded.output_map)))),
    "max_abs": float(np.max(np.abs(np.asarray(single.output_map)))),
    "replicated": sh.is_replicated_on(sharded.output_map, mesh),
}))
"""


@pytest.mark.slow  # a child process on two simulated devices (~10 s)
def test_the_output_map_of_a_sharded_fit_equals_the_single_device_one() -> None:
    result = run_child_result(MESH_CHILD, devices=2, timeout=300)
    assert result["replicated"]
    assert result["max_abs"] > 0.1
    assert result["max_abs_diff"] <= 1e-4 * result["max_abs"]
