"""Shared machinery of the two pre-training stages (Siamese affinity nets, autoencoders): a
seeded mini-batch loop over arrays that stops once the loss on held-out items stops improving."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from specrage_jax.nets.netstate import NetState
from specrage_jax.training import preemption
from specrage_jax.training.progress import epoch_progress

HOLDOUT_FRACTION = 0.05  # items held out to decide when a stage stops
HOLDOUT_MAX = 4096
HOLDOUT_MIN = 64  # fewer held-out items would be too noisy to stop on: train every epoch instead

Take = Callable[[np.ndarray], tuple[np.ndarray, ...]]
Loss = Callable[[NetState, tuple[jax.Array, ...]], jax.Array]


@dataclass(frozen=True)
class EarlyStopping:
    """Stop after ``patience`` epochs without the held-out loss falling below ``(1 - min_delta)``
    times its best so far; ``patience`` 0 trains every epoch on every item."""

    patience: int
    min_delta: float

    def __post_init__(self) -> None:
        if self.patience < 0 or not 0.0 <= self.min_delta < 1.0:
            raise ValueError(f"patience must be >= 0 and min_delta in [0, 1), got {self.patience}, {self.min_delta}")


@dataclass(frozen=True)
class StageRun:
    """What a stage's loop returns: the state, the training loss per epoch (as many as it trained)
    and the held-out loss per epoch (empty when nothing was held out)."""

    state: NetState
    losses: list[float]
    held_out_losses: list[float]


def held_out_count(n: int, patience: int) -> int:
    """Items held out of n to stop on: ``HOLDOUT_FRACTION`` of them (at most ``HOLDOUT_MAX``)
    with early stopping on (``patience`` > 0), none where that is below ``HOLDOUT_MIN``."""
    held = min(HOLDOUT_MAX, int(n * HOLDOUT_FRACTION))
    return held if patience and held >= HOLDOUT_MIN else 0


def holdout_split(n: int, stopping: EarlyStopping | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(training items, held-out items) of range(n): :func:`held_out_count` of them held out."""
    held = held_out_count(n, 0 if stopping is None else stopping.patience)
    if not held:
        return np.arange(n), np.arange(0)
    order = rng.permutation(n)
    return np.sort(order[held:]), np.sort(order[:held])


def held_out_loss(state: NetState, loss: Loss, take: Take, items: np.ndarray) -> float:
    """``loss`` over all held-out ``items`` in one batch (at most ``HOLDOUT_MAX``: one compiled shape)."""
    return float(loss(state, tuple(jnp.asarray(a) for a in take(items))))


def require_in_memory(x: object, name: str) -> None:
    """Refuses ``train.data_on_device`` for a view streamed from disk (not an array in memory).

    Raises:
      ValueError: naming the view.
    """
    if not isinstance(x, np.ndarray):
        raise ValueError(
            f"train.data_on_device needs {name} in memory, but it is streamed from disk: load it as an "
            "array (--stream off) or leave train.data_on_device false"
        )


def stop_if_preempted(watch: preemption.PreemptionWatch, desc: str) -> None:
    """Raises Preempted once a stop was requested: a stage is not resumed mid-way, so there is
    nothing to save."""
    if watch.requested():
        raise preemption.Preempted(f"in {desc}", signal_name=watch.name())


Step = Callable[[NetState, tuple[jax.Array, ...]], tuple[NetState, jax.Array]]
Gather = Callable[[tuple[jax.Array, ...], jax.Array], tuple[jax.Array, ...]]


def gather_rows(arrays: tuple[jax.Array, ...], items: jax.Array) -> tuple[jax.Array, ...]:
    """A batch of device-resident items: the rows ``items`` (m,) of each array (n, ...)."""
    return tuple(a[items] for a in arrays)


@partial(jax.jit, static_argnums=(0, 1), donate_argnums=2)
def scan_epoch(
    step: Step, gather: Gather, state: NetState, arrays: tuple[jax.Array, ...], batches: jax.Array
) -> tuple[NetState, jax.Array]:
    """One epoch as one compiled ``lax.scan``: ``step`` on ``gather(arrays, batches[i])``, the
    batch of items ``batches[i]`` (k, m) int32 of the device-resident ``arrays``, in order;
    (state, the k batch losses)."""

    def one_batch(carry: NetState, items: jax.Array) -> tuple[NetState, jax.Array]:
        return step(carry, gather(arrays, items))

    return jax.lax.scan(one_batch, state, batches)


def epoch_length(n_items: int, batch_size: int, steps_per_epoch: int) -> int:
    """Batches in one epoch: ``steps_per_epoch`` when positive, else one pass over ``n_items``
    (n_items // batch_size).

    Raises:
      ValueError: a negative ``steps_per_epoch``.
    """
    if steps_per_epoch < 0:
        raise ValueError(f"steps_per_epoch must be >= 0 (0: one pass over the items), got {steps_per_epoch}")
    return steps_per_epoch or n_items // batch_size


