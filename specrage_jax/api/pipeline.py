"""The inference pipeline: raw views -> per-view scaling -> autoencoder encoders -> SpecRaGE.

:func:`embed_views` is the one function that embeds raw samples; the estimator's ``transform``,
``SpecRaGE.load`` of a CLI run and ``specrage embed`` all go through it, so a sample gets the
same row, bitwise, whichever of them embeds it.

On disk (``specrage train --out DIR`` writes DIR/model): :func:`~specrage_jax.training.checkpoint.save_model` of the
state, with the scalers' arrays and the pre-training nets (``training.pretrained``, the one
save/restore path of those nets) as extra trees, and in the metadata what rebuilds them
(configuration, input widths) plus the run's k-means centres, training history and health.
:func:`load_pipeline` reads it back; ``SpecRaGE.load`` is the public way to open one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.config import ExperimentConfig
from specrage_jax.data.preprocess import (
    ViewScaler,
    apply_view_scalers,
    kept_views,
    scaler_from_tree,
    with_left_out_views,
)
from specrage_jax.nets.embed import embed
from specrage_jax.nets.netstate import TrainedNet
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.overrides import config_from_dict, config_to_dict
from specrage_jax.training.checkpoint import LoadedModel, read_model, save_model
from specrage_jax.training.checkpoint_files import CheckpointError
from specrage_jax.training.checkpoint_state import model_config_of
from specrage_jax.training.pretrained import PretrainedNets, pretrained_record, pretrained_trees, restore_pretrained
from specrage_jax.training.stages import encode_views
from specrage_jax.validation import as_view_arrays, view_presence

PIPELINE_FORMAT_VERSION = 2  # 2: pre-training nets via training.pretrained; centres, history, health optional


def model_inputs(
    views: Sequence[np.ndarray],
    present: np.ndarray,
    *,
    scalers: Sequence[ViewScaler],
    encoders: Sequence[TrainedNet] | None,
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Raw views (n, d_v) -> (the network's inputs, their presence (n, V')): missing rows
    (``present`` (n, V) False) zeroed, then the fitted scaling (none when ``scalers`` is empty)
    and the autoencoder encoders; the views left out at fit (``ViewScaler.left_out``) dropped.

    Raises:
      ValueError: naming a sample whose only present views were left out at fit.
    """
    arrays = tuple(np.where(present[:, v, None], x, np.float32(0)) for v, x in enumerate(views))
    if scalers:
        arrays = apply_view_scalers(scalers, arrays)
        kept = list(kept_views(scalers))
        if len(kept) < present.shape[1]:
            orphans = np.flatnonzero(~present[:, kept].any(axis=1))
            if orphans.size:
                raise ValueError(
                    f"X: sample {int(orphans[0])} has only views that were left out at fit "
                    f"(views {[v for v in range(present.shape[1]) if v not in kept]}, unrelated to the others); "
                    "it has no view to embed"
                )
            present = present[:, kept]
    if encoders:
        arrays = encode_views(encoders, arrays)
    return tuple(arrays), present


def embed_views(
    state: SpecRaGEState,
    views: Sequence[np.ndarray],
    *,
    scalers: Sequence[ViewScaler],
    encoders: Sequence[TrainedNet] | None,
    mask: Any = None,
    batch_size: int = 4096,
    what: str = "X",
) -> tuple[np.ndarray, np.ndarray]:
    """(Y (n, k), view weights (n, V)) of raw views, each (n, d_v) with the widths the pipeline
    was fitted on. A view whose row is all NaN, or ``mask`` (n, V) False, is missing for that
    sample: left out of its fusion (weight 0); so is a view left out at fit, for every sample.

    Raises:
      ValueError: naming the view (partial NaN, infinite values) or the sample with no view.
    """
    arrays = as_view_arrays(views, what=what, allow_missing=True)
    present = view_presence(arrays, mask, what=what)
    inputs, kept_present = model_inputs(arrays, present, scalers=scalers, encoders=encoders)
    embedding, weights = embed(state, inputs, batch_size=batch_size, mask=kept_present)
    return embedding, with_left_out_views(weights, scalers)


@dataclass(frozen=True)
class InferencePipeline:
    """What embeds new raw samples as the run embedded its test split: per-view scaling (fitted
    on the training split; empty for a bare model), the autoencoder encoders (if the run used
    them), the model, and what the run recorded beside it."""

    model: LoadedModel
    config: ExperimentConfig
    scalers: tuple[ViewScaler, ...]
    nets: PretrainedNets
    input_dims: tuple[int, ...]
    view_names: tuple[str, ...]
    centres: np.ndarray | None = None  # (n_clusters, k): the run's k-means on its training embedding

    @property
    def encoders(self) -> tuple[TrainedNet, ...] | None:
        """The autoencoders whose encoders map the scaled views to the network's inputs (or None)."""
        return self.nets.autoencoders


