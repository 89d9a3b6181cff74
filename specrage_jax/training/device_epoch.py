"""A whole training epoch as one compiled call, on training data held in device memory.

The default loop (:func:`specrage_jax.training.loop.train_loop`) gathers each batch on the host and copies it to
the device: on a GPU that copy and the per-step Python dispatch, not the step, bound the speed
(an H200 ran 1M InfiniteMNIST samples at 7.1 s per epoch, input-bound). When the training set
fits in device memory (``train.data_on_device``), it is put there once and every epoch is one
``lax.scan`` of ``steps.train_step`` over the epoch's (ortho, grad) index arrays: batches are
gathered on the device with ``jnp.take``. The indices are the ones the host loop draws, so both
paths train on the same batches in the same order.

On a ``'data'`` mesh the training arrays are replicated (every device can gather any row) and
each gathered batch is constrained to the batch sharding, so the step keeps its global-batch
semantics (one m x m graph over the whole batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding

from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.sharding import batch_sharding, replicate
from specrage_jax.training.steps import Batch, train_step


class DeviceData(NamedTuple):
    """Training views (V arrays (n, d_v)), optional graph codes (V arrays (n, c_v)) and the
    optional missing-view mask ((n, V) bool, True = present) on device."""

    views: tuple[jax.Array, ...]
    codes: tuple[jax.Array, ...] | None = None
    mask: jax.Array | None = None


class EpochMetrics(NamedTuple):
    """Per-step training losses (steps,) and batch-mean view weights (steps, V)."""

    losses: jax.Array
    view_weights: jax.Array


def put_training_data(
    views: Sequence[np.ndarray],
    codes: Sequence[np.ndarray] | None = None,
    mesh: Mesh | None = None,
    mask: np.ndarray | None = None,
) -> DeviceData:
    """The training arrays in device memory: on the default device, or replicated on ``mesh``."""
    data = DeviceData(
        views=tuple(jnp.asarray(v) for v in views),
        codes=None if codes is None else tuple(jnp.asarray(c) for c in codes),
        mask=None if mask is None else jnp.asarray(mask),
    )
    return data if mesh is None else replicate(data, mesh)


def gather_rows(arrays: tuple[jax.Array, ...], idx: jax.Array, sharding: NamedSharding | None) -> tuple[jax.Array, ...]:
    """Rows ``idx`` (m,) of every array, with the batch split over ``sharding``'s mesh if given."""
    rows = tuple(jnp.take(a, idx, axis=0) for a in arrays)
    return rows if sharding is None else jax.lax.with_sharding_constraint(rows, sharding)


def _mask_rows(mask: jax.Array | None, idx: jax.Array, sharding: NamedSharding | None) -> jax.Array | None:
    return None if mask is None else gather_rows((mask,), idx, sharding)[0]


@partial(jax.jit, donate_argnums=0, static_argnames=("sharding", "frozen_view_nets"))
def _scan_epoch(
    state: SpecRaGEState,
    data: DeviceData,
    ortho_idx: jax.Array,
    grad_idx: jax.Array,
    sharding: NamedSharding | None = None,
    frozen_view_nets: bool = False,
) -> tuple[SpecRaGEState, EpochMetrics]:
    def body(
        state: SpecRaGEState, idx: tuple[jax.Array, jax.Array]
    ) -> tuple[SpecRaGEState, tuple[jax.Array, jax.Array]]:
        o, g = idx
        ortho = Batch(views=gather_rows(data.views, o, sharding), mask=_mask_rows(data.mask, o, sharding))
        grad = Batch(
            views=gather_rows(data.views, g, sharding),
            codes=None if data.codes is None else gather_rows(data.codes, g, sharding),
            mask=_mask_rows(data.mask, g, sharding),
        )
        state, metrics = train_step(state, ortho, grad, frozen_view_nets)
        return state, (metrics["loss"], metrics["view_weights"])

    state, (losses, weights) = jax.lax.scan(body, state, (ortho_idx, grad_idx))
    return state, EpochMetrics(losses=losses, view_weights=weights)


def train_epoch_on_device(
    state: SpecRaGEState,
    data: DeviceData,
    ortho_idx: np.ndarray,
    grad_idx: np.ndarray,
    mesh: Mesh | None = None,
    *,
    frozen_view_nets: bool = False,
) -> tuple[SpecRaGEState, EpochMetrics]:
    """``steps`` iterations of ``train_step`` (ortho batch ``ortho_idx[s]``, gradient batch
    ``grad_idx[s]``; both (steps, m) int row indices into ``data``) as one compiled scan
    (``frozen_view_nets``: only the fusion trains, see ``train.view_net_steps``).

    The state is donated. With ``mesh`` the state and ``data`` must be replicated on it
    (:func:`put_training_data`, ``sharding.replicate``) and m divisible by its device count.
    """
    chex.assert_equal_shape((ortho_idx, grad_idx))
    chex.assert_rank(ortho_idx, 2)
    n = data.views[0].shape[0]
    for name, idx in (("ortho_idx", ortho_idx), ("grad_idx", grad_idx)):
        if idx.size and not 0 <= int(idx.min()) <= int(idx.max()) < n:
            raise ValueError(f"{name}: row indices must lie in [0, {n}), got [{idx.min()}, {idx.max()}]")
    sharding = None if mesh is None else batch_sharding(mesh)
    return _scan_epoch(
        state,
        data,
        jnp.asarray(ortho_idx, jnp.int32),
        jnp.asarray(grad_idx, jnp.int32),
        sharding=sharding,
        frozen_view_nets=frozen_view_nets,
    )