def stage_epoch_steps(n_items: int, batch_size: int, steps_per_epoch: int, patience: int) -> int:
    """Steps in one epoch of a pre-training stage over ``n_items`` items: ``steps_per_epoch``
    where items are held out to stop on (:func:`held_out_count`), else one pass over the items
    left for training (with 0 always one pass)."""
    held = held_out_count(n_items, patience)
    return epoch_length(n_items - held, min(batch_size, n_items - held), steps_per_epoch if held else 0)


def epoch_order(items: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` of ``items`` in the order an epoch trains on them: passes over a fresh shuffle
    each, the last one cut short (so no item repeats before every item has come once)."""
    passes = -(-count // items.size)
    return np.concatenate([items[rng.permutation(items.size)] for _ in range(passes)])[:count]


def run_minibatch_epochs(
    state: NetState,
    step: Step,
    n: int,
    take: Take,
    *,
    batch_size: int,
    epochs: int,
    seed: int,
    desc: str,
    progress: bool,
    steps_per_epoch: int = 0,
    loss: Loss | None = None,
    stopping: EarlyStopping | None = None,
    device_arrays: tuple[np.ndarray, ...] | None = None,
    gather: Gather = gather_rows,
) -> StageRun:
    """Shuffled mini-batches over n items, ``take(indices)`` building each batch's arrays (so
    pair datasets are gathered per batch, never materialized). The batch is at most n, so small
    data still trains; a last partial batch is dropped (fixed shapes, one compile).

    An epoch is ``steps_per_epoch`` batches (:func:`epoch_order`: passes over fresh shuffles of
    the items), or with 0 one pass over them. With steps_per_epoch set, the held-out loss is
    checked every that many steps whatever the number of items, so a stage's cost follows the steps
    its held-out loss needs, not n. Where nothing is held out (no ``stopping``, or too few items
    for ``HOLDOUT_MIN``), an epoch is one pass.

    With ``stopping`` (and ``loss``, the batch loss without the update), a seeded
    ``HOLDOUT_FRACTION`` of the items is held out and the loop ends once their loss has not
    improved by ``stopping.min_delta`` (relative) for ``stopping.patience`` epochs.

    With ``device_arrays`` (``gather(device_arrays, idx)`` the same batch as ``take(idx)``; by
    default the items are the arrays' rows), the arrays are copied to the device once and each
    epoch runs as one compiled scan (:func:`scan_epoch`) over the same batches in the same order
    as the host loop; a preemption request is then seen after the epoch instead of after the step.
    """
    rng = np.random.default_rng(seed)
    train_items, held = holdout_split(n, stopping if loss is not None else None, rng)
    m = min(batch_size, train_items.size)
    patience = stopping.patience if stopping is not None and loss is not None else 0
    epoch_items = stage_epoch_steps(n, batch_size, steps_per_epoch, patience) * m
    losses: list[float] = []
    held_losses: list[float] = []
    best, bad = np.inf, 0
    bar = epoch_progress(range(epochs), desc=desc, enabled=progress, leave=False)
    watch = preemption.active()
    on_device = None if device_arrays is None else tuple(jax.device_put(np.asarray(a)) for a in device_arrays)
    for _ in bar:
        order = epoch_order(train_items, epoch_items, rng)
        if on_device is not None:
            batches = order[: (order.size // m) * m].reshape(-1, m).astype(np.int32)
            state, epoch_losses = scan_epoch(step, gather, state, on_device, jnp.asarray(batches))
            stop_if_preempted(watch, desc)
        else:
            batch_losses = []
            for start in range(0, order.size - m + 1, m):
                state, batch_loss = step(state, tuple(jnp.asarray(a) for a in take(order[start : start + m])))
                batch_losses.append(batch_loss)
                stop_if_preempted(watch, desc)
            epoch_losses = jnp.stack(batch_losses)
        losses.append(float(jnp.mean(epoch_losses)))
        if not np.isfinite(losses[-1]):
            raise FloatingPointError(f"{desc}: loss became {losses[-1]}; lower the learning rate")
        bar.set_postfix(loss=f"{losses[-1]:.4g}")
        if held.size and loss is not None and stopping is not None:  # items are held out only with both
            held_losses.append(held_out_loss(state, loss, take, held))
            if held_losses[-1] < best * (1.0 - stopping.min_delta):
                best, bad = held_losses[-1], 0
            else:
                bad += 1
            if bad >= stopping.patience:
                break
    bar.close()
    return StageRun(state=state, losses=losses, held_out_losses=held_losses)
