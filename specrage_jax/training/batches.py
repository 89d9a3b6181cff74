"""The rows a training step reads: the epoch's batch streams and batch sizes, the checked
training inputs with their missing-view masks, and the batches gathered from them (one batch of
rows, on the device or sharded over a mesh, or the whole training set with its graph built once).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from specrage_jax.data.lazy import check_streamed_views, is_streamed, streamed_mask
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.ops.objective import batch_affinities, edge_graph
from specrage_jax.training.distributed import local_rows
from specrage_jax.training.sharding import check_batch_divisible, round_batch_to_devices, shard_batch
from specrage_jax.training.steps import Batch
from specrage_jax.validation import as_view_arrays, check_view_dims, fill_missing_rows, has_no_rows, view_presence


def epoch_rngs(seed: int, epoch: int) -> tuple[np.random.Generator, np.random.Generator]:
    """(gradient-batch, orthogonalization-batch) generators of one epoch, independent streams
    determined by (seed, epoch) alone."""
    return np.random.default_rng([seed, epoch, 0]), np.random.default_rng([seed, epoch, 1])


def effective_batch_size(n_train: int, batch_size: int, n_neighbors: int) -> int:
    """m = min(batch_size, n_train): a dataset smaller than the batch still trains.

    Raises ValueError if even the whole training set is too small for the kNN graph.
    """
    m = min(batch_size, n_train)
    if m <= n_neighbors:
        raise ValueError(
            f"a batch of {m} samples cannot hold {n_neighbors} neighbours per point: "
            f"lower graph.n_neighbors or provide more training samples"
        )
    return m


def batch_indices(n: int, batch_size: int, n_batches: int, rng: np.random.Generator) -> np.ndarray:
    """(n_batches, batch_size) sample indices from consecutive random permutations of range(n).

    Every sample is seen once per permutation; batches never repeat a sample unless
    batch_size > n, which ``effective_batch_size`` rules out.
    """
    needed = n_batches * batch_size
    perms = [rng.permutation(n) for _ in range(math.ceil(needed / n))]
    return np.concatenate(perms)[:needed].reshape(n_batches, batch_size)


def take_batch(
    views: Sequence[np.ndarray],
    codes: Sequence[np.ndarray] | None,
    idx: np.ndarray,
    mesh: Mesh | None = None,
    mask: np.ndarray | None = None,
) -> Batch:
    """The rows ``idx`` as a Batch on the default device, or sharded over ``mesh``'s 'data' axis;
    ``mask`` (n, V) marks missing views (see :func:`missing_view_mask`). Views streamed from disk
    read missing views as NaN rows: those are set to 0 here, as in-memory views already are.
    Several processes: each gathers only its own block of ``idx`` (:func:`distributed.local_rows`)."""
    if mesh is not None:
        idx = local_rows(idx)
    batch_mask = None if mask is None else mask[idx]
    gathered = tuple(v[idx] for v in views)
    if batch_mask is not None and is_streamed(views):
        gathered = fill_missing_rows(gathered, batch_mask, 0.0)
    rows = Batch(
        views=gathered,
        codes=None if codes is None else tuple(c[idx] for c in codes),
        mask=batch_mask,
    )
    return jax.tree.map(jnp.asarray, rows) if mesh is None else shard_batch(rows, mesh)


def mesh_batch_size(m: int, config_batch_size: int, mesh: Mesh | None) -> int:
    """m for a run over ``mesh``: the configured batch size must divide over the devices
    (ValueError naming both otherwise); a smaller dataset's m is rounded down to a multiple."""
    if mesh is None:
        return m
    check_batch_divisible(config_batch_size, mesh)
    return round_batch_to_devices(m, mesh)


