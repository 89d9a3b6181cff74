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

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jax.sharding import Mesh

from specrage_jax.api import fit_pipeline as pipeline
from specrage_jax.api.pipeline import save_inference_model
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import MultiViewData, load_dataset
from specrage_jax.data.lazy import StreamedViews
from specrage_jax.data.registry import dataset_rows, open_streamed_dataset, parse_dataset_name
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.overrides import config_to_dict
from specrage_jax.runs.acc_trace import AccuracyTrace, accuracy_trace
from specrage_jax.runs.evaluate import Evaluation, evaluate_state, split_clusters
from specrage_jax.runs.prepare import (
    PreparedSplits,
    PretrainResult,
    SplitCodes,
    prepare_splits,
    pretrain_result,
    resolve_run_defaults,
    scaled_splits,
    with_n_components,
)
from specrage_jax.runs.records import (
    RUN_FORMAT_VERSION,
    check_resume,
    data_fingerprint,
    environment_info,
    read_run_record,
    set_run_status,
    start_run,
    write_json_atomic,
)
from specrage_jax.runs.run_plan import Stage, stage_plan
from specrage_jax.training import preemption
from specrage_jax.training.checkpoint import TrainingCheckpointer
from specrage_jax.training.checkpoint_files import CheckpointError, library_version
from specrage_jax.training.distributed import barrier, host_local, is_primary
from specrage_jax.training.loop import History
from specrage_jax.training.pretrained import load_pretrained_nets, save_pretrained_nets


def train_on_splits(
    splits: PreparedSplits,
    config: ExperimentConfig,
    *,
    seed: int,
    codes: SplitCodes | None = None,
    checkpointer: TrainingCheckpointer | None = None,
    resume: bool = False,
    mesh: Mesh | None = None,
    on_epoch_end: Callable[[SpecRaGEState, Any], None] | None = None,
) -> tuple[SpecRaGEState, History]:
    """:func:`api.fit_pipeline.train` and its output map (the estimator's path too) on a run's
    splits: trained on the training split, validated on the validation split, affinities from
    ``codes``; the output map for the classes the labels name.

    ``checkpointer`` saves training checkpoints; with ``resume`` training continues from its
    newest readable one (from scratch, with a warning, when there is none).
    """
    train_codes = None if codes is None else codes.train
    state, history = pipeline.train(
        splits.train,
        splits.val,
        config,
        seed=seed,
        train_codes=train_codes,
        val_codes=None if codes is None else codes.val,
        checkpointer=checkpointer,
        resume=resume,
        mesh=mesh,
        on_epoch_end=on_epoch_end,
    )
    state = pipeline.finish_model(
        state,
        splits.train,
        train_codes,
        n_clusters=split_clusters(splits),
        batch_size=config.train.batch_size,
        seed=seed,
        mesh=mesh,
        chunk_rows=config.eval.embed_batch_size,
        progress=config.train.progress,
    )
    return state, history


# --- runs: the record that resume checks --------------------------------------------------------


def _pretrain_for_run(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int, ckpt_dir: Path | None, resume: bool
) -> PretrainResult:
    """The pipeline's pre-training stage (:func:`api.fit_pipeline.pretrain`) on a run's splits,
    restoring the nets of a resumed run and saving them for a later resume."""
    restored = None
    saved_dir = None if ckpt_dir is None else ckpt_dir / "pretrained"
    pretraining = config.autoencoder.enabled or config.siamese.enabled
    if pretraining and resume and saved_dir is not None and saved_dir.exists():
        try:
            restored = load_pretrained_nets(saved_dir, config)
        except CheckpointError as err:
            warnings.warn(f"{err}; training the pre-training nets again", stacklevel=2)
    try:
        result = pretrain_result(splits, pipeline.pretrain(scaled_splits(splits), config, seed=seed, restored=restored))
    except preemption.Preempted as err:  # the stages finished before the signal are kept
        done = getattr(err, "completed", None)
        if saved_dir is not None and done is not None and (restored is None or restored.autoencoders is None):
            save_pretrained_nets(saved_dir, done, config)
            err.checkpoint = saved_dir
        raise
    if pretraining and saved_dir is not None and (restored is None or _more_stages(result.nets, restored)):
        save_pretrained_nets(saved_dir, result.nets, config)
    return result


