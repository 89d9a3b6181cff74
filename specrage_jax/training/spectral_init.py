"""The closed-form start of the view nets' output layers (``train.spectral_init``).

Before the first step, the last layer of every view net is set to the minimizer of Eq. 4 over
what the random hidden layers span on one training batch. With the hidden layers and the view
weights fixed, the fused output is linear in the last layers: Y~ = Phi C, Phi (m, p) the
weighted last hidden features and a bias column per view (``SpecRaGENet.output_layer_features``),
C (p, k) the kernels stacked over the biases. Eq. 4 is a quadratic form c tr(Y^T L Y), so its
minimum subject to Y^T Y = m I over Y = Phi C is the bottom-k generalized eigenproblem
(Phi^T L Phi) c = lambda (Phi^T Phi) c. Training then starts from the best embedding those
features give (the joint eigenvectors as far as a linear read-out of them reaches) instead of a
random one, and reaches the plateau the random start reaches in a fraction of the steps.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from specrage_jax.config import ModelConfig
from specrage_jax.nets.model import OUTPUT_LAYER_FUSIONS, output_layers_linear
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.batches import batch_indices, checked_batch, effective_batch_size, mesh_batch_size
from specrage_jax.training.steps import Batch, rayleigh_matrices_at

SPECTRAL_INIT_STREAM = 12  # np.random.default_rng([seed, SPECTRAL_INIT_STREAM]) draws the batch's rows
FEATURE_RANK_TOL = 1e-6  # feature directions whose Gram eigenvalue is below this share of the largest are dropped


@jax.jit
def feature_rayleigh_matrices(state: SpecRaGEState, batch: Batch) -> tuple[jax.Array, jax.Array]:
    """(Phi^T L Phi, Phi^T Phi), (p, p) each, of a batch's output-layer features Phi (m, p): L is
    the Laplacian Eq. 4 (as configured) puts on the batch up to a constant factor, read, as in
    :func:`~specrage_jax.training.steps.rayleigh_matrices`, from the gradient of the loss at Phi."""
    phi, alpha = state.model().output_layer_features(batch.views, batch.mask)
    return rayleigh_matrices_at(state, batch, phi, alpha)


def bottom_generalized_eigenvectors(
    quadratic: np.ndarray, gram: np.ndarray, k: int, *, rank_tol: float = FEATURE_RANK_TOL
) -> np.ndarray | None:
    """C (p, k) minimizing tr(C^T A C) subject to C^T G C = I, A = ``quadratic``, G = ``gram``
    (p, p) symmetric, G positive semi-definite: G is whitened on its eigen-directions above
    ``rank_tol`` times its largest eigenvalue (the rest are dependent features) and the bottom k
    eigenvectors of the whitened A are mapped back. In float64. None when G has rank below k
    (the features cannot hold k independent outputs)."""
    a = np.asarray(quadratic, np.float64)
    g = np.asarray(gram, np.float64)
    scale, directions = np.linalg.eigh((g + g.T) / 2)
    keep = scale > rank_tol * max(float(scale[-1]), 0.0)
    if int(keep.sum()) < k or not np.all(np.isfinite(a)):
        return None
    whiten = directions[:, keep] / np.sqrt(scale[keep])
    _, vectors = np.linalg.eigh(whiten.T @ ((a + a.T) / 2) @ whiten)
    return whiten @ vectors[:, :k]


def with_output_layers(state: SpecRaGEState, coefficients: np.ndarray) -> SpecRaGEState:
    """``state`` with the view nets' last layers set from C (p, k) (``SpecRaGENet.set_output_layers``)."""
    # a model of copied parameters: setting a merged module's variables would change ``state``'s own
    model = nnx.merge(state.graphdef, jax.tree.map(jnp.copy, state.params), state.ortho)
    model.set_output_layers(jnp.asarray(coefficients, jnp.float32))
    return state.replace(params=nnx.state(model, nnx.Param))


def check_spectral_init(config: ModelConfig) -> None:
    """ValueError naming the settings when the fused output is not linear in the view nets' last
    layers (``train.spectral_init`` needs a weighted-sum fusion and a linear view-net output)."""
    if not output_layers_linear(config.fusion, config.output_activation):
        raise ValueError(
            f"train.spectral_init needs model.fusion in {OUTPUT_LAYER_FUSIONS} and model.output_activation "
            f"'none' (the fused output linear in the view nets' last layers); got fusion {config.fusion!r}, "
            f"output_activation {config.output_activation!r}: set train.spectral_init=false"
        )


def spectral_init(
    state: SpecRaGEState,
    views: Sequence[Any],
    codes: Sequence[Any] | None = None,
    *,
    batch_size: int,
    seed: int = 0,
    mesh: Mesh | None = None,
) -> SpecRaGEState:
    """``state`` with its view nets' output layers at the bottom-k solution of Eq. 4 over their
    last hidden features on one seeded training batch of ``batch_size`` rows (views (n, d_v),
    NaN rows for missing views; graph inputs ``codes``, None: the views), scaled so that the
    batch's fused output has Y~^T Y~ = m I. Where the features cannot hold k independent outputs
    the state is returned unchanged, with a RuntimeWarning."""
    n = len(views[0])
    m = mesh_batch_size(effective_batch_size(n, batch_size, state.graph.n_neighbors), batch_size, mesh)
    rows = np.sort(batch_indices(n, m, 1, np.random.default_rng([seed, SPECTRAL_INIT_STREAM]))[0])
    quadratic, gram = jax.device_get(feature_rayleigh_matrices(state, checked_batch(state, views, codes, rows, mesh)))
    coefficients = bottom_generalized_eigenvectors(quadratic, gram, state.r_inv.shape[0])
    if coefficients is None:
        warnings.warn(
            "train.spectral_init: the view nets' last hidden features span fewer than n_components "
            "independent directions on the batch; training starts from the random output layers",
            RuntimeWarning,
            stacklevel=2,
        )
        return state
    return with_output_layers(state, coefficients * np.sqrt(m))