def checked_batch(
    state: SpecRaGEState, views: Sequence[Any], codes: Sequence[Any] | None, rows: np.ndarray, mesh: Mesh | None
) -> Batch:
    """The training rows ``rows`` (m,) of the views (and graph inputs ``codes``, None: the views)
    as a Batch, checked against the model, missing rows set to 0: only the rows a batch reads are
    gathered and checked, not the whole set (training checked it already; views streamed from
    disk read missing views as NaN rows)."""
    gathered = as_view_arrays([v[rows] for v in views], what="views", allow_missing=True)
    check_view_dims(gathered, state.model().view_dims, what="views")
    batch_views, mask = missing_view_mask(gathered, what="views")
    batch_codes = None if codes is None else codes_of_present_rows([c[rows] for c in codes], mask, what="codes")
    return take_batch(batch_views, batch_codes, np.arange(len(rows)), mesh, mask)


def missing_view_mask(views: Sequence[np.ndarray], *, what: str) -> tuple[tuple[np.ndarray, ...], np.ndarray | None]:
    """(views with missing rows set to 0, mask (n, V) bool or None) of views in which an all-NaN
    row marks a view the sample does not have; None when every view is present, so complete
    data takes the complete-data computation unchanged.

    Raises:
      ValueError: naming the view (rows with only some NaN, infinite values) or the first sample
        with no view at all.
    """
    present = view_presence(views, what=what)
    if present.all():
        return tuple(views), None
    return fill_missing_rows(views, present, 0.0), present


def check_training_inputs(
    state: SpecRaGEState, train_views: Sequence[np.ndarray], val_views: Sequence[np.ndarray]
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], np.ndarray | None, np.ndarray | None]:
    """Validated float32 copies of the training and validation views, matching the model, with
    their missing-view masks (:func:`missing_view_mask`; None where every view is present).

    Views streamed from disk (``data.lazy.MemmapRows``) are passed through unread: their widths
    and row counts are checked here, their mask comes from the dataset's mask file
    (:func:`data.lazy.streamed_mask`, None when complete), and their values were checked when
    they were written (``write_views_memmap`` refuses partial NaN and inf), so batches are
    gathered as the loop needs them (:func:`take_batch` zeroes their missing rows).
    """
    view_dims = state.model().view_dims
    checked: list[tuple[np.ndarray, ...]] = []
    masks: list[np.ndarray | None] = []
    for what, views in (("train_views", train_views), ("val_views", val_views)):
        if what == "val_views" and has_no_rows(views):  # no validation split: the training loss drives
            checked.append(tuple(np.zeros((0, d), np.float32) for d in view_dims))
            masks.append(None)
            continue
        if is_streamed(views):
            arrays = check_streamed_views(views, what=what)
            mask = streamed_mask(arrays, what=what)
        else:
            arrays, mask = missing_view_mask(as_view_arrays(views, what=what, allow_missing=True), what=what)
        check_view_dims(arrays, view_dims, what=what)
        checked.append(arrays)
        masks.append(mask)
    return checked[0], checked[1], masks[0], masks[1]


def codes_of_present_rows(codes: Sequence[np.ndarray], mask: np.ndarray | None, *, what: str) -> tuple[np.ndarray, ...]:
    """Validated graph codes; where a view is missing (``mask`` False) the row is set to 0
    whatever it holds (NaN, or a code computed from a placeholder row): no graph uses it."""
    arrays = as_view_arrays(codes, what=what, allow_missing=mask is not None)
    return arrays if mask is None else fill_missing_rows(arrays, mask, 0.0)


def whole_set_batch(
    state: SpecRaGEState,
    views: Sequence[np.ndarray],
    codes: Sequence[np.ndarray] | None,
    mask: np.ndarray | None = None,
) -> Batch:
    """The whole training set as one Batch on the device, its kNN graph built once.

    When the batch holds every training row, each step's ortho and gradient batches are the
    same rows (their order does not change R^-1 or the loss), and the graph, which does not
    depend on the parameters, is the same every step. ``mask`` (n, V): missing views.
    """
    arrays = tuple(jnp.asarray(v) for v in views)
    inputs = arrays if codes is None else tuple(jnp.asarray(c) for c in codes)
    present = None if mask is None else jnp.asarray(mask)
    graph = edge_graph(_graph_of(inputs, state.view_scales, state.graph, present))
    return Batch(views=arrays, affinities=graph, mask=present)


_graph_of = jax.jit(batch_affinities, static_argnums=2)