def _more_stages(nets: Any, restored: Any) -> bool:
    """Whether ``nets`` has a stage that ``restored`` (a resumed run's saved nets) lacks."""
    return len(nets.stages()) > len(restored.stages())


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
STREAM_EVAL_MAX_ROWS = 100_000  # a streamed run's SVM-training rows (seeded subsample above)


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
    dataset: str,
    config: ExperimentConfig,
    *,
    seed: int,
    out_dir: str | Path | None = None,
    data_dir: str | None = None,
    figure: bool = True,
    resume: bool = False,
    mesh: Mesh | None = None,
    stream: bool | None = None,
    cache_dir: str | Path | None = None,
    eval_max_rows: int | None = STREAM_EVAL_MAX_ROWS,
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
    encode chunk by chunk, and the SVM trains on at most ``eval_max_rows`` rows (None: all).
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
    data: MultiViewData | StreamedViews = (
        open_streamed_once(dataset, seed=seed, data_dir=data_dir, cache_dir=cache_dir)
        if streamed
        else load_dataset(dataset, seed=seed, data_dir=data_dir)
    )
    try:
        return _run_loaded(
            data,
            dataset,
            config,
            seed=seed,
            out_dir=out_dir,
            data_dir=data_dir,
            figure=figure,
            resume=resume,
            mesh=mesh,
            start=start,
            eval_max_rows=eval_max_rows if streamed else None,
            report=report,
        )
    finally:
        if isinstance(data, StreamedViews):
            data.close()


def open_streamed_once(dataset: str, *, seed: int, data_dir: str | None, cache_dir: str | Path | None) -> StreamedViews:
    """:func:`open_streamed_dataset`; several processes: process 0 first (generating a missing
    cache), the others once it is done, so a shared cache is generated once."""
    if is_primary():
        data = open_streamed_dataset(dataset, seed=seed, data_dir=data_dir, cache_dir=cache_dir)
    barrier(f"opened {dataset}")
    if not is_primary():
        data = open_streamed_dataset(dataset, seed=seed, data_dir=data_dir, cache_dir=cache_dir)
    return data


