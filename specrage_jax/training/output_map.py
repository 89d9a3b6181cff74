"""The output map fitted after training (``model.output_scaling``): Rayleigh-Ritz of the trained
output on training batches, then the heat-kernel scaling of :mod:`specrage_jax.ops.spectral_scaling`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.ops.spectral_scaling import heat_kernel_map
from specrage_jax.training.batches import batch_indices, checked_batch, effective_batch_size
from specrage_jax.training.steps import rayleigh_matrices

OUTPUT_MAP_BATCHES = 4  # training batches whose Rayleigh matrices are summed (fewer if the set is smaller)
OUTPUT_MAP_STREAM = 11  # np.random.default_rng([seed, OUTPUT_MAP_STREAM]) draws their rows


def output_map_rows(n: int, batch_rows: int, *, seed: int) -> np.ndarray:
    """(b, batch_rows) sorted training rows of b = min(OUTPUT_MAP_BATCHES, n // batch_rows)
    disjoint seeded batches: every row once when one batch holds the whole set."""
    count = max(1, min(OUTPUT_MAP_BATCHES, n // batch_rows))
    rows = batch_indices(n, batch_rows, count, np.random.default_rng([seed, OUTPUT_MAP_STREAM]))
    return np.sort(rows, axis=1)


def fit_output_map(
    state: SpecRaGEState,
    views: Sequence[Any],
    codes: Sequence[Any] | None = None,
    *,
    n_clusters: int,
    batch_size: int,
    seed: int = 0,
    mesh: Mesh | None = None,
) -> SpecRaGEState:
    """``state`` with its output map P set as its model's ``output_scaling`` says. 'heat' sums
    Y^T L Y and Y^T Y over seeded training batches of ``batch_size`` rows (views (n, d_v), NaN
    rows for missing views; graph inputs ``codes``, None: the views) and takes
    :func:`~specrage_jax.ops.spectral_scaling.heat_kernel_map` for ``n_clusters`` (the identity
    unless the model has more components than that); 'none' gives the identity.

    Call it after training (the estimator and ``specrage train`` do), with the training rows and
    batch size the state trained on; ``embed`` then returns Y P. Where Y^T Y is singular (a
    degenerate output) the map stays the identity, with a RuntimeWarning."""
    k = state.r_inv.shape[0]
    if state.model().config.output_scaling == "none" or k <= n_clusters:
        return state.replace(output_map=jnp.eye(k, dtype=jnp.float32))
    n = len(views[0])
    m = effective_batch_size(n, batch_size, state.graph.n_neighbors)
    quadratic = jnp.zeros((k, k), jnp.float32)
    gram = jnp.zeros((k, k), jnp.float32)
    for rows in output_map_rows(n, m, seed=seed):
        batch_quadratic, batch_gram = rayleigh_matrices(state, checked_batch(state, views, codes, rows, mesh))
        quadratic, gram = quadratic + batch_quadratic, gram + batch_gram
    output_map = heat_kernel_map(quadratic, gram, n_clusters)
    if not bool(jnp.all(jnp.isfinite(output_map))):  # Y^T Y singular: a degenerate (collapsed) output
        warnings.warn(
            "the output map could not be fitted: the trained output's columns are linearly dependent on the "
            "training batches (a degenerate embedding); the output stays as trained",
            RuntimeWarning,
            stacklevel=2,
        )
        output_map = jnp.eye(k, dtype=jnp.float32)
    return state.replace(output_map=output_map)
