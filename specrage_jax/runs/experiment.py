"""One complete run: load, split, preprocess (fitted on train), train, embed, evaluate, write.

The CLI is a thin shell around :func:`run_experiment`; notebooks and experiment scripts call
the pieces directly.

With an output directory OUT a run also writes (see BUILD_NOTES.md, "Checkpoints"):

    OUT/metrics.json, OUT/embedding.png
    OUT/model/                 the inference pipeline: SpecRaGE model + scalers + AE encoders
    OUT/checkpoints/run.json   dataset, seed, configuration, data fingerprint, status
    OUT/checkpoints/pretrained/  the pre-trained nets (autoencoders, Siamese), for resume
    OUT/checkpoints/epoch_<N>/   training checkpoints (``checkpoint.every_epochs`` > 0)

``run_experiment(..., resume=True)`` continues a killed run from its newest readable training
checkpoint and ends with the metrics the uninterrupted run writes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from specrage_jax.training.checkpoint import (
    CheckpointError, TrainingCheckpointer, library_version,
)
from specrage_jax.config import ExperimentConfig, apply_overrides, config_from_dict, config_to_dict, preset
from specrage_jax.data import MultiViewData, ViewScaler, apply_view_scalers, fit_view_scalers, load_dataset, split_indices
from specrage_jax.data.preprocess import graph_input_views, unit_rows
from specrage_jax.training.defaults import FULL_BATCH_MAX, DataShape, describe_preprocessing, resolve_defaults
from specrage_jax.data.lazy import StreamedViews
from specrage_jax.data.registry import dataset_rows, open_streamed_dataset, parse_dataset_name
from specrage_jax.nets.embed import embed
from specrage_jax.evaluation.metrics import cluster_scores, kmeans_clusters, svm_metrics
from specrage_jax.evaluation.health import HealthReport, embedding_problems
from specrage_jax.api.pipeline import save_inference_model
from specrage_jax.nets.netstate import TrainedNet
from specrage_jax.runs.run_plan import Stage, stage_plan
from specrage_jax.training.initial_state import train_model
from specrage_jax.training.pretrained import PretrainedNets, load_pretrained_nets, pretrain_nets, save_pretrained_nets
from specrage_jax.training.stages import encode_views
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.loop import History
from specrage_jax.data.lazy import is_streamed
from specrage_jax.validation import check_training_sizes


@dataclass(frozen=True)
class PreparedSplits:
    """Preprocessed views (scalers fitted on the training split only) and labels per split."""

    train: tuple[np.ndarray, ...]
    val: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]
    train_labels: np.ndarray
    val_labels: np.ndarray
    test_labels: np.ndarray
    scalers: tuple[ViewScaler, ...] = ()
    unreduced: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None = None  # graph inputs (train, val)


def prepare_splits(data: MultiViewData, config: ExperimentConfig, *, seed: int) -> PreparedSplits:
    """The paper's stratified 80/20 then 90/10 split, and per-view scaling fitted on train.

    A dataset streamed from disk (``data.lazy.StreamedViews``) is split by
    :func:`prepare_streamed_splits`: the same split, as row sets over its files."""
    if isinstance(data, StreamedViews):
        return prepare_streamed_splits(data, config, seed=seed)
    idx = split_indices(data.labels, seed=seed, test_fraction=config.data.test_fraction,
                        val_fraction=config.data.val_fraction)
    train, test = data.subset(idx.train), data.subset(idx.test)
    if idx.val.size:  # data.val_fraction=0 leaves no validation rows: the training loss drives the schedule
        val = data.subset(idx.val)
        val_views, val_labels = val.views, val.labels
    else:
        val_views, val_labels = tuple(np.zeros((0, d), np.float32) for d in data.view_dims), data.labels[:0]
    scalers = fit_view_scalers(train.views, config.data.preprocess, svd_components=config.data.svd_components,
                               sparse_below=config.data.sparse_below)
    unreduced_train = graph_input_views(scalers, train.views)
    return PreparedSplits(
        train=apply_view_scalers(scalers, train.views), val=apply_view_scalers(scalers, val_views),
        test=apply_view_scalers(scalers, test.views),
        train_labels=train.labels, val_labels=val_labels, test_labels=test.labels, scalers=scalers,
        unreduced=None if unreduced_train is None else (unreduced_train, graph_input_views(scalers, val_views)),
    )


def resolve_run_defaults(config: ExperimentConfig, splits: PreparedSplits, n_clusters: int, *,
                         seed: int) -> tuple[ExperimentConfig, dict[str, Any]]:
    """:func:`defaults.resolve_defaults` on a run's training split (views streamed from disk are
    sampled: at most FULL_BATCH_MAX rows); the record names each chosen value and why."""
    described = describe_preprocessing([s.kind for s in splits.scalers], config.data.preprocess)
    if not config.unresolved_fields():
        return config, described
    n_train = len(splits.train_labels)
    sample = unreduced = None
    if config.graph.n_neighbors == 0:  # the only rule that looks at the rows themselves
        rows = evaluation_rows(n_train, FULL_BATCH_MAX, seed=seed, stream=2)
        if rows is None and is_streamed(splits.train):
            rows = np.arange(n_train)
        sample = tuple(np.asarray(v if rows is None else v[rows]) for v in splits.train)  # x[idx] reads streamed rows
        unreduced = None if splits.unreduced is None else tuple(select_rows(splits.unreduced[0], rows))
    resolved, chosen = resolve_defaults(config, DataShape(views=sample, n_clusters=n_clusters, seed=seed,
                                                          unreduced_views=unreduced, n_train=n_train))
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
        raise ValueError(f"dataset {data.name!r} is streamed from disk ({data.source.directory}): "
                         f"data.preprocess={config.data.preprocess!r} is not supported for streamed data (a scaler "
                         f"fitted on the training split would need extra passes over the files); use "
                         f"--set data.preprocess=none, or run it in memory (--stream off)")
    idx = split_indices(data.labels, seed=seed, test_fraction=config.data.test_fraction,
                        val_fraction=config.data.val_fraction)
    (train, train_labels), (val, val_labels), (test, test_labels) = (
        data.subset(idx.train), data.subset(idx.val), data.subset(idx.test))
    scalers = tuple(ViewScaler(offset=np.zeros(d), scale=np.ones(d), kind="none") for d in data.view_dims)
    return PreparedSplits(train=train, val=val, test=test, train_labels=train_labels, val_labels=val_labels,
                          test_labels=test_labels, scalers=scalers)


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
    return SplitCodes(train=encode_views(nets, splits.train), val=encode_views(nets, splits.val),
                      test=encode_views(nets, splits.test))


def run_pretraining(splits: PreparedSplits, config: ExperimentConfig, *, seed: int,
                    restored: PretrainedNets | None = None) -> PretrainResult:
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


def pretrain(splits: PreparedSplits, config: ExperimentConfig, *, seed: int) -> tuple[PreparedSplits, SplitCodes | None, dict[str, float]]:
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


def prepare_run(dataset: str, *, seed: int, data_dir: str | None = None, overrides: Sequence[str] = (),
                data: MultiViewData | None = None) -> PreparedRun:
    """Loads `dataset` (unless `data` is given), applies its preset + overrides, splits, pre-trains."""
    data = load_dataset(dataset, seed=seed, data_dir=data_dir) if data is None else data
    config = preset_config(dataset, data.n_classes, overrides)
    splits = prepare_splits(data, config, seed=seed)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    pretrained, codes, stages = pretrain(splits, config, seed=seed)
    return PreparedRun(data=data, config=config, splits=pretrained, codes=unreduced_codes(config, splits, codes),
                       stages=stages)


def unreduced_codes(config: ExperimentConfig, splits: PreparedSplits, codes: SplitCodes | None) -> SplitCodes | None:
    """The affinity inputs of a run: the Siamese codes when there are any, else with
    ``data.graph_inputs=unreduced`` the views' rows before their SVD projection, else None."""
    if codes is None and config.data.graph_inputs == "unreduced" and splits.unreduced is not None:
        return SplitCodes(*splits.unreduced, test=())
    return codes


