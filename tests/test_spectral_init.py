"""Tests for the closed-form start of the view nets' output layers (training.spectral_init): the
generalized eigen-solver against SciPy, the layout of the output-layer features, the optimality
and orthonormality of the started output, and where it does not apply."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

from specrage_jax.config import ExperimentConfig, OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.training.initial_state import train_model
from specrage_jax.training.spectral_init import (
    bottom_generalized_eigenvectors,
    check_spectral_init,
    feature_rayleigh_matrices,
    spectral_init,
)
from specrage_jax.training.steps import Batch, rayleigh_matrices
from tests.fixed_sections import FIXED, fixed_experiment, fixed_graph, fixed_model, fixed_train

K = 3
DIMS = (6, 5)
HIDDEN = 12
M = 60


def symmetric_pair(p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(A, G) (p, p): A symmetric positive semi-definite, G symmetric positive definite."""
    rng = np.random.default_rng(seed)
    x, z = rng.standard_normal((2 * p, p)), rng.standard_normal((2 * p, p))
    return x.T @ x, z.T @ z


def test_bottom_generalized_eigenvectors_match_scipy() -> None:
    a, g = symmetric_pair(8)
    c = bottom_generalized_eigenvectors(a, g, K)
    assert c is not None and c.shape == (8, K)
    np.testing.assert_allclose(c.T @ g @ c, np.eye(K), atol=1e-8)
    np.testing.assert_allclose(np.diag(c.T @ a @ c), sl.eigh(a, g, eigvals_only=True)[:K], rtol=1e-8)


def test_dependent_features_are_dropped_and_too_few_give_none() -> None:
    a, g = symmetric_pair(5)
    basis = np.random.default_rng(1).standard_normal((5, 7))  # 7 features spanning 5 directions
    c = bottom_generalized_eigenvectors(basis.T @ a @ basis, basis.T @ g @ basis, K)
    assert c is not None
    lifted = basis @ c  # the same problem in the 5 independent directions
    np.testing.assert_allclose(np.diag(lifted.T @ a @ lifted), sl.eigh(a, g, eigvals_only=True)[:K], rtol=1e-6)
    low_rank = basis[:2]  # 7 features spanning 2 directions: fewer than K
    a2, g2 = a[:2, :2], g[:2, :2]
    assert bottom_generalized_eigenvectors(low_rank.T @ a2 @ low_rank, low_rank.T @ g2 @ low_rank, K) is None


def small_state(**model: object):
    config = fixed_model(n_components=K, view_hidden=(HIDDEN,), weighting_hidden=(8,), temperature=1.0, **model)
    return create_state(DIMS, config, fixed_graph(n_neighbors=5), OrthoConfig(), seed=0, view_scales=(2.0, 2.0))


def clustered_views(n: int = M, seed: int = 1) -> tuple[np.ndarray, ...]:
    """Two views of three separated groups."""
    rng = np.random.default_rng(seed)
    groups = np.arange(n) % 3
    return tuple(
        (rng.standard_normal((3, d))[groups] * 4 + rng.standard_normal((n, d))).astype(np.float32) for d in DIMS
    )


def test_output_layer_features_reproduce_the_fused_output() -> None:
    """Y~ = Phi C with C the view nets' kernels stacked over their biases."""
    state = small_state()
    model = state.model()
    views = tuple(jnp.asarray(v) for v in clustered_views())
    phi, alpha = model.output_layer_features(views)
    assert phi.shape == (M, len(DIMS) * HIDDEN + len(DIMS))
    kernels = [net.layers[-1].kernel[...] for net in model.view_nets]
    biases = [net.layers[-1].bias[...][None, :] for net in model.view_nets]
    y_tilde, expected_alpha = model.fuse(views)
    np.testing.assert_allclose(phi @ jnp.concatenate([*kernels, *biases]), y_tilde, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(alpha, expected_alpha)


def test_the_started_output_is_orthonormal_and_minimizes_the_loss_over_the_features() -> None:
    """On the batch it was solved on: Y~^T Y~ = m I, and no other read-out of the same features
    (here: random ones) has a lower generalized Rayleigh trace tr((C^T G C)^-1 C^T A C)."""
    state, views = small_state(), clustered_views()
    started = spectral_init(state, views, batch_size=M, seed=0)
    batch = Batch(views=tuple(jnp.asarray(v) for v in views))  # the whole set: the batch it was solved on
    quadratic, gram = (np.asarray(x, np.float64) for x in rayleigh_matrices(started, batch))
    np.testing.assert_allclose(gram / M, np.eye(K), atol=1e-3)
    solved = np.trace(np.linalg.solve(gram, quadratic))
    features_quadratic, features_gram = (np.asarray(x, np.float64) for x in feature_rayleigh_matrices(state, batch))
    rng = np.random.default_rng(2)
    for _ in range(20):
        c = rng.standard_normal((features_gram.shape[0], K))
        other = np.trace(np.linalg.solve(c.T @ features_gram @ c, c.T @ features_quadratic @ c))
        assert solved <= other * (1 + 1e-3)
    random_quadratic, random_gram = (np.asarray(x, np.float64) for x in rayleigh_matrices(state, batch))
    assert solved < np.trace(np.linalg.solve(random_gram, random_quadratic))


def test_only_the_output_layers_change() -> None:
    state, views = small_state(), clustered_views()
    started = spectral_init(state, views, batch_size=M, seed=0)
    before, after = state.model(), started.model()
    for old, new in zip(before.view_nets, after.view_nets):
        for old_layer, new_layer in zip(old.layers[:-1], new.layers[:-1]):
            np.testing.assert_array_equal(old_layer.kernel[...], new_layer.kernel[...])
        assert not np.array_equal(old.layers[-1].kernel[...], new.layers[-1].kernel[...])
    np.testing.assert_array_equal(before.weighting_net.layers[0].kernel[...], after.weighting_net.layers[0].kernel[...])


def test_missing_views_start_without_nan() -> None:
    views = [v.copy() for v in clustered_views()]
    views[1][:10] = np.nan  # the first 10 samples lack view 1
    started = spectral_init(small_state(), views, batch_size=M, seed=0)
    for net in started.model().view_nets:
        assert np.all(np.isfinite(net.layers[-1].kernel[...]))


@pytest.mark.parametrize(("fusion", "output_activation"), [("concat", "none"), ("weighting", "tanh")])
def test_a_fusion_not_linear_in_the_output_layers_is_refused_by_name(fusion: str, output_activation: str) -> None:
    with pytest.raises(ValueError, match=r"train.spectral_init=false"):
        check_spectral_init(fixed_model(fusion=fusion, output_activation=output_activation))
    config = fixed_experiment(
        model=fixed_model(n_components=K, fusion=fusion, output_activation=output_activation),
        train=fixed_train(spectral_init=True, epochs=1),
    )
    with pytest.raises(ValueError, match=rf"fusion {fusion!r}"):
        train_model(list(clustered_views()), [], config, seed=0)


def test_the_default_estimator_starts_from_solved_output_layers() -> None:
    assert ExperimentConfig().train.spectral_init
    assert not FIXED.train.spectral_init  # the presets keep the paper's random start
