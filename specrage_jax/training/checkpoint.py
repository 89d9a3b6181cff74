"""Checkpoints with orbax: inference models (:func:`save_model` / :func:`load_model`) and periodic
training checkpoints for resume (:class:`TrainingCheckpointer`).

On disk every checkpoint is an orbax composite directory (written to a temporary name, then
renamed, so a crash never leaves a half-written checkpoint under its final name):

    <dir>/arrays/        pytrees of arrays (orbax StandardSave: OCDBT + zarr)
    <dir>/extra/         the caller's extra pytrees (inference models only, when given)
    <dir>/specrage/      JSON record: format and library version, configs, CRC32 of every array
    <dir>/specrage_files.json   size and CRC32 of every file above

Before orbax reads a checkpoint its files are checked against ``specrage_files.json``, and the
restored arrays against their recorded CRC32s, so a truncated or corrupted file is reported as a
:class:`CheckpointError` naming the directory and the file (orbax alone reads a flipped byte
back silently, and a truncated file as a tensorstore error).

Pytrees are stored as nested dicts keyed by their flattened path names (``params/view_nets/0/
layers/0/kernel/value``) and restored into the structure of a template built from the recorded
configurations, so no Python object is pickled.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optax
import orbax.checkpoint as ocp

from specrage_jax.config import ModelConfig
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.checkpoint_files import (
    ARRAYS_ITEM,
    EXTRA_ITEM,
    FORMAT,
    RECORD_ITEM,
    CheckpointError,
    CheckpointWarning,
    array_checksums,
    check_compatible,
    library_version,
    read_record,
    restore_items,
    save_trees,
    tree_from_nested,
    tree_to_nested,
    write_file_manifest,
)
from specrage_jax.training.checkpoint_state import state_from_trees, state_trees, structure_record, template_from_record
from specrage_jax.training.distributed import barrier, host_local, is_primary, primary_decides, shared_token
from specrage_jax.training.loop import EpochPart, FitProgress, History
from specrage_jax.training.schedule import PlateauState

MODEL_FORMAT_VERSION = 1
TRAINING_FORMAT_VERSION = 1
RNG_SCHEME = "numpy default_rng([seed, epoch, stream]); stream 0 gradient batches, 1 ortho batches"
WITHIN_EPOCH = "within_epoch"  # checkpoints written within an epoch (a preemption): within_epoch/step_<steps>


@dataclass(frozen=True)
class LoadedModel:
    """What :func:`load_model` returns: the state (ready for ``embed``), the caller's metadata,
    and the extra pytrees (nested dicts of NumPy arrays, or the template's structure)."""

    state: SpecRaGEState
    metadata: dict[str, Any]
    extra_trees: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)


def save_model(
    directory: str | Path,
    state: SpecRaGEState,
    *,
    metadata: dict | None = None,
    extra_trees: dict[str, Any] | None = None,
    include_optimizer: bool = False,
    overwrite: bool = False,
    model_config: ModelConfig | None = None,
) -> Path:
    """Writes an inference checkpoint of ``state`` to ``directory`` (atomically; see the module
    docstring for the layout): parameters, R^-1 (k, k), view_scales (V,), the step, optionally the
    optimizer's state (``include_optimizer``; the optimizer itself is code, not stored:
    :func:`load_model` takes it as ``tx``); the library and format versions, view dims and the
    Model/Graph/Ortho configs; the caller's JSON-able ``metadata``; ``extra_trees`` (name ->
    pytree of arrays, e.g. scaler offsets, k-means centres, encoder parameters). Returns the
    directory.

    Raises:
      FileExistsError: ``directory`` exists and ``overwrite`` is False.
      TypeError: ``metadata`` is not JSON-able.
      ValueError: the network's ModelConfig is unknown (pass ``model_config``).
    """
    record = {
        "format": FORMAT,
        "kind": "model",
        "format_version": MODEL_FORMAT_VERSION,
        "library_version": library_version(),
        **structure_record(state, model_config),
        "learning_rate": state.learning_rate,
        "has_optimizer": include_optimizer,
        "metadata": dict(metadata or {}),
        "extra_names": sorted(extra_trees or {}),
    }
    trees = {ARRAYS_ITEM: state_trees(state, include_optimizer=include_optimizer)}
    if extra_trees:
        trees[EXTRA_ITEM] = dict(extra_trees)
    return save_trees(directory, trees, record, overwrite=overwrite)