def train_on_splits(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int, codes: SplitCodes | None = None,
    checkpointer: TrainingCheckpointer | None = None, resume: bool = False, mesh: Mesh | None = None,
    on_epoch_end: Callable[[SpecRaGEState, Any], None] | None = None,
) -> tuple[SpecRaGEState, History]:
    """:func:`training.initial_state.train_model` (the estimator's path too) on a run's splits:
    trained on the training split, validated on the validation split, affinities from ``codes``.

    ``checkpointer`` saves training checkpoints; with ``resume`` training continues from its
    newest readable one (from scratch, with a warning, when there is none).
    """
    return train_model(splits.train, splits.val, config, seed=seed,
                       train_codes=None if codes is None else codes.train,
                       val_codes=None if codes is None else codes.val,
                       checkpointer=checkpointer, resume=resume, mesh=mesh, on_epoch_end=on_epoch_end)


@dataclass(frozen=True)
class Evaluation:
    """What :func:`evaluate_state` measured: the test metrics (JSON-ready), the test embedding
    (n_test, k) as ``embed`` returns it, the view weights (n_test, V), the k-means centres found
    on the test embedding (n_clusters, k) and the embedding's health (:mod:`specrage_jax.evaluation.health`)."""

    metrics: dict[str, Any]
    y_test: np.ndarray
    alpha_test: np.ndarray
    centres: np.ndarray
    health: HealthReport


