"""The single-view nets' stage (``model.single_view_nets``): after the fusion is trained, each
view gets a net that reproduces the fused output Y~ from that view alone.

Eq. 4 asks only for the fused output to be right, so the view nets split the embedding between
them and a sample that arrives with one view would be embedded by that view's part of the sum.
The single-view net of view v is fitted (Adam, mini-batches) to the trained model's own Y~ on the
training rows that have v, by the relative squared error

    sum_i ||S_v(x_i) - Y~_i||^2 / sum_i ||Y~_i||^2

and stops once that error on held-out rows stops falling (the pre-training stages' rule,
:func:`~specrage_jax.training.pretrain.run_minibatch_epochs`). The fusion, R^-1 and the output
map are untouched, so samples with two or more views embed bitwise as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from specrage_jax.nets.netstate import NetState, adam_update, create_net_state
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.pretrain import EarlyStopping, StageRun, Take, run_minibatch_epochs
from specrage_jax.validation import missing_rows

SINGLE_VIEW_STREAM = 14  # np.random.default_rng([seed, SINGLE_VIEW_STREAM]) draws the rows and batches
MAX_ROWS = 100_000  # training rows the nets are fitted on at most (a seeded sample)
BATCH_SIZE = 256
LEARNING_RATE = 1e-3
STEPS_PER_EPOCH = 100  # the held-out error is checked every this many steps, whatever n is
MAX_EPOCHS = 200
STOPPING = EarlyStopping(patience=3, min_delta=0.01)


@jax.jit
def fused_targets(state: SpecRaGEState, views: tuple[jax.Array, ...], mask: jax.Array) -> jax.Array:
    """Y~ (m, k), the fused output before R^-1, of a chunk of rows (missing rows zeroed, ``mask``
    (m, V) their present views)."""
    return nnx.merge(state.graphdef, state.params, state.ortho).fuse(views, mask)[0]


def fused_rows(
    state: SpecRaGEState, views: Sequence[Any], rows: np.ndarray, chunk_rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """(Y~ (r, k), present (r, V) bool) of the rows ``rows`` (r,) of ``views`` (arrays or rows
    streamed from disk), read and fused ``chunk_rows`` at a time (the last chunk padded)."""
    targets, presence = [], []
    for start in range(0, rows.size, chunk_rows):
        chunk = [np.asarray(x[rows[start : start + chunk_rows]], np.float32) for x in views]
        present = ~np.stack([missing_rows(x) for x in chunk], axis=1)
        pad = chunk_rows - len(present)
        arrays = [np.pad(np.where(present[:, v, None], x, 0), ((0, pad), (0, 0))) for v, x in enumerate(chunk)]
        mask = np.pad(present, ((0, pad), (0, 0)), constant_values=True)
        y = fused_targets(state, tuple(jnp.asarray(a) for a in arrays), jnp.asarray(mask))
        targets.append(np.asarray(y)[: len(present)])
        presence.append(present)
    return np.concatenate(targets), np.concatenate(presence)


@jax.jit
def relative_error(net_state: NetState, batch: tuple[jax.Array, ...]) -> jax.Array:
    """mean_i w_i ||S(x_i) - t_i||^2 of a batch (x (m, d), t (m, k), w (m,)): with w = 1 / the
    targets' mean power, the share of that power the net misses."""
    x, target, weight = batch
    net = nnx.merge(net_state.graphdef, net_state.params)
    return jnp.mean(weight * jnp.sum((net(x) - target) ** 2, axis=1))


@jax.jit
def fit_step(net_state: NetState, batch: tuple[jax.Array, ...]) -> tuple[NetState, jax.Array]:
    """One Adam step on :func:`relative_error`: (state, the batch's error before the step)."""
    value, grads = jax.value_and_grad(lambda params: relative_error(net_state.replace(params=params), batch))(
        net_state.params
    )
    return adam_update(net_state, grads), value


def fit_single_view_nets(
    state: SpecRaGEState, views: Sequence[Any], *, seed: int, chunk_rows: int = 4096, progress: bool = False
) -> tuple[SpecRaGEState, list[list[float]]]:
    """``state`` with each view's single-view net fitted to the model's Y~ on the training rows
    ``views`` (V arrays (n, d_v) as the model takes them, NaN rows for missing views, or rows
    streamed from disk; at most MAX_ROWS of them, seeded), and the held-out errors per view and
    epoch. A model without single-view nets is returned unchanged."""
    model = state.model()
    if model.single_view_nets is None:
        return state, []
    n = len(views[0])
    sample = np.arange(n)
    if n > MAX_ROWS:
        sample = np.sort(np.random.default_rng([seed, SINGLE_VIEW_STREAM]).choice(n, MAX_ROWS, replace=False))
    targets, present = fused_rows(state, views, sample, chunk_rows)
    held_out: list[list[float]] = []
    for v, net in enumerate(model.single_view_nets):
        items = np.flatnonzero(present[:, v])
        view = views[v]
        power = float(np.mean(np.sum(targets[items].astype(np.float64) ** 2, axis=1))) or 1.0
        weight = np.float32(1.0 / power)

        def take(
            idx: np.ndarray, view: Any = view, items: np.ndarray = items, weight: Any = weight
        ) -> tuple[np.ndarray, ...]:
            rows = items[idx]
            return np.asarray(view[sample[rows]], np.float32), targets[rows], np.full(rows.size, weight, np.float32)

        run = _fit_one(net, take, items.size, seed=seed, desc=f"single-view net {v}", progress=progress)
        nnx.update(net, run.state.params)
        held_out.append(run.held_out_losses)
    return state.replace(params=nnx.state(model, nnx.Param)), held_out


def _fit_one(net: nnx.Module, take: Take, n: int, *, seed: int, desc: str, progress: bool) -> StageRun:
    """One view's net fitted on ``n`` items, ``take(idx)`` -> (rows, targets, weights)."""
    return run_minibatch_epochs(
        create_net_state(net, LEARNING_RATE),
        fit_step,
        n,
        take,
        batch_size=BATCH_SIZE,
        epochs=MAX_EPOCHS,
        seed=int(np.random.default_rng([seed, SINGLE_VIEW_STREAM]).integers(2**31)),
        desc=desc,
        progress=progress,
        steps_per_epoch=STEPS_PER_EPOCH,
        loss=relative_error,
        stopping=STOPPING,
    )