def load_model(
    directory: str | Path,
    *,
    extra_templates: Mapping[str, Any] | None = None,
    tx: optax.GradientTransformation | None = None,
) -> LoadedModel:
    """The network state saved by :func:`save_model` in ``directory`` (low level: the jitted steps
    and ``embed`` take it). To embed raw samples with what was fitted around the network (the
    per-view scaling, the autoencoders), open the directory with ``SpecRaGE.load``; this warns
    (:class:`CheckpointWarning`) when the directory holds such a pipeline.

    A model does not store its optimizer (an optax transformation is code): the state comes back
    with ``tx``, the optimizer to continue training with, or by default Adam at the learning rate
    the state held when saved (fresh unless saved with ``include_optimizer``). See
    :func:`read_model` for the rest.
    """
    loaded = read_model(directory, extra_templates=extra_templates, tx=tx)
    if "pipeline_format_version" in loaded.metadata or "estimator" in loaded.metadata:
        warnings.warn(
            f"{directory} holds a fitted pipeline (per-view scaling, encoders) around the network; "
            f"load_model returns the network alone, so embed(loaded.state, raw views) would skip them: "
            f"use specrage_jax.SpecRaGE.load({str(directory)!r}).transform",
            CheckpointWarning,
            stacklevel=2,
        )
    return loaded


def read_model(
    directory: str | Path,
    *,
    extra_templates: Mapping[str, Any] | None = None,
    tx: optax.GradientTransformation | None = None,
) -> LoadedModel:
    """The model saved by :func:`save_model` in ``directory``, with its metadata and extra trees.

    The network structure is rebuilt from the recorded configurations (``steps.create_state``)
    and the arrays restored into it. ``extra_templates`` (name -> pytree) restores those extra
    trees into the template's structure; others come back as nested dicts of NumPy arrays.

    The optimizer is not stored: the state's is ``tx`` (any optax transformation; its own learning
    rate kept), or by default Adam at the learning rate the state held when saved. Without a saved
    optimizer state (``save_model``'s default) that optimizer starts fresh; a state saved with
    ``include_optimizer=True`` is restored into ``tx``'s structure, so pass the optimizer it was
    saved with. To resume training exactly, use a training checkpoint (:class:`TrainingCheckpointer`).

    Raises:
      CheckpointError (a ValueError): naming the directory and the problem: no such directory,
        not a specrage_jax model, newer format or other major version, truncated or corrupted
        files, arrays that do not fit the recorded configuration (or a saved optimizer state
        that does not fit ``tx``'s).
    """
    path = Path(directory).absolute()
    record = read_record(path)
    check_compatible(record, kind="model", max_version=MODEL_FORMAT_VERSION, where=path)
    items = restore_items(path, [ARRAYS_ITEM, EXTRA_ITEM], record)
    if ARRAYS_ITEM not in items:
        raise CheckpointError(f"checkpoint {path} is incomplete: no model arrays")
    state = state_from_trees(
        template_from_record(record, where=path, tx=tx),
        items[ARRAYS_ITEM],
        where=path,
        # the default Adam takes the saved rate (None: the optimizer kept its rate to itself); tx keeps its own
        learning_rate=record.get("learning_rate") if tx is None else None,
    )
    extra = items.get(EXTRA_ITEM, {})
    for name, template in (extra_templates or {}).items():
        if name not in extra:
            raise CheckpointError(f"{path}: no extra tree {name!r} (saved: {sorted(extra)})")
        extra[name] = tree_from_nested(template, extra[name], where=f"{path} (extra {name!r})")
    return LoadedModel(state=state, metadata=dict(record.get("metadata", {})), extra_trees=extra, record=record)


