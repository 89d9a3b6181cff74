"""The training loop: alternating ortho_step / grad_step on two independent batch streams,
validation, the plateau schedule and a per-epoch progress bar.

Batches of epoch e come from ``np.random.default_rng([seed, e, stream])`` (stream 0: gradient
batches, 1: orthogonalization batches), so the loop's whole random state is (seed, epoch) and a
run resumed from a checkpoint (:class:`FitProgress`) draws exactly the batches the uninterrupted
run draws.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from specrage_jax.config import VIEW_NETS_UNTIL_STALL, ExperimentConfig, GraphConfig, TrainConfig, unresolved_message
from specrage_jax.data.lazy import is_streamed
from specrage_jax.nets.state import SpecRaGEState, in_view_nets
from specrage_jax.ops.affinity import nearest_neighbors, neighbor_sq_distances
from specrage_jax.training import preemption
from specrage_jax.training.batches import (
    batch_indices,
    check_training_inputs,
    codes_of_present_rows,
    effective_batch_size,
    epoch_rngs,
    mesh_batch_size,
    take_batch,
    whole_set_batch,
)
from specrage_jax.training.defaults import resolve_epoch_settings
from specrage_jax.training.device_epoch import (
    EpochMetrics,
    put_training_data,
    train_epoch_on_device,
)
from specrage_jax.training.distributed import host_local
from specrage_jax.training.progress import epoch_progress
from specrage_jax.training.schedule import PlateauState, plateau_update, should_stop, stalls
from specrage_jax.training.sharding import replicate
from specrage_jax.training.steps import (
    Batch,
    eval_loss,
    frozen_view_outputs,
    full_batch_epoch,
    train_step,
)
from specrage_jax.validation import check_view_coverage, has_no_rows, present_rows

# Validation reads at most this many batches of the validation split an epoch: the plateau
# schedule compares epochs on the same rows, and an epoch's cost stays set by its steps, not n.
VALIDATION_MAX_BATCHES = 2


@dataclass(frozen=True)
class EpochRecord:
    epoch: int
    train_loss: float
    val_loss: float
    learning_rate: float
    seconds: float
    view_weights: tuple[float, ...]


@dataclass
class History:
    """Per-epoch records and why training stopped."""

    epochs: list[EpochRecord] = field(default_factory=list)
    stop_reason: str = ""
    steps: int = 0
    batch_size: int = 0

    def as_dict(self) -> dict:
        return {
            "stop_reason": self.stop_reason,
            "steps": self.steps,
            "batch_size": self.batch_size,
            "epochs": [dict(r.__dict__) for r in self.epochs],
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> History:
        """Inverse of :meth:`as_dict` (a JSON round trip keeps every float exactly)."""
        records = [EpochRecord(**{**r, "view_weights": tuple(r["view_weights"])}) for r in values["epochs"]]
        return cls(
            epochs=records,
            stop_reason=values["stop_reason"],
            steps=int(values["steps"]),
            batch_size=int(values["batch_size"]),
        )

    def copy(self) -> History:
        return History(
            epochs=list(self.epochs), stop_reason=self.stop_reason, steps=self.steps, batch_size=self.batch_size
        )


@dataclass(frozen=True)
class EpochPart:
    """The steps of an epoch taken before training stopped within it (a preemption): how many,
    and their losses (steps,) and mean view weights (steps, V), which the epoch's record averages."""

    steps_done: int
    losses: np.ndarray
    view_weights: np.ndarray


@dataclass(frozen=True)
class FitProgress:
    """Where :func:`train_loop` stands after ``epochs_done`` epochs (and ``partial.steps_done``
    steps of the next, when stopped within it): everything besides the state's arrays that the
    rest of the run depends on. Passed to ``train_loop(resume=...)`` it continues the run exactly
    (the batch streams are functions of ``(seed, epoch)``)."""

    epochs_done: int
    learning_rate: float  # NaN where the optimizer keeps its rate to itself (no plateau schedule)
    plateau: PlateauState
    history: History
    seed: int
    partial: EpochPart | None = None

    @property
    def steps_done(self) -> int:
        """Steps taken in epoch ``epochs_done`` (0 at an epoch boundary)."""
        return 0 if self.partial is None else self.partial.steps_done


class EpochCheckpointer(Protocol):
    """What :func:`train_loop` calls after every epoch (``checkpoint.TrainingCheckpointer`` is one),
    and ``save`` when a signal stops training (within an epoch too)."""

    def maybe_save(self, state: SpecRaGEState, progress: FitProgress) -> bool: ...

    def save(self, state: SpecRaGEState, progress: FitProgress) -> Any: ...