def save_inference_model(
    directory: str | Path,
    state: SpecRaGEState,
    config: ExperimentConfig,
    *,
    scalers: Sequence[ViewScaler],
    nets: PretrainedNets | None,
    input_dims: Sequence[int],
    view_names: Sequence[str],
    dataset: str,
    seed: int,
    centres: np.ndarray | None = None,
    extra_metadata: dict[str, Any] | None = None,
) -> Path:
    """:func:`~specrage_jax.training.checkpoint.save_model` of the state with the scalers' offset/scale per view, the
    pre-training ``nets`` (:func:`training.pretrained.pretrained_trees`), the k-means ``centres``
    (n_clusters, k) if given, and what rebuilds them (configuration, input dims).
    ``extra_metadata`` (JSON) is stored beside them (a run stores its history, health and
    resolved defaults)."""
    nets = nets or PretrainedNets()
    extra: dict[str, Any] = {"scalers": {f"view_{v}": s.as_tree() for v, s in enumerate(scalers)}}
    if nets.stages():
        extra["pretrained"] = pretrained_trees(nets)
    if centres is not None:
        extra["clusters"] = {"centres": np.asarray(centres, np.float32)}
    metadata = {
        **(extra_metadata or {}),
        "pipeline_format_version": PIPELINE_FORMAT_VERSION,
        "dataset": dataset,
        "seed": seed,
        "input_dims": [int(d) for d in input_dims],
        "view_names": list(view_names),
        "experiment_config": config_to_dict(config),
        "pretrained": pretrained_record(nets),
    }
    return save_model(directory, state, metadata=metadata, extra_trees=extra, overwrite=True, model_config=config.model)


def model_directory(directory: str | Path) -> Path:
    """DIR/model when DIR is a run's output directory, else DIR itself."""
    path = Path(directory)
    return path / "model" if (path / "model").is_dir() else path


def load_pipeline(directory: str | Path) -> InferencePipeline:
    """The inference pipeline in DIR/model (a run's output directory) or DIR (a model directory).

    Raises:
      CheckpointError: see :func:`~specrage_jax.training.checkpoint.load_model`.
    """
    path = model_directory(directory)
    return pipeline_from_model(read_model(path), path)


def pipeline_from_model(model: LoadedModel, path: Path) -> InferencePipeline:
    """The pipeline of a loaded model directory. A model saved by :func:`~specrage_jax.training.checkpoint.save_model`
    without pipeline metadata (a bare model) embeds its inputs as given: no scaling, no encoders.

    Raises:
      CheckpointError: a newer pipeline format, or an incomplete pipeline record.
    """
    meta = model.metadata
    view_dims = tuple(int(d) for d in model.record["view_dims"])
    if "pipeline_format_version" not in meta:
        base = ExperimentConfig()
        config = dataclasses.replace(
            base, model=model_config_of(model.state), data=dataclasses.replace(base.data, preprocess="none")
        )
        return InferencePipeline(
            model=model,
            config=config,
            scalers=(),
            nets=PretrainedNets(),
            input_dims=view_dims,
            view_names=tuple(f"view{v}" for v in range(len(view_dims))),
        )
    version = meta["pipeline_format_version"]
    if version > PIPELINE_FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: pipeline format {version} is newer than this specrage_jax reads ({PIPELINE_FORMAT_VERSION})"
        )
    try:
        config = config_from_dict(meta["experiment_config"])
        if version < 2 and config.autoencoder.enabled:
            raise CheckpointError(
                f"{path}: pipeline format {version} stores its autoencoders in a layout this "
                f"specrage_jax no longer reads; train the run again"
            )
        input_dims = tuple(int(d) for d in meta["input_dims"])
        saved = model.extra_trees.get("scalers", {})
        scalers = tuple(
            scaler_from_tree(saved[f"view_{v}"], default_kind=config.data.preprocess) for v in range(len(input_dims))
        )
        nets = restore_pretrained(
            model.extra_trees.get("pretrained", {}), meta.get("pretrained", {}), config, where=str(path)
        )
        clusters = model.extra_trees.get("clusters")
        centres = None if clusters is None else np.asarray(clusters["centres"], np.float32)
    except (KeyError, TypeError, ValueError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{path}: the pipeline record is incomplete ({type(err).__name__}: {err})") from None
    return InferencePipeline(
        model=model,
        config=config,
        scalers=scalers,
        nets=nets,
        input_dims=input_dims,
        view_names=tuple(meta.get("view_names") or (f"view{v}" for v in range(len(input_dims)))),
        centres=centres,
    )