# --- training checkpoints -------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingCheckpoint:
    """One restored training checkpoint: the state (with Adam state) and where fit stood."""

    state: SpecRaGEState
    progress: FitProgress
    directory: Path
    metadata: dict[str, Any]


def _progress_record(progress: FitProgress) -> dict[str, Any]:
    record = {
        "epochs_done": progress.epochs_done,
        "learning_rate": progress.learning_rate,
        "plateau": {"best": progress.plateau.best, "bad_epochs": progress.plateau.bad_epochs},
        "history": progress.history.as_dict(),
        "rng": {"seed": progress.seed, "next_epoch": progress.epochs_done, "scheme": RNG_SCHEME},
    }
    if progress.partial is not None:  # float32 values as JSON floats: exact both ways
        record["partial_epoch"] = {
            "steps_done": progress.partial.steps_done,
            "losses": progress.partial.losses.tolist(),
            "view_weights": progress.partial.view_weights.tolist(),
        }
    return record


def _part_from_record(record: Mapping[str, Any] | None) -> EpochPart | None:
    if record is None:
        return None
    return EpochPart(
        steps_done=int(record["steps_done"]),
        losses=np.asarray(record["losses"], np.float32),
        view_weights=np.asarray(record["view_weights"], np.float32).reshape(int(record["steps_done"]), -1),
    )