def evaluate_state(state: SpecRaGEState, splits: PreparedSplits, config: ExperimentConfig, *, seed: int,
                   max_rows: int | None = None) -> Evaluation:
    """Test metrics (k-means on the test embedding; SVM trained on train, scored on test) and the
    embedding's health (recorded under "health": orthogonality, spread, largest cluster, problems).

    ``max_rows`` (streamed runs) bounds the evaluation: k-means runs on at most that many seeded
    random test rows and the SVM trains on at most that many training rows (so only those are
    embedded); it still scores every test row. The row counts are recorded in the metrics under
    "eval_rows". None (the default): every row, and no "eval_rows" entry.
    """
    batch = config.eval.embed_batch_size
    n_train, n_test = len(splits.train_labels), len(splits.test_labels)
    svm_rows = evaluation_rows(n_train, max_rows, seed=seed, stream=0)
    kmeans_rows = evaluation_rows(n_test, max_rows, seed=seed, stream=1)
    y_train, _ = embed(state, select_rows(splits.train, svm_rows), batch_size=batch)
    train_labels = splits.train_labels if svm_rows is None else splits.train_labels[svm_rows]
    y_test_raw, alpha_test = embed(state, splits.test, batch_size=batch, rows="raw")
    y_test = unit_rows(y_test_raw) if config.model.output_rows == "unit" else y_test_raw  # what embed() returns
    rows = slice(None) if kmeans_rows is None else kmeans_rows
    kmeans_labels = splits.test_labels[rows]
    n_clusters = int(max(splits.train_labels.max(), splits.test_labels.max()) + 1)
    predicted, centres = kmeans_clusters(y_test[rows], n_clusters=n_clusters, seed=seed,
                                         n_init=config.eval.kmeans_n_init)
    health = embedding_problems(y_test_raw[rows], predicted, n_clusters, convention=config.ortho.convention)
    metrics = {
        "kmeans": cluster_scores(kmeans_labels, predicted),
        "svm": svm_metrics(y_train, train_labels, y_test, splits.test_labels, seed=seed),
        "orthogonality_error": health.orthogonality_error,
        "mean_view_weights": [float(w) for w in alpha_test.mean(axis=0)],
        "health": health.as_dict(),
    }
    if max_rows is not None:
        metrics["eval_rows"] = {"max_rows": int(max_rows), "kmeans_test_rows": len(kmeans_labels),
                                "svm_train_rows": len(train_labels), "svm_test_rows": n_test,
                                "subsample_seed": [seed, EVAL_SUBSAMPLE_STREAM]}
    return Evaluation(metrics=metrics, y_test=y_test, alpha_test=alpha_test, centres=centres, health=health)


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


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Writes JSON through a temporary file and a rename, so a crash never leaves a torn file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    os.replace(tmp, path)


