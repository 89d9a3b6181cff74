"""What a run trains on: the paper's splits, and the pipeline's first stages
(:mod:`specrage_jax.api.fit_pipeline`) on them: scalers fitted on the training split, the data-aware
defaults resolved on it, the pre-training stages run over every split."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specrage_jax.api.fit_pipeline import (
    Pretrained,
    Scaled,
    preprocess,
    resolve_settings,
)
from specrage_jax.api.fit_pipeline import pretrain as pipeline_pretrain
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import (
    MultiViewData,
    ViewScaler,
    load_dataset,
    split_indices,
)
from specrage_jax.data.lazy import StreamedViews
from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.training.pretrained import PretrainedNets


@dataclass(frozen=True)
class PreparedSplits:
    """Preprocessed views (scalers fitted on the training split only) and labels per split."""

    # V arrays (n_split, d_v) each; for a dataset streamed from disk, ``data.lazy.MemmapRows`` read on demand
    train: tuple[Any, ...]
    val: tuple[Any, ...]
    test: tuple[Any, ...]
    train_labels: np.ndarray
    val_labels: np.ndarray
    test_labels: np.ndarray
    scalers: tuple[ViewScaler, ...] = ()
    unreduced: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None = None  # graph inputs (train, val)


def prepare_splits(
    data: MultiViewData | StreamedViews, config: ExperimentConfig, *, seed: int, fit_rows: np.ndarray | None = None
) -> PreparedSplits:
    """The paper's stratified 80/20 then 90/10 split, and per-view scaling fitted on train.

    ``fit_rows`` (n,) bool keeps only those rows in the training and validation splits (e.g. the
    complete samples, for the baseline that discards incomplete ones); the test split is the
    same either way. A dataset streamed from disk (``data.lazy.StreamedViews``) is split by
    :func:`prepare_streamed_splits`: the same split, as row sets over its files."""
    if isinstance(data, StreamedViews):
        if fit_rows is not None:
            raise ValueError("fit_rows is not supported for data streamed from disk")
        return prepare_streamed_splits(data, config, seed=seed)
    idx = split_indices(
        data.labels, seed=seed, test_fraction=config.data.test_fraction, val_fraction=config.data.val_fraction
    )
    if fit_rows is not None:
        idx = dataclasses.replace(idx, train=idx.train[fit_rows[idx.train]], val=idx.val[fit_rows[idx.val]])
    train, test = data.subset(idx.train), data.subset(idx.test)
    if idx.val.size:  # data.val_fraction=0 leaves no validation rows: the training loss drives the schedule
        val = data.subset(idx.val)
        val_views, val_labels = val.views, val.labels
    else:
        val_views, val_labels = tuple(np.zeros((0, d), np.float32) for d in data.view_dims), data.labels[:0]
    scaled = preprocess(train.views, val_views, config, rest=test.views, n_clusters=data.n_classes, seed=seed)
    return PreparedSplits(
        train=scaled.train,
        val=scaled.val,
        test=scaled.rest,
        train_labels=train.labels,
        val_labels=val_labels,
        test_labels=test.labels,
        scalers=scaled.scalers,
        unreduced=scaled.unreduced,
    )


def resolve_run_defaults(
    config: ExperimentConfig, splits: PreparedSplits, n_clusters: int, *, seed: int
) -> tuple[ExperimentConfig, dict[str, Any]]:
    """:func:`~specrage_jax.training.defaults.resolve_defaults` on a run's training split, as the
    estimator resolves it on the same rows (:func:`~specrage_jax.api.fit_pipeline.resolve_settings`);
    the record names each chosen value and why."""
    return resolve_settings(
        config,
        splits.train,
        n_clusters,
        seed=seed,
        scalers=splits.scalers,
        unreduced_train=None if splits.unreduced is None else splits.unreduced[0],
    )


def prepare_streamed_splits(data: StreamedViews, config: ExperimentConfig, *, seed: int) -> PreparedSplits:
    """:func:`prepare_splits` of a dataset streamed from disk: the same split indices, each split's
    views ``MemmapRows`` over the files (no rows are read), identity scalers.

    Raises:
      ValueError: for ``data.preprocess`` other than 'none': a fitted scaler would need its own
        passes over the training rows, and streamed runs take raw values (the infinitemnist
        preset's setting).
    """
    if config.data.preprocess not in ("none", "auto"):
        raise ValueError(
            f"dataset {data.name!r} is streamed from disk ({data.source.directory}): "
            f"data.preprocess={config.data.preprocess!r} is not supported for streamed data (a scaler "
            f"fitted on the training split would need extra passes over the files); use "
            f"--set data.preprocess=none, or run it in memory (--stream off)"
        )
    idx = split_indices(
        data.labels, seed=seed, test_fraction=config.data.test_fraction, val_fraction=config.data.val_fraction
    )
    (train, train_labels), (val, val_labels), (test, test_labels) = (
        data.subset(idx.train),
        data.subset(idx.val),
        data.subset(idx.test),
    )
    scalers = tuple(ViewScaler(offset=np.zeros(d), scale=np.ones(d), kind="none") for d in data.view_dims)
    return PreparedSplits(
        train=train,
        val=val,
        test=test,
        train_labels=train_labels,
        val_labels=val_labels,
        test_labels=test_labels,
        scalers=scalers,
    )


@dataclass(frozen=True)
class SplitCodes:
    """Affinity inputs per split (Siamese codes), V arrays (n_split, c_v) each."""

    train: tuple[np.ndarray, ...]
    val: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class PretrainResult:
    """Splits after the autoencoders, Siamese codes (None when disabled), the nets, timings (s)."""

    splits: PreparedSplits
    codes: SplitCodes | None
    nets: PretrainedNets
    timings: dict[str, float]


def scaled_splits(splits: PreparedSplits, *, unreduced: bool = True) -> Scaled:
    """A run's scaled splits as the pipeline's stages take them (test as the rows carried
    through); ``unreduced`` False leaves out the unreduced graph inputs."""
    return Scaled(
        scalers=splits.scalers,
        train=splits.train,
        val=splits.val,
        rest=splits.test,
        unreduced=splits.unreduced if unreduced else None,
    )


def pretrain_result(splits: PreparedSplits, result: Pretrained) -> PretrainResult:
    """The pipeline's pre-training stage as a run records it: the splits after the autoencoders."""
    codes = None if result.codes is None else SplitCodes(*result.codes)
    splits = dataclasses.replace(splits, train=result.train, val=result.val, test=result.rest)
    return PretrainResult(splits=splits, codes=codes, nets=result.nets, timings=result.timings)


def run_pretraining(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int, restored: PretrainedNets | None = None
) -> PretrainResult:
    """The pipeline's pre-training stage (:func:`api.fit_pipeline.pretrain`: autoencoders, then
    Siamese nets on the autoencoded views) and every split through them; the codes are the
    Siamese codes only (None when disabled). A stage whose nets are in ``restored`` (a resumed
    run) is not retrained."""
    result = pipeline_pretrain(scaled_splits(splits, unreduced=False), config, seed=seed, restored=restored)
    return pretrain_result(splits, result)


def pretrain(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int
) -> tuple[PreparedSplits, SplitCodes | None, dict[str, float]]:
    """The optional pre-training stages (see :func:`run_pretraining`): the (possibly autoencoded)
    splits, the Siamese codes (None when disabled) and timings."""
    result = run_pretraining(splits, config, seed=seed)
    return result.splits, result.codes, result.timings


def with_n_components(config: ExperimentConfig, n_classes: int) -> ExperimentConfig:
    """Fills model.n_components = number of classes when it is 0 (the paper's choice of k)."""
    if config.model.n_components:
        return config
    return dataclasses.replace(config, model=dataclasses.replace(config.model, n_components=n_classes))


@dataclass(frozen=True)
class PreparedRun:
    """What an experiment script starts from: the dataset, the configuration, the splits (scaled),
    the pre-trained codes (None without Siamese nets) and the pre-training stage times."""

    data: MultiViewData
    config: ExperimentConfig
    splits: PreparedSplits
    codes: SplitCodes | None
    stages: dict[str, float]


def preset_config(dataset: str, n_classes: int, overrides: Sequence[str] = ()) -> ExperimentConfig:
    """The dataset's preset with "section.field=value" overrides, no progress bar, k = n_classes if unset."""
    return with_n_components(apply_overrides(preset(dataset), ["train.progress=false", *overrides]), n_classes)


def prepare_run(
    dataset: str,
    *,
    seed: int,
    data_dir: str | None = None,
    overrides: Sequence[str] = (),
    data: MultiViewData | None = None,
) -> PreparedRun:
    """Loads `dataset` (unless `data` is given), applies its preset + overrides, splits, pre-trains."""
    data = load_dataset(dataset, seed=seed, data_dir=data_dir) if data is None else data
    config = preset_config(dataset, data.n_classes, overrides)
    splits = prepare_splits(data, config, seed=seed)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    pretrained, codes, stages = pretrain(splits, config, seed=seed)
    return PreparedRun(
        data=data, config=config, splits=pretrained, codes=unreduced_codes(config, splits, codes), stages=stages
    )


def unreduced_codes(config: ExperimentConfig, splits: PreparedSplits, codes: SplitCodes | None) -> SplitCodes | None:
    """The affinity inputs of a run: the Siamese codes when there are any, else with
    ``data.graph_inputs=unreduced`` the views' rows before their SVD projection, else None."""
    if codes is None and config.data.graph_inputs == "unreduced" and splits.unreduced is not None:
        return SplitCodes(*splits.unreduced, test=())
    return codes