def _progress_from_record(record: Mapping[str, Any], where: Path) -> FitProgress:
    try:
        return FitProgress(
            epochs_done=int(record["epochs_done"]),
            learning_rate=float(record["learning_rate"]),
            plateau=PlateauState(
                best=float(record["plateau"]["best"]), bad_epochs=int(record["plateau"]["bad_epochs"])
            ),
            history=History.from_dict(record["history"]),
            seed=int(record["rng"]["seed"]),
            partial=_part_from_record(record.get("partial_epoch")),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint {where}: its training progress record is incomplete ({err})") from None


class TrainingCheckpointer:
    """Periodic training checkpoints in ``directory/epoch_<N>`` (N = epochs done), the newest
    ``keep`` kept, via orbax ``CheckpointManager``; a checkpoint within an epoch (training stopped
    by a signal) in ``directory/within_epoch/step_<S>`` (S = steps done in all), the newest kept.

    Saves are asynchronous by default: training waits only for a host copy of the arrays; orbax
    writes and commits (renames) the step in the background, and its file manifest is written once
    the commit is done (at the next save or :meth:`close`). A step whose process died between the
    two is still verified by its array checksums.

    Each holds the parameters, R^-1, the optimizer's state (``state.tx``: restored into the
    structure of the template's optimizer, so a run resumes with the optimizer it started with), the step counter,
    view scales, and a JSON record of the plateau state, learning rate, history so far, the RNG
    state ((seed, next epoch): the batch streams are derived from it) and ``metadata``.
    Implements ``training.loop.EpochCheckpointer``; use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        every_epochs: int = 1,
        keep: int = 3,
        min_seconds: float = 0.0,
        metadata: Mapping[str, Any] | None = None,
        model_config: ModelConfig | None = None,
        asynchronous: bool = True,
    ):
        if every_epochs < 1 or keep < 1 or min_seconds < 0:
            raise ValueError(
                f"every_epochs and keep must be >= 1 and min_seconds >= 0, got {every_epochs}, {keep}, {min_seconds}"
            )
        self.directory = Path(directory).absolute()
        self.every_epochs = every_epochs
        self.min_seconds = min_seconds
        self._last_save: float | None = None  # no save yet: the first is due at once
        self.metadata = dict(metadata or {})
        self.model_config = model_config
        self.save_seconds: list[float] = []
        self.resumed_from: int | None = None
        self.resumed_steps = 0  # steps into epoch ``resumed_from`` (a checkpoint written within it)
        self._pending: Path | None = None
        self._structure: dict[str, Any] | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            step_prefix="epoch",
            enable_async_checkpointing=asynchronous,
            cleanup_tmp_directories=True,
            create=True,
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)
        self._asynchronous = asynchronous
        self._within: ocp.CheckpointManager | None = None

    def __enter__(self) -> TrainingCheckpointer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Waits for the last save to be committed and writes its file manifest."""
        self.wait()
        self._manager.close()
        if self._within is not None:
            self._within.close()

    def wait(self) -> None:
        """Blocks until every started save is committed (and its file manifest written)."""
        self._manager.wait_until_finished()
        if self._within is not None:
            self._within.wait_until_finished()
        if self._pending is not None and is_primary() and self._pending.is_dir():
            write_file_manifest(self._pending)
        self._pending = None

    def within_epoch_manager(self) -> ocp.CheckpointManager:
        """The orbax manager of the checkpoints written within an epoch (created on first use)."""
        if self._within is None:
            options = ocp.CheckpointManagerOptions(
                max_to_keep=1,
                step_prefix="step",
                enable_async_checkpointing=self._asynchronous,
                cleanup_tmp_directories=True,
                create=True,
            )
            self._within = ocp.CheckpointManager(self.directory / WITHIN_EPOCH, options=options)
        return self._within

    def within_epoch_dirs(self) -> list[Path]:
        """The committed checkpoints written within an epoch."""
        if not (self.directory / WITHIN_EPOCH).is_dir():
            return []
        manager = self.within_epoch_manager()
        manager.reload()
        return [self.directory / WITHIN_EPOCH / f"step_{step}" for step in manager.all_steps()]

    def step_dir(self, epochs_done: int) -> Path:
        return self.directory / f"epoch_{epochs_done}"

    def epochs(self) -> list[int]:
        """Epoch counts of the committed checkpoints, oldest first (after a save in progress ends)."""
        self.wait()
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def maybe_save(self, state: SpecRaGEState, progress: FitProgress) -> bool:
        """Saves when ``progress.epochs_done`` is a multiple of ``every_epochs`` and ``min_seconds``
        have passed since the last save. The first save of a run (or of a resumed run) does not
        wait for ``min_seconds``, so a run stopped early always leaves a checkpoint to resume from."""
        if progress.epochs_done % self.every_epochs:
            return False
        due = self._last_save is None or time.monotonic() - self._last_save >= self.min_seconds
        if not primary_decides(due):  # several processes: the primary's clock decides for all
            return False
        self.save(state, progress)
        return True

    def save(self, state: SpecRaGEState, progress: FitProgress) -> Path:
        """Starts saving ``state`` and ``progress`` as ``epoch_<progress.epochs_done>``, or within an
        epoch (``progress.partial``) as ``within_epoch/step_<steps done>``; returns its path."""
        start = time.perf_counter()
        self.wait()
        state = host_local(state)  # several processes: each passes its replica, orbax writes once
        nested = tree_to_nested(state_trees(state, include_optimizer=True))
        if self._structure is None:  # one model per run: checked and recorded once
            self._structure = structure_record(state, self.model_config)
        record = {
            "format": FORMAT,
            "kind": "training",
            "format_version": TRAINING_FORMAT_VERSION,
            "library_version": library_version(),
            **self._structure,
            **_progress_record(progress),
            "metadata": self.metadata,
            "items": [ARRAYS_ITEM],
            "checksums": array_checksums(nested, ARRAYS_ITEM),
        }
        args = ocp.args.Composite(
            **{ARRAYS_ITEM: ocp.args.StandardSave(nested), RECORD_ITEM: ocp.args.JsonSave(record)}
        )
        manager, step, path = self._manager, progress.epochs_done, self.step_dir(progress.epochs_done)
        if progress.partial is not None:
            manager, step = self.within_epoch_manager(), progress.history.steps + progress.steps_done
            path = self.directory / WITHIN_EPOCH / f"step_{step}"
        if step in manager.all_steps():  # stopped again where a checkpoint was: it holds this state
            return path
        manager.save(step, args=args, force=True)
        self._pending = path
        self._last_save = time.monotonic()
        self.save_seconds.append(time.perf_counter() - start)
        return path

    def restore(self, epochs_done: int, template: SpecRaGEState) -> TrainingCheckpoint:
        """The checkpoint after ``epochs_done`` epochs, into ``template``'s structure.

        Raises:
          CheckpointError: missing, damaged or incompatible (another model, format or version).
        """
        return self.restore_dir(self.step_dir(epochs_done), template)

    def restore_dir(self, path: Path, template: SpecRaGEState) -> TrainingCheckpoint:
        """The training checkpoint in ``path`` (see :meth:`restore`)."""
        record = read_record(path)
        check_compatible(record, kind="training", max_version=TRAINING_FORMAT_VERSION, where=path)
        expected = structure_record(template, self.model_config)
        for key, value in expected.items():
            if record.get(key) != value:
                raise CheckpointError(
                    f"checkpoint {path} was written for another model: its {key} is "
                    f"{record.get(key)}, the run's is {expected[key]}"
                )
        items = restore_items(path, [ARRAYS_ITEM], record)
        if ARRAYS_ITEM not in items or "opt_state" not in items[ARRAYS_ITEM]:
            raise CheckpointError(f"checkpoint {path} is incomplete: no training state arrays")
        state = state_from_trees(template, items[ARRAYS_ITEM], where=path)
        return TrainingCheckpoint(
            state=state,
            progress=_progress_from_record(record, path),
            directory=path,
            metadata=dict(record.get("metadata", {})),
        )

    def unreadable_name(self, path: Path) -> Path:
        """Where a damaged checkpoint is moved: ``<name>.unreadable-<its write time, UTC>-<token>``.
        The time is the directory's own, not a clock's, so every process of a group names it alike."""
        written = time.gmtime(path.stat().st_mtime)
        return path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S', written)}-{shared_token()[:6]}")

    def candidates(self) -> list[tuple[tuple[int, int], Path]]:
        """((epochs done, steps done in the next epoch), directory) of every committed checkpoint,
        newest first."""
        found = [((epochs_done, 0), self.step_dir(epochs_done)) for epochs_done in self.epochs()]
        for path in self.within_epoch_dirs():
            try:
                record = read_record(path)
                found.append(((int(record["epochs_done"]), int(record["partial_epoch"]["steps_done"])), path))
            except (CheckpointError, KeyError, TypeError, ValueError):
                found.append(((-1, 0), path))  # unreadable: tried last, then moved aside
        return sorted(found, key=lambda item: item[0], reverse=True)

    def restore_latest(self, template: SpecRaGEState) -> TrainingCheckpoint | None:
        """The newest checkpoint that restores cleanly, or None when there is none.

        A damaged newer checkpoint is renamed ``epoch_<N>.unreadable-<time>`` (kept for
        inspection, ignored from then on) with a :class:`CheckpointWarning` naming it and the
        checkpoint used instead; an incompatible one (another model or version) is an error.
        """
        self.wait()
        skipped = []
        for (epochs_done, _), path in self.candidates():
            try:
                restored = self.restore_dir(path, template)
            except CheckpointError as err:
                if "corrupted" not in str(err) and "incomplete" not in str(err):
                    raise
                aside = self.unreadable_name(path)
                barrier(f"read {path}")  # every process has tried it
                if is_primary():
                    os.rename(path, aside)
                barrier(f"moved {aside}")
                skipped.append(f"{err} (moved to {aside.name})")
                continue
            finally:
                self._manager.reload()
                if self._within is not None:
                    self._within.reload()
            self.resumed_from = restored.progress.epochs_done
            self.resumed_steps = restored.progress.steps_done
            if skipped:
                warnings.warn(
                    f"skipped damaged training checkpoints: {'; '.join(skipped)}; resuming from "
                    f"{restored.directory} (epoch {epochs_done})",
                    CheckpointWarning,
                    stacklevel=2,
                )
            return restored
        if skipped:
            warnings.warn(
                f"no readable training checkpoint in {self.directory}: {'; '.join(skipped)}",
                CheckpointWarning,
                stacklevel=2,
            )
        return None