@partial(jax.jit, static_argnames="graph")
def scale_neighbor_distances(x: jax.Array, graph: GraphConfig) -> jax.Array:
    """(m,): the distance from each row of the batch x (m, d) to its ``graph.sigma_neighbor``-th
    neighbour among the batch's other rows (one compiled program, not one per operation)."""
    d2 = neighbor_sq_distances(x, distinct=graph.distinct_neighbors)
    knn_d2, _ = nearest_neighbors(d2, graph.n_neighbors, include_self=graph.include_self)
    return jnp.sqrt(knn_d2[:, graph.sigma_neighbor - 1])


def estimate_view_scales(codes: Sequence[np.ndarray], graph: GraphConfig, batch_size: int, *, seed: int) -> np.ndarray:
    """The paper's "Global; Median" scale per view, fixed before training: the median, over
    ``graph.scale_sample_batches`` random batches of size m, of each point's in-batch distance
    to its ``graph.sigma_neighbor``-th neighbour (zero distances of duplicates excluded).

    Measuring it in batches of the training size m keeps sigma matched to the in-batch kNN
    graphs it is used in. Returns (V,) float32.

    Raises:
      ValueError: naming the view whose sampled points all coincide with their neighbours.
    """
    check_view_coverage(codes, graph.n_neighbors)
    rng = np.random.default_rng(seed)
    scales = []
    for v, x in enumerate(codes):
        x = present_rows(x)
        n = x.shape[0]
        m = min(batch_size, n)
        dists = []
        for _ in range(1 if m >= n else graph.scale_sample_batches):
            idx = rng.choice(n, size=m, replace=False)
            dists.append(np.asarray(scale_neighbor_distances(jnp.asarray(x[idx]), graph)))
        pooled = np.concatenate(dists)
        positive = pooled[(pooled > 0) & np.isfinite(pooled)]
        if positive.size == 0:
            raise ValueError(
                f"view {v}: every sampled point coincides with its {graph.sigma_neighbor}-th neighbour "
                f"(all distances 0), so no Gaussian scale can be set; the view carries no geometry"
            )
        scales.append(np.median(positive))
    return np.asarray(scales, np.float32)


def validation_loss(
    state: SpecRaGEState,
    views: Sequence[np.ndarray],
    codes: Sequence[np.ndarray] | None,
    batch_size: int,
    mask: np.ndarray | None = None,
) -> float:
    """Mean Eq. 4 loss over fixed consecutive chunks of the validation set (same chunks every
    epoch, so epochs compare), at most ``VALIDATION_MAX_BATCHES`` of them, so validating costs
    the same few forward passes whatever the size of the set. NaN when the set is too small for
    the kNN graph. ``mask`` (n, V) marks missing views; None: every view present."""
    n = views[0].shape[0]
    m = min(batch_size, n)
    if m <= state.graph.n_neighbors:
        return math.nan
    starts = range(0, n - m + 1, m)[:VALIDATION_MAX_BATCHES]
    losses = [eval_loss(state, take_batch(views, codes, np.arange(s, s + m), mask=mask)) for s in starts]
    return float(jnp.mean(jnp.stack(losses)))