def _run_loaded(
    data: MultiViewData | StreamedViews,
    dataset: str,
    config: ExperimentConfig,
    *,
    seed: int,
    out_dir: str | Path | None,
    data_dir: str | None,
    figure: bool,
    resume: bool,
    mesh: Mesh | None,
    start: float,
    eval_max_rows: int | None = None,
    report: Callable[[dict[str, Any], tuple[Stage, ...]], None] | None = None,
) -> dict[str, Any]:
    """:func:`run_experiment` on loaded (or opened) data; ``start`` is when loading began."""
    data_seconds = time.perf_counter() - start  # loading, or generating a streamed dataset's files
    config = with_n_components(config, data.n_classes)
    out = None if out_dir is None else Path(out_dir)
    ckpt_dir = None if out is None or not config.checkpoint.every_epochs else out / "checkpoints"
    if resume and ckpt_dir is None:
        raise ValueError("resume needs an output directory and checkpoint.every_epochs > 0")
    if ckpt_dir is not None:
        fingerprint = data_fingerprint(data)
        if resume:
            assert out is not None  # ckpt_dir is only set with an output directory
            check_resume(read_run_record(out), dataset, seed, config, fingerprint, out)
        start_run(
            ckpt_dir,
            {
                "format": "specrage_jax",
                "kind": "run",
                "format_version": RUN_FORMAT_VERSION,
                "library_version": library_version(),
                "dataset": dataset,
                "seed": seed,
                "data_dir": data_dir,
                "config": config_to_dict(config),
                "data": fingerprint,
                "stream": isinstance(data, StreamedViews),
            },
            resume=resume,
        )
    try:
        outputs = train_and_evaluate(
            data,
            config,
            seed=seed,
            dataset=dataset,
            ckpt_dir=ckpt_dir,
            resume=resume,
            mesh=mesh,
            eval_max_rows=eval_max_rows,
            report=report,
        )
    except preemption.Preempted:
        if ckpt_dir is not None:
            set_run_status(ckpt_dir, "preempted")  # resumable; a fresh run into it is refused
        raise
    except BaseException:
        if ckpt_dir is not None:
            set_run_status(ckpt_dir, "failed")
        raise
    result = outputs.result
    result["timing"]["data_seconds"] = data_seconds
    if out is not None and config.checkpoint.save_model:  # several processes: all join the save
        save_start = time.perf_counter()
        save_inference_model(
            out / "model",
            outputs.state,
            outputs.config,
            scalers=outputs.pretrained.splits.scalers,
            nets=outputs.pretrained.nets,
            input_dims=data.view_dims,
            view_names=data.view_names,
            dataset=dataset,
            seed=seed,
            centres=outputs.evaluation.centres,
            extra_metadata={
                "history": result["training"],
                "health": result["test"]["health"],
                "resolved_defaults": result["resolved_defaults"],
            },
        )
        result["timing"]["model_save_seconds"] = time.perf_counter() - save_start
    if out is not None and is_primary():  # several processes: process 0 writes the outputs
        out.mkdir(parents=True, exist_ok=True)
        result["timing"]["total_seconds"] = time.perf_counter() - start
        write_json_atomic(out / "metrics.json", result)
        if figure:
            from specrage_jax.runs.plots import plot_embedding

            plot_embedding(
                outputs.evaluation.y_test,
                outputs.pretrained.splits.test_labels,
                outputs.evaluation.alpha_test,
                out / "embedding.png",
                title=dataset,
                view_names=data.view_names,
            )
    else:
        result["timing"]["total_seconds"] = time.perf_counter() - start
    if ckpt_dir is not None:
        set_run_status(ckpt_dir, "complete")
    return result


