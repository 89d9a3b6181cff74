"""What a run trains on: the paper's splits with scalers fitted on the training split, the data-
aware defaults resolved on it, the pre-training stages run over every split, and seeded row
subsets for the evaluation."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from specrage_jax.config import AUTO_COMPONENTS, ExperimentConfig, preset
from specrage_jax.data import (
    MultiViewData,
    ViewScaler,
    apply_view_scalers,
    fit_view_scalers,
    load_dataset,
    split_indices,
)
from specrage_jax.data.lazy import StreamedViews, is_streamed
from specrage_jax.data.preprocess import graph_input_views
from specrage_jax.nets.netstate import TrainedNet
from specrage_jax.overrides import apply_overrides
from specrage_jax.training.defaults import (
    FULL_BATCH_MAX,
    GROWN_BATCH_MAX,
    DataShape,
    describe_preprocessing,
    resolve_defaults,
)
from specrage_jax.training.pretrained import PretrainedNets, pretrain_nets
from specrage_jax.training.stages import encode_views
from specrage_jax.validation import missing_rows


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
    scalers = fit_view_scalers(
        train.views,
        config.data.preprocess,
        svd_components=config.data.svd_components,
        sparse_below=config.data.sparse_below,
    )
    unreduced_train = graph_input_views(scalers, train.views)
    return PreparedSplits(
        train=apply_view_scalers(scalers, train.views),
        val=apply_view_scalers(scalers, val_views),
        test=apply_view_scalers(scalers, test.views),
        train_labels=train.labels,
        val_labels=val_labels,
        test_labels=test.labels,
        scalers=scalers,
        # not None for the validation views either: the same scalers project them
        unreduced=None
        if unreduced_train is None
        else (unreduced_train, cast(tuple[np.ndarray, ...], graph_input_views(scalers, val_views))),
    )


def resolve_run_defaults(
    config: ExperimentConfig, splits: PreparedSplits, n_clusters: int, *, seed: int
) -> tuple[ExperimentConfig, dict[str, Any]]:
    """:func:`~specrage_jax.training.defaults.resolve_defaults` on a run's training split (a seeded
    sample of at most FULL_BATCH_MAX rows, GROWN_BATCH_MAX where views are missing); the record
    names each chosen value and why."""
    described = describe_preprocessing([s.kind for s in splits.scalers], config.data.preprocess)
    views_missing = any(missing_rows(v).any() for v in splits.train)
    incomplete = config.train.missing_view_batch_growth > 1 and views_missing
    if not config.unresolved_fields() and not incomplete:
        return config, described
    n_train = len(splits.train_labels)
    sample = unreduced = None
    reads_rows = config.graph.n_neighbors == 0 or config.model.n_components == AUTO_COMPONENTS
    if reads_rows or incomplete:  # the rules that look at the rows themselves
        rows = evaluation_rows(n_train, GROWN_BATCH_MAX if incomplete else FULL_BATCH_MAX, seed=seed, stream=2)
        if rows is None and is_streamed(splits.train):
            rows = np.arange(n_train)
        sample = tuple(np.asarray(v if rows is None else v[rows]) for v in splits.train)  # x[idx] reads streamed rows
        unreduced = None if splits.unreduced is None else tuple(select_rows(splits.unreduced[0], rows))
    resolved, chosen = resolve_defaults(
        config,
        DataShape(
            views=sample,
            n_clusters=n_clusters,
            seed=seed,
            unreduced_views=unreduced,
            n_train=n_train,
            views_missing=views_missing,
        ),
    )
    chosen.update(described)
    return resolved, chosen


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


def encode_splits(nets: Sequence[TrainedNet], splits: PreparedSplits) -> SplitCodes:
    """Every split through the per-view nets."""
    return SplitCodes(
        train=encode_views(nets, splits.train), val=encode_views(nets, splits.val), test=encode_views(nets, splits.test)
    )


def run_pretraining(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int, restored: PretrainedNets | None = None
) -> PretrainResult:
    """The optional pre-training stages (:func:`training.pretrained.pretrain_nets`: autoencoders,
    then Siamese nets on the autoencoded views) and every split through them. A stage whose nets
    are in ``restored`` (a resumed run) is not retrained."""
    nets, timings = pretrain_nets(splits.train, config, seed=seed, restored=restored)
    if nets.autoencoders is not None:
        start = time.perf_counter()
        embedded = encode_splits(nets.autoencoders, splits)
        splits = dataclasses.replace(splits, train=embedded.train, val=embedded.val, test=embedded.test)
        timings["autoencoder_seconds"] += time.perf_counter() - start
    codes = None
    if nets.siamese is not None:
        start = time.perf_counter()
        codes = encode_splits(nets.siamese, splits)
        timings["siamese_seconds"] += time.perf_counter() - start
    return PretrainResult(splits=splits, codes=codes, nets=nets, timings=timings)


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


EVAL_SUBSAMPLE_STREAM = 7  # np.random.default_rng([seed, 7, 0 (SVM train) | 1 (k-means test)])


def evaluation_rows(n: int, max_rows: int | None, *, seed: int, stream: int) -> np.ndarray | None:
    """Sorted (max_rows,) seeded random rows of n when n > max_rows, else None (every row)."""
    if max_rows is None or n <= max_rows:
        return None
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 (or None for every row), got {max_rows}")
    rng = np.random.default_rng([seed, EVAL_SUBSAMPLE_STREAM, stream])
    return np.sort(rng.choice(n, size=max_rows, replace=False))


def select_rows(views: Sequence[Any], rows: np.ndarray | None) -> tuple[Any, ...]:
    """The views at sorted ``rows`` (None: the views as they are); streamed views stay unread."""
    if rows is None:
        return tuple(views)
    return tuple(v.take(rows) if is_streamed([v]) else v[rows] for v in views)