def train_loop(
    state: SpecRaGEState,
    train_views: Sequence[np.ndarray],
    val_views: Sequence[np.ndarray],
    config: TrainConfig,
    *,
    seed: int,
    train_codes: Sequence[np.ndarray] | None = None,
    val_codes: Sequence[np.ndarray] | None = None,
    on_epoch_end: Callable[[SpecRaGEState, EpochRecord], None] | None = None,
    checkpointer: EpochCheckpointer | None = None,
    resume: FitProgress | None = None,
    mesh: Mesh | None = None,
    handle_signals: bool = True,
) -> tuple[SpecRaGEState, History]:
    """Trains ``state`` (Algorithm 1): per step, an ortho_step on one batch, then a grad_step on
    an independently drawn batch, each update by the state's optimizer (``state.tx``); after each
    epoch the validation loss drives the plateau schedule (the training loss does when the
    validation set is too small for the graph).

    The learning rate is the state's: ``create_state(learning_rate=...)`` for the default Adam, or
    the one inside ``create_state(tx=...)``. ``config.learning_rate`` must agree with it (checked,
    never silently replaced). The plateau schedule (``config.lr_factor``, ``lr_patience``,
    ``min_lr``) lowers it where the optimizer holds it as a hyperparameter (the default Adam, or
    ``optax.inject_hyperparams``); an optimizer that keeps its rate to itself trains at its own
    rate for ``config.epochs`` (the records' learning rate is NaN) and ``config.learning_rate`` is
    not read.

    ``checkpointer.maybe_save(state, progress)`` is offered every finished epoch (after the
    schedule's update, so the progress holds the next epoch's learning rate). ``resume``
    continues from such a checkpoint: ``state`` must be the checkpoint's state, and the run then
    ends exactly where the uninterrupted run would.

    ``mesh`` (``sharding.make_data_mesh``) trains data-parallel: the state is replicated, each
    batch's rows are split over the 'data' axis, and the jitted steps keep global-batch semantics
    (one m x m graph over the whole batch). ``train.batch_size`` must divide over the devices.

    Raises:
      ValueError: naming the view, for non-finite, mis-shaped or mismatched inputs; a
        ``resume`` made with another seed or batch size; ``config.epochs`` or ``batch_size`` 0
        ("from the data": only the estimator and the CLI resolve them); a ``config.learning_rate``
        that disagrees with the state's optimizer.
      FloatingPointError: if the loss becomes NaN or infinite (the epoch is named).
    """
    check_train_config(config)
    train_views, val_views, train_mask, val_mask = check_training_inputs(state, train_views, val_views)
    if train_codes is not None:
        train_codes = codes_of_present_rows(train_codes, train_mask, what="train_codes")
    if val_codes is not None and not has_no_rows(val_codes):
        val_codes = codes_of_present_rows(val_codes, val_mask, what="val_codes")
    n = train_views[0].shape[0]
    m = effective_batch_size(n, config.batch_size, state.graph.n_neighbors)
    m = effective_batch_size(mesh_batch_size(m, config.batch_size, mesh), m, state.graph.n_neighbors)
    config = resolve_epoch_settings(config, n, m)
    if mesh is not None:
        state = replicate(state, mesh)
    device_data = None
    if config.data_on_device:
        if is_streamed(train_views):
            raise ValueError(
                "train.data_on_device needs the training views in memory, but they are streamed "
                "from disk: load them as arrays (--stream off) or leave train.data_on_device false"
            )
        device_data = put_training_data(train_views, train_codes, mesh, train_mask)
    steps = config.steps_per_epoch or math.ceil(n / m)
    whole_set = None
    if m == n and mesh is None and device_data is None and not is_streamed(train_views):
        whole_set = whole_set_batch(state, train_views, train_codes, train_mask)
    start_epoch, lr, plateau, history = _starting_point(resume, config, state, seed=seed, batch_size=m)
    scheduled = not math.isnan(lr)  # the optimizer holds its learning rate as a hyperparameter
    if scheduled:
        state = state.with_learning_rate(lr)
    bar = epoch_progress(range(start_epoch, config.epochs), desc="train", enabled=config.progress, leave=True)
    frozen_outputs = None  # the frozen view nets' outputs on the whole set, once they are frozen
    with preemption.watch(handle_signals) as watch:
        for epoch in bar:
            start = time.perf_counter()
            first = resume.steps_done if resume is not None and epoch == start_epoch else 0
            frozen = view_nets_frozen(config, history, lr)
            if frozen and not has_fusion_parameters(state):
                history.stop_reason = (
                    f"the view nets stopped training after {history.steps} steps (train.view_net_steps) "
                    f"and the fusion has no parameters"
                )
                break
            grad_rng, ortho_rng = epoch_rngs(seed, epoch)
            grad_idx = batch_indices(n, m, steps, grad_rng)[first:]
            ortho_idx = batch_indices(n, m, steps, ortho_rng)[first:]
            if whole_set is not None:
                if frozen and frozen_outputs is None:
                    frozen_outputs = frozen_view_outputs(state, whole_set)
                state, epoch_metrics = _whole_set_epoch(state, whole_set, steps - first, watch, frozen_outputs)
            elif device_data is None:
                state, epoch_metrics = _host_epoch(
                    state, train_views, train_codes, ortho_idx, grad_idx, mesh, train_mask, watch, frozen
                )
            else:
                state, epoch_metrics = train_epoch_on_device(
                    state, device_data, ortho_idx, grad_idx, mesh, frozen_view_nets=frozen
                )
                watch.requested()  # one compiled epoch: stops at its end
            part = _epoch_part(resume.partial if first and resume is not None else None, epoch_metrics)
            if part.steps_done < steps:  # stopped within the epoch
                progress = FitProgress(epoch, lr, plateau, history.copy(), seed, partial=part)
                done = part.steps_done
                where = f"at step {history.steps + done}, {done} of {steps} steps into epoch {epoch + 1}"
                raise _stopped(watch, state, progress, checkpointer, where)
            train_loss = float(jnp.mean(jnp.asarray(part.losses)))
            if not math.isfinite(train_loss):
                raise FloatingPointError(
                    f"epoch {epoch}: training loss became {train_loss}; lower train.learning_rate "
                    f"or check the inputs for extreme values"
                )
            val_loss = validation_loss(host_local(state), val_views, val_codes, m, val_mask)  # every process, its own
            record = EpochRecord(
                epoch=epoch,
                train_loss=train_loss,
                val_loss=val_loss,
                learning_rate=lr,
                seconds=time.perf_counter() - start,
                view_weights=tuple(float(w) for w in jnp.mean(jnp.asarray(part.view_weights), axis=0)),
            )
            history.epochs.append(record)
            history.steps += steps
            monitored = monitored_loss(record)
            bar.set_postfix(loss=f"{train_loss:.4g}", val=f"{val_loss:.4g}", lr=f"{lr:.1e}")
            if on_epoch_end is not None:
                on_epoch_end(state, record)
            if scheduled:
                plateau, new_lr = plateau_update(
                    plateau, monitored, lr, factor=config.lr_factor, patience=config.lr_patience
                )
                if should_stop(new_lr, config.min_lr):
                    history.stop_reason = f"learning rate reached {config.min_lr:g} after epoch {epoch}"
                    break
                if new_lr != lr:
                    lr = new_lr
                    state = state.with_learning_rate(lr)
            progress = FitProgress(epoch + 1, lr, plateau, history.copy(), seed)
            if watch.stopping and epoch + 1 < config.epochs:  # the signal came in the epoch's last step
                raise _stopped(
                    watch, state, progress, checkpointer, f"at step {history.steps}, after epoch {epoch + 1}"
                )
            if checkpointer is not None:
                checkpointer.maybe_save(state, progress)
        else:
            history.stop_reason = f"completed {config.epochs} epochs"
    bar.close()
    return state, history