def environment_info() -> dict[str, str]:
    return {"python": platform.python_version(), "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": str(jax.devices()), "machine": platform.machine()}


# --- pre-trained nets on disk -----------------------------------------------------------------


# --- runs: the record that resume checks --------------------------------------------------------

RUN_RECORD = "run.json"
RUN_FORMAT_VERSION = 1


def data_fingerprint(data: MultiViewData) -> dict[str, Any]:
    """Sample count, view dims and a CRC32 of every view and the labels (resume refuses other data).
    A streamed dataset gives the CRC32 of each of its files instead (``StreamedViews.fingerprint``)."""
    if isinstance(data, StreamedViews):
        return data.fingerprint()
    crc = 0
    for array in (*data.views, data.labels):
        crc = zlib.crc32(np.ascontiguousarray(array).tobytes(), crc)
    return {"n_samples": int(data.labels.shape[0]), "view_dims": [int(d) for d in data.view_dims],
            "crc32": f"{crc:08x}"}


def comparable_config(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration without what does not change results (checkpointing, progress bars)."""
    values = json.loads(json.dumps(config_to_dict(config)))
    values.pop("checkpoint", None)
    values["train"].pop("progress", None)
    return values


def config_differences(recorded: ExperimentConfig, requested: ExperimentConfig) -> list[str]:
    """["section.field: recorded -> requested", ...] over the fields that change results."""
    a, b = comparable_config(recorded), comparable_config(requested)
    return [f"{section}.{name}: {a[section].get(name)!r} -> {b.get(section, {}).get(name)!r}"
            for section in a for name in a[section] if a[section].get(name) != b.get(section, {}).get(name)]


def read_run_record(out_dir: str | Path) -> dict[str, Any]:
    """OUT/checkpoints/run.json of an earlier run.

    Raises:
      CheckpointError: when there is none or it cannot be read.
    """
    path = Path(out_dir) / "checkpoints" / RUN_RECORD
    if not path.is_file():
        raise CheckpointError(f"nothing to resume in {out_dir}: no {path} (was it trained with checkpoints on, "
                              f"--checkpoint-every > 0?)")
    try:
        record = json.loads(path.read_text())
        config_from_dict(record["config"])
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{path} is damaged: {err}") from None
    if record.get("kind") != "run" or record.get("format_version", 0) > RUN_FORMAT_VERSION:
        raise CheckpointError(f"{path} is not a run record this specrage_jax ({library_version()}) reads")
    return record


def _check_resume(record: dict[str, Any], dataset: str, seed: int, config: ExperimentConfig,
                  fingerprint: dict[str, Any], where: Path) -> None:
    problems = []
    if record["dataset"] != dataset:
        problems.append(f"dataset {record['dataset']!r} -> {dataset!r}")
    if record["seed"] != seed:
        problems.append(f"seed {record['seed']} -> {seed}")
    problems += config_differences(config_from_dict(record["config"]), config)
    if record.get("data") != fingerprint:
        problems.append(f"data {record.get('data')} -> {fingerprint}")
    if problems:
        raise CheckpointError(f"cannot resume {where}: the run was recorded with other settings "
                              f"({'; '.join(problems)}); resume with the recorded ones or start a new run in "
                              f"another directory")


def _start_run(ckpt_dir: Path, record: dict[str, Any], *, resume: bool) -> None:
    """Checks and writes OUT/checkpoints/run.json. A fresh run refuses to overwrite the checkpoints of
    a run that was interrupted (status 'running'); those of a finished or failed run are replaced."""
    run_file = ckpt_dir / RUN_RECORD
    if not resume and run_file.is_file():
        try:
            earlier = json.loads(run_file.read_text())
        except ValueError:
            earlier = {}
        if earlier.get("status") == "running":
            raise CheckpointError(f"{ckpt_dir} holds the checkpoints of an interrupted run "
                                  f"({earlier.get('dataset')}, seed {earlier.get('seed')}); continue it with "
                                  f"--resume {ckpt_dir.parent}, or delete {ckpt_dir} / choose another output directory")
    if not resume and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_file, {**record, "status": "running"})


def _set_run_status(ckpt_dir: Path, status: str) -> None:
    run_file = ckpt_dir / RUN_RECORD
    write_json_atomic(run_file, {**json.loads(run_file.read_text()), "status": status})


def _pretrain_for_run(splits: PreparedSplits, config: ExperimentConfig, *, seed: int, ckpt_dir: Path | None,
                      resume: bool) -> PretrainResult:
    """Pre-training, restoring the nets of a resumed run and saving them for a later resume."""
    if not (config.autoencoder.enabled or config.siamese.enabled):
        return run_pretraining(splits, config, seed=seed)
    restored = None
    saved_dir = None if ckpt_dir is None else ckpt_dir / "pretrained"
    if resume and saved_dir is not None and saved_dir.exists():
        try:
            restored = load_pretrained_nets(saved_dir, config)
        except CheckpointError as err:
            warnings.warn(f"{err}; training the pre-training nets again", stacklevel=2)
    result = run_pretraining(splits, config, seed=seed, restored=restored)
    if saved_dir is not None and restored is None:
        save_pretrained_nets(saved_dir, result.nets, config)
    return result


@dataclass(frozen=True)
class RunOutputs:
    """What one training run produced: the metrics record, the trained state, the pre-training
    result (splits after the autoencoders, nets), and the test evaluation (embedding, view
    weights, k-means centres, health)."""

    result: dict[str, Any]
    state: SpecRaGEState
    pretrained: PretrainResult
    evaluation: Evaluation
    config: ExperimentConfig  # as resolved for the data (what the state was trained with)


STREAM_AUTO_MIN_ROWS = 250_000  # stream infinitemnist / memmap:DIR from disk from this many samples on
STREAM_EVAL_MAX_ROWS = 100_000  # a streamed run's k-means / SVM-training rows (seeded subsample above)


def should_stream(dataset: str, stream: bool | None, data_dir: str | None = None) -> bool:
    """Whether a run reads ``dataset`` from disk on demand: ``stream`` when given (True for a
    dataset that cannot stream raises ValueError when it is opened), else automatically for
    infinitemnist[:N] and memmap:DIR with at least ``STREAM_AUTO_MIN_ROWS`` samples."""
    if stream is not None:
        return stream
    if not parse_dataset_name(dataset).streamable:
        return False
    return (dataset_rows(dataset, data_dir) or 0) >= STREAM_AUTO_MIN_ROWS


def run_experiment(
    dataset: str, config: ExperimentConfig, *, seed: int, out_dir: str | Path | None = None,
    data_dir: str | None = None, figure: bool = True, resume: bool = False, mesh: Mesh | None = None,
    stream: bool | None = None, cache_dir: str | Path | None = None, eval_max_rows: int | None = STREAM_EVAL_MAX_ROWS,
    report: Callable[[dict[str, Any], tuple[Stage, ...]], None] | None = None,
) -> dict[str, Any]:
    """Trains and evaluates on ``dataset``; with ``out_dir`` writes metrics.json, embedding.png, the
    inference model OUT/model (``checkpoint.save_model``) and, with ``checkpoint.every_epochs`` > 0,
    training checkpoints under OUT/checkpoints.

    ``mesh`` trains data-parallel over its devices (``sharding.make_data_mesh``); None: one device.

    ``resume`` continues the interrupted run in ``out_dir`` (same dataset, seed and configuration,
    checked against OUT/checkpoints/run.json, up to the checkpoint section and progress bars).

    ``stream`` (see :func:`should_stream`; None: automatic) reads the dataset from disk on demand
    (infinitemnist[:N] generated once into ``cache_dir``, default DATA_DIR/specrage_cache, or
    memmap:DIR): splits are row sets over the files, the autoencoders train on gathered batches and
    encode chunk by chunk, and the evaluation subsamples at most ``eval_max_rows`` rows (None: all).
    The in-memory path (``stream`` False) is unchanged.

    ``report`` receives the data-aware settings as resolved ({setting: {value, why}}) and the
    stages to train (:func:`run_plan.stage_plan`) before training starts (:func:`train_and_evaluate`).

    Returns the metrics dictionary (metrics are fractions in [0, 1]).

    Raises:
      CheckpointError (a ValueError): nothing to resume; a resume whose settings or data differ
        from the recorded run; a fresh run over the checkpoints of an interrupted one; an
        incompatible checkpoint.
      ValueError: streaming a dataset that cannot stream, or with data.preprocess other than 'none'.
    """
    start = time.perf_counter()
    streamed = should_stream(dataset, stream, data_dir)
    if not streamed:
        data = load_dataset(dataset, seed=seed, data_dir=data_dir)
        return _run_loaded(data, dataset, config, seed=seed, out_dir=out_dir, data_dir=data_dir, figure=figure,
                           resume=resume, mesh=mesh, start=start, report=report)
    data = open_streamed_dataset(dataset, seed=seed, data_dir=data_dir, cache_dir=cache_dir)
    try:
        return _run_loaded(data, dataset, config, seed=seed, out_dir=out_dir, data_dir=data_dir, figure=figure,
                           resume=resume, mesh=mesh, start=start, eval_max_rows=eval_max_rows, report=report)
    finally:
        data.close()


def _run_loaded(data: MultiViewData | StreamedViews, dataset: str, config: ExperimentConfig, *, seed: int,
                out_dir: str | Path | None, data_dir: str | None, figure: bool, resume: bool, mesh: Mesh | None,
                start: float, eval_max_rows: int | None = None,
                report: Callable[[dict[str, Any], tuple[Stage, ...]], None] | None = None) -> dict[str, Any]:
    """:func:`run_experiment` on loaded (or opened) data."""
    config = with_n_components(config, data.n_classes)
    out = None if out_dir is None else Path(out_dir)
    ckpt_dir = None if out is None or not config.checkpoint.every_epochs else out / "checkpoints"
    if resume and ckpt_dir is None:
        raise ValueError("resume needs an output directory and checkpoint.every_epochs > 0")
    if ckpt_dir is not None:
        fingerprint = data_fingerprint(data)
        if resume:
            _check_resume(read_run_record(out), dataset, seed, config, fingerprint, out)
        _start_run(ckpt_dir, {"format": "specrage_jax", "kind": "run", "format_version": RUN_FORMAT_VERSION,
                              "library_version": library_version(), "dataset": dataset, "seed": seed,
                              "data_dir": data_dir, "config": config_to_dict(config), "data": fingerprint,
                              "stream": isinstance(data, StreamedViews)},
                   resume=resume)
    try:
        outputs = train_and_evaluate(data, config, seed=seed, dataset=dataset, ckpt_dir=ckpt_dir, resume=resume,
                                     mesh=mesh, eval_max_rows=eval_max_rows, report=report)
    except BaseException:
        if ckpt_dir is not None:
            _set_run_status(ckpt_dir, "failed")
        raise
    result = outputs.result
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if config.checkpoint.save_model:
            save_start = time.perf_counter()
            save_inference_model(out / "model", outputs.state, outputs.config, scalers=outputs.pretrained.splits.scalers,
                                 nets=outputs.pretrained.nets, input_dims=data.view_dims,
                                 view_names=data.view_names, dataset=dataset, seed=seed,
                                 centres=outputs.evaluation.centres,
                                 extra_metadata={"history": result["training"], "health": result["test"]["health"],
                                                 "resolved_defaults": result["resolved_defaults"]})
            result["timing"]["model_save_seconds"] = time.perf_counter() - save_start
        result["timing"]["total_seconds"] = time.perf_counter() - start
        write_json_atomic(out / "metrics.json", result)
        if figure:
            from specrage_jax.runs.plots import plot_embedding

            plot_embedding(outputs.evaluation.y_test, outputs.pretrained.splits.test_labels,
                           outputs.evaluation.alpha_test,
                           out / "embedding.png", title=dataset, view_names=data.view_names)
    else:
        result["timing"]["total_seconds"] = time.perf_counter() - start
    if ckpt_dir is not None:
        _set_run_status(ckpt_dir, "complete")
    return result


def train_and_evaluate(data: MultiViewData, config: ExperimentConfig, *, seed: int, dataset: str | None = None,
                       ckpt_dir: Path | None = None, resume: bool = False, mesh: Mesh | None = None,
                       eval_max_rows: int | None = None,
                       report: Callable[[dict[str, Any], tuple[Stage, ...]], None] | None = None) -> RunOutputs:
    """Split, preprocess, pre-train, train (checkpointing into ``ckpt_dir`` when given; continuing
    from it with ``resume``) and evaluate; ``config.model.n_components`` must be set. ``dataset``
    names the data in the record (default ``data.name``). ``data`` may be a ``StreamedViews``
    (read from disk on demand); ``eval_max_rows`` then bounds the evaluation (:func:`evaluate_state`).
    Settings left to the data (:meth:`ExperimentConfig.auto`) are resolved on the training split
    and recorded under "resolved_defaults"; ``report`` receives that record and the stage plan
    (:func:`run_plan.stage_plan`) before training."""
    dataset = dataset or data.name
    splits = prepare_splits(data, config, seed=seed)
    config, resolved = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    check_training_sizes(n_samples=len(data.labels), n_train=len(splits.train_labels),
                         batch_size=config.train.batch_size, n_neighbors=config.graph.n_neighbors,
                         n_components=config.model.n_components, n_clusters=data.n_classes,
                         n_test=len(splits.test_labels), what=f"dataset {dataset!r}")
    if report is not None:
        report(resolved, stage_plan(config, n_train=len(splits.train_labels), n_views=len(data.view_dims)))
    train_start = time.perf_counter()
    pretrained = _pretrain_for_run(splits, config, seed=seed, ckpt_dir=ckpt_dir, resume=resume)
    pretrained = dataclasses.replace(pretrained, codes=unreduced_codes(config, splits, pretrained.codes))
    stage_seconds = dict(pretrained.timings)
    fit_start = time.perf_counter()
    checkpointer = None
    if ckpt_dir is not None:
        checkpointer = TrainingCheckpointer(ckpt_dir, every_epochs=config.checkpoint.every_epochs,
                                            keep=config.checkpoint.keep, min_seconds=config.checkpoint.min_seconds,
                                            model_config=config.model,
                                            metadata={"dataset": dataset, "seed": seed})
    try:
        state, history = train_on_splits(pretrained.splits, config, seed=seed, codes=pretrained.codes,
                                         checkpointer=checkpointer, resume=resume, mesh=mesh)
    finally:
        if checkpointer is not None:
            checkpointer.close()
    stage_seconds["specrage_seconds"] = time.perf_counter() - fit_start
    if checkpointer is not None:
        stage_seconds["checkpoint_seconds"] = float(sum(checkpointer.save_seconds))
    train_seconds = time.perf_counter() - train_start
    eval_start = time.perf_counter()
    streamed = isinstance(data, StreamedViews)
    evaluation = evaluate_state(state, pretrained.splits, config, seed=seed,
                                                      max_rows=eval_max_rows if streamed else None)
    ps = pretrained.splits
    result: dict[str, Any] = {
        "dataset": dataset, "seed": seed,
        "n_samples": {"train": len(ps.train_labels), "val": len(ps.val_labels), "test": len(ps.test_labels)},
        "view_dims": list(data.view_dims),
        "test": evaluation.metrics,
        "timing": {"train_seconds": train_seconds, **stage_seconds, "eval_seconds": time.perf_counter() - eval_start},
        "training": {**history.as_dict(),
                     "resumed_from_epoch": None if checkpointer is None else checkpointer.resumed_from},
        "config": config_to_dict(config),
        "resolved_defaults": resolved,
        "environment": environment_info(),
    }
    if streamed:
        result["stream"] = {"directory": str(data.source.directory), "storage_dtype": data.source.meta["dtype"]}
    return RunOutputs(result=result, state=state, pretrained=pretrained, evaluation=evaluation,
                      config=config)