def train_and_evaluate(
    data: MultiViewData | StreamedViews,
    config: ExperimentConfig,
    *,
    seed: int,
    dataset: str | None = None,
    ckpt_dir: Path | None = None,
    resume: bool = False,
    mesh: Mesh | None = None,
    eval_max_rows: int | None = None,
    report: Callable[[dict[str, Any], tuple[Stage, ...]], None] | None = None,
) -> RunOutputs:
    """Split, preprocess, pre-train, train (checkpointing into ``ckpt_dir`` when given; continuing
    from it with ``resume``) and evaluate; ``config.model.n_components`` must be set. ``dataset``
    names the data in the record (default ``data.name``). ``data`` may be a ``StreamedViews``
    (read from disk on demand); ``eval_max_rows`` then bounds the SVM's training rows (:func:`evaluate_state`).
    Settings left to the data (:meth:`ExperimentConfig.auto`) are resolved on the training split
    and recorded under "resolved_defaults"; ``report`` receives that record and the stage plan
    (:func:`run_plan.stage_plan`) before training."""
    dataset = dataset or data.name
    splits = prepare_splits(data, config, seed=seed)
    config, resolved = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    pipeline.check_sizes(  # before pre-training on those rows
        config,
        splits.train,
        n_samples=len(data.labels),
        n_clusters=data.n_classes,
        n_test=len(splits.test_labels),
        what=f"dataset {dataset!r}",
    )
    if report is not None:
        report(resolved, stage_plan(config, n_train=len(splits.train_labels), n_views=len(splits.train)))
    train_start = time.perf_counter()
    with preemption.watch():  # SIGTERM / SIGINT stop pre-training and training at a step boundary
        pretrained, checkpointer, state, history, fit_seconds, trace = _train_stages(
            splits, config, seed, dataset, ckpt_dir, resume, mesh
        )
    stage_seconds = dict(pretrained.timings)
    stage_seconds["specrage_seconds"] = fit_seconds
    if checkpointer is not None:
        stage_seconds["checkpoint_seconds"] = float(sum(checkpointer.save_seconds))
    train_seconds = time.perf_counter() - train_start
    eval_start = time.perf_counter()
    streamed = isinstance(data, StreamedViews)
    state = host_local(state)  # several processes: each evaluates its own replica, locally
    evaluation = evaluate_state(
        state, pretrained.splits, config, seed=seed, max_rows=eval_max_rows if streamed else None
    )
    ps = pretrained.splits
    resumed_steps = 0 if checkpointer is None else checkpointer.resumed_steps
    result: dict[str, Any] = {
        "dataset": dataset,
        "seed": seed,
        "n_samples": {"train": len(ps.train_labels), "val": len(ps.val_labels), "test": len(ps.test_labels)},
        "view_dims": list(data.view_dims),
        "test": evaluation.metrics,
        "timing": {"train_seconds": train_seconds, **stage_seconds, "eval_seconds": time.perf_counter() - eval_start},
        "training": {
            **history.as_dict(),
            "resumed_from_epoch": None if checkpointer is None else checkpointer.resumed_from,
            **({"resumed_from_step": resumed_steps} if resumed_steps else {}),
            **({"validation_acc": trace.records} if trace is not None else {}),
        },
        "config": config_to_dict(config),
        "resolved_defaults": resolved,
        "environment": environment_info(),
    }
    present = data.present if isinstance(data, MultiViewData) else None
    if present is not None and not present.all():
        result["missing_views"] = {"fraction_missing": (1.0 - present.mean(axis=0)).tolist()}
    if isinstance(data, StreamedViews):  # i.e. streamed
        result["stream"] = {"directory": str(data.source.directory), "storage_dtype": data.source.meta["dtype"]}
    return RunOutputs(result=result, state=state, pretrained=pretrained, evaluation=evaluation, config=config)


def _train_stages(
    splits: PreparedSplits,
    config: ExperimentConfig,
    seed: int,
    dataset: str,
    ckpt_dir: Path | None,
    resume: bool,
    mesh: Mesh | None,
) -> tuple[PretrainResult, TrainingCheckpointer | None, SpecRaGEState, History, float, AccuracyTrace | None]:
    """The pre-training stages, then SpecRaGE (and the seconds it took), checkpointing into
    ``ckpt_dir`` (resuming from it); with ``eval.acc_every_epochs`` the validation ACC against
    epochs (of the epochs this process trained: a resumed run's trace starts where it resumed)."""
    pretrained = _pretrain_for_run(splits, config, seed=seed, ckpt_dir=ckpt_dir, resume=resume)
    ps = pretrained.splits
    trace = accuracy_trace(ps.val, ps.val_labels, config, n_clusters=split_clusters(ps), seed=seed)
    fit_start = time.perf_counter()
    checkpointer = None
    if ckpt_dir is not None:
        checkpointer = TrainingCheckpointer(
            ckpt_dir,
            every_epochs=config.checkpoint.every_epochs,
            keep=config.checkpoint.keep,
            min_seconds=config.checkpoint.min_seconds,
            model_config=config.model,
            metadata={"dataset": dataset, "seed": seed},
        )
    try:
        state, history = train_on_splits(
            pretrained.splits,
            config,
            seed=seed,
            codes=pretrained.codes,
            checkpointer=checkpointer,
            resume=resume,
            mesh=mesh,
            on_epoch_end=trace,
        )
    finally:
        if checkpointer is not None:
            checkpointer.close()
    return pretrained, checkpointer, state, history, time.perf_counter() - fit_start, trace