def view_nets_frozen(config: TrainConfig, history: History, learning_rate: float) -> bool:
    """Whether the next epoch trains with the view nets frozen: ``train.view_net_steps`` > 0 and
    that many gradient steps done; or ``VIEW_NETS_UNTIL_STALL`` and the loss the schedule
    watches has gone ``train.view_net_patience`` epochs without improving (or the schedule has
    already lowered the learning rate). Both are read from the run's progress, so a resumed run
    freezes them at the same epoch, and once frozen they stay frozen."""
    if config.view_net_steps == VIEW_NETS_UNTIL_STALL:
        watched = [monitored_loss(record) for record in history.epochs]
        return learning_rate < config.learning_rate or stalls(
            watched, config.view_net_patience, config.view_net_min_delta
        )
    return 0 < config.view_net_steps <= history.steps


def monitored_loss(record: EpochRecord) -> float:
    """The loss the plateau schedule watches: validation, or training where the validation set
    is too small for the graph (its loss is NaN)."""
    return record.val_loss if math.isfinite(record.val_loss) else record.train_loss


def has_fusion_parameters(state: SpecRaGEState) -> bool:
    """Whether any trainable parameter lies outside the view nets (the weighting net, the
    linear fusion's logits, the concatenation's projection, the attention's maps)."""
    return any(not in_view_nets(path) for path, _ in jax.tree_util.tree_leaves_with_path(state.params))


def _whole_set_epoch(
    state: SpecRaGEState,
    batch: Batch,
    steps: int,
    watch: preemption.PreemptionWatch,
    frozen_outputs: jax.Array | None = None,
) -> tuple[SpecRaGEState, EpochMetrics]:
    """``steps`` full-batch steps on the whole training set as one compiled scan
    (:func:`steps.full_batch_epoch`; with ``frozen_outputs`` the frozen view nets' outputs on it,
    only the fusion trains); a stop that ``watch`` requests is seen at its end."""
    state, metrics = full_batch_epoch(state, batch, steps, frozen_outputs)
    watch.requested()
    return state, EpochMetrics(losses=metrics["loss"], view_weights=metrics["view_weights"])


def _host_epoch(
    state: SpecRaGEState,
    views: Sequence[Any],
    codes: Sequence[np.ndarray] | None,
    ortho_idx: np.ndarray,
    grad_idx: np.ndarray,
    mesh: Mesh | None,
    mask: np.ndarray | None = None,
    watch: preemption.PreemptionWatch | None = None,
    frozen_view_nets: bool = False,
) -> tuple[SpecRaGEState, EpochMetrics]:
    """One epoch of ``train_step`` on batches gathered on the host (arrays or streamed rows) and
    copied to the device step by step; at most three steps in flight. Fewer steps when ``watch``
    requests a stop."""
    losses, weights = [], []
    for s in range(ortho_idx.shape[0]):
        ortho_batch = take_batch(views, None, ortho_idx[s], mesh, mask)
        grad_batch = take_batch(views, codes, grad_idx[s], mesh, mask)
        state, metrics = train_step(state, ortho_batch, grad_batch, frozen_view_nets)  # = ortho_step, then grad_step
        losses.append(metrics["loss"])
        if s >= 2:  # dispatch is asynchronous: bound the steps (and batches) in flight
            losses[s - 2].block_until_ready()
        weights.append(metrics["view_weights"])
        if watch is not None and watch.requested():
            break
    return state, EpochMetrics(losses=jnp.stack(losses), view_weights=jnp.stack(weights))


def _epoch_part(earlier: EpochPart | None, metrics: EpochMetrics) -> EpochPart:
    """The steps of an epoch so far as host arrays: ``earlier`` (a resumed epoch's first steps)
    followed by ``metrics`` (this process's replica)."""
    losses = np.asarray(host_local(metrics.losses))
    weights = np.asarray(host_local(metrics.view_weights))
    if earlier is not None:
        losses = np.concatenate([earlier.losses.astype(losses.dtype), losses])
        weights = np.concatenate([earlier.view_weights.astype(weights.dtype), weights])
    return EpochPart(steps_done=len(losses), losses=losses, view_weights=weights)


def _stopped(
    watch: preemption.PreemptionWatch,
    state: SpecRaGEState,
    progress: FitProgress,
    checkpointer: EpochCheckpointer | None,
    where: str,
) -> preemption.Preempted:
    """The exception that ends a stopped run, once ``checkpointer`` (when given) saved ``progress``."""
    path = None if checkpointer is None else checkpointer.save(state, progress)
    return preemption.Preempted(where, signal_name=watch.name(), checkpoint=path, state=state, progress=progress)


def check_train_config(config: TrainConfig) -> None:
    """Refuses the training settings that mean "from the data" and need the data's statistics
    (train.epochs 0, train.batch_size 0); the steps of an epoch and of the view nets (-1) follow
    from the rows and the batch, and the loop resolves them (:func:`resolve_epoch_settings`).

    Raises:
      ValueError: naming the setting and how to resolve it.
    """
    for name in ExperimentConfig(train=config).unresolved_fields():
        if name in ("train.epochs", "train.batch_size"):
            raise ValueError(unresolved_message(name))


def starting_learning_rate(config: TrainConfig, state: SpecRaGEState) -> float:
    """The plateau schedule's first learning rate: ``config.learning_rate``, checked against the
    rate the state's optimizer holds; NaN where the optimizer keeps its rate to itself.

    Raises:
      ValueError: the two rates differ (in float32, the precision the optimizer holds it in).
    """
    held = state.learning_rate
    if held is None:
        return math.nan
    if np.float32(config.learning_rate) != np.float32(held):
        raise ValueError(
            f"train.learning_rate={config.learning_rate:g} disagrees with the state's optimizer ({held:g}): "
            f"create the state with learning_rate=config.learning_rate, or pass a TrainConfig with the state's rate"
        )
    return config.learning_rate


def _starting_point(
    resume: FitProgress | None, config: TrainConfig, state: SpecRaGEState, *, seed: int, batch_size: int
) -> tuple[int, float, PlateauState, History]:
    """(first epoch, learning rate (NaN: not scheduled), plateau state, history so far) of a fresh
    or resumed run."""
    if resume is None:
        return 0, starting_learning_rate(config, state), PlateauState(), History(batch_size=batch_size)
    if resume.seed != seed:
        raise ValueError(
            f"cannot resume with seed {seed} a run trained with seed {resume.seed}: the batches would differ"
        )
    if resume.history.batch_size != batch_size:
        raise ValueError(
            f"cannot resume with batch size {batch_size} a run trained with batch size {resume.history.batch_size}"
        )
    return resume.epochs_done, resume.learning_rate, resume.plateau, resume.history.copy()
