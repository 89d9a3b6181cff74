"""The training pipeline that the estimator (``SpecRaGE.fit``) and the CLI (``specrage train``)
both run, one function per stage:

    preprocess -> resolve_settings -> check_sizes -> pretrain -> train -> finish_model -> embed_rows -> cluster
    -> health

Each stage takes its rows and settings explicitly (training rows, validation rows, any other
rows to carry through, the configuration, the seed) and returns what the next stage needs. The
estimator adds the scikit-learn contract around it (input validation, its seeded split of the
rows it is given, fitted attributes, warnings); the CLI (:mod:`specrage_jax.runs.experiment`)
adds dataset loading, its train/validation/test split, evaluation metrics, files and printing.
So the same rows, seed and settings give bitwise the same model either way.

Inference on new rows is :mod:`specrage_jax.api.pipeline`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from specrage_jax.config import AUTO, AUTO_COMPONENTS, ExperimentConfig
from specrage_jax.data.lazy import is_streamed
from specrage_jax.data.preprocess import (
    ViewScaler,
    apply_view_scalers,
    fit_view_scalers,
    graph_input_views,
    leave_out_views,
    unit_rows,
)
from specrage_jax.evaluation.clusters import kmeans_centres_and_labels
from specrage_jax.evaluation.health import HealthReport, embedding_problems
from specrage_jax.nets.embed import embed_outputs
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.defaults import (
    FULL_BATCH_MAX,
    DataShape,
    describe_preprocessing,
    resolve_defaults,
)
from specrage_jax.training.graph_probes import seeded_rows
from specrage_jax.training.initial_state import train_model
from specrage_jax.training.missing_view_rules import GROWN_BATCH_MAX
from specrage_jax.training.output_map import fit_output_map
from specrage_jax.training.pretrained import PretrainedNets, pretrain_nets
from specrage_jax.training.single_view import fit_single_view_nets
from specrage_jax.training.stages import encode_views
from specrage_jax.training.unrelated_views import unrelated_views, view_relations
from specrage_jax.validation import check_training_sizes, check_view_coverage, missing_rows

Views = tuple[Any, ...]  # V arrays (n, d_v) each; of a dataset streamed from disk, ``data.lazy.MemmapRows``


# --- preprocess ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scaled:
    """The views after the per-view scaling fitted on the training rows."""

    scalers: tuple[ViewScaler, ...]
    train: Views
    val: Views
    rest: Views  # other rows carried through (the CLI's test split; the estimator's every row)
    unreduced: tuple[Views, Views] | None  # graph inputs of data.graph_inputs=unreduced (train, val)


def preprocess(
    train: Sequence[Any],
    val: Sequence[Any],
    config: ExperimentConfig,
    *,
    rest: Sequence[Any] = (),
    n_clusters: int,
    seed: int,
) -> Scaled:
    """Per-view scalers (``data.preprocess``) fitted on ``train`` (V arrays (n_train, d_v), NaN rows
    for missing views) and applied to ``train``, ``val`` and ``rest``; and the views' rows
    before any SVD projection (None when no scaler projects). With
    ``data.unrelated_views=leave_out``, the views :func:`leave_out_unrelated_views` finds
    unrelated (for ``n_clusters`` clusters, on a sample drawn with ``seed``) are left out of every
    array returned."""
    scalers = fit_view_scalers(
        train,
        config.data.preprocess,
        svd_components=config.data.svd_components,
        sparse_below=config.data.sparse_below,
    )
    if config.data.unrelated_views == "leave_out":
        scalers = leave_out_unrelated_views(scalers, train, n_clusters, seed=seed)
    unreduced_train = graph_input_views(scalers, train)
    return Scaled(
        scalers=scalers,
        train=apply_view_scalers(scalers, train),
        val=apply_view_scalers(scalers, val),
        rest=apply_view_scalers(scalers, rest) if len(rest) else (),
        # not None for the validation views either: the same scalers project them
        unreduced=None
        if unreduced_train is None
        else (unreduced_train, cast(tuple[np.ndarray, ...], graph_input_views(scalers, val))),
    )


def leave_out_unrelated_views(
    scalers: Sequence[ViewScaler], train: Sequence[Any], n_clusters: int, *, seed: int
) -> tuple[ViewScaler, ...]:
    """``scalers`` with the views unrelated to the others (:mod:`specrage_jax.training.unrelated_views`,
    read on a seeded sample of at most FULL_BATCH_MAX complete training rows as their graphs see
    them) marked ``left_out``, with a warning naming each; unchanged with fewer than three views or where a
    training sample lacks a view."""
    scalers = tuple(scalers)
    if len(scalers) < 3 or any(missing_rows(np.asarray(v)).any() for v in train):
        return scalers
    n = len(train[0])
    rows = seeded_rows(n, min(n, FULL_BATCH_MAX), seed=seed, stream=7)
    sample = tuple(np.asarray(v)[rows] for v in train)
    graph_rows = graph_input_views(scalers, sample) or apply_view_scalers(scalers, sample)
    relations = view_relations(graph_rows, n_clusters, seed=seed)
    left_out = unrelated_views(relations)
    why = [f"{relations[v].rule}: {relations[v].reason()}" for v in left_out]
    for v, reason in zip(left_out, why):
        warnings.warn(
            f"SpecRaGE: view {v} is left out of the fit ({reason}). "
            "transform still takes the view and gives it weight 0; set data.unrelated_views=keep to use it",
            UserWarning,
            stacklevel=3,
        )
    return leave_out_views(scalers, left_out, why)


def describe_left_out_views(scalers: Sequence[ViewScaler]) -> dict[str, Any]:
    """The record entry for ``data.unrelated_views`` where a view was left out; empty otherwise."""
    left_out = [v for v, s in enumerate(scalers) if s.left_out]
    if not left_out:
        return {}
    reasons = [scalers[v].left_out_why or "left out" for v in left_out]
    return {
        "data.unrelated_views": {
            "value": left_out,
            "why": "; ".join(f"view {v}, {reason}" for v, reason in zip(left_out, reasons))
            + "; transform gives them weight 0",
            "rule": " and ".join(sorted({reason.split(":")[0] for reason in reasons})),
        }
    }


# --- resolve settings ---------------------------------------------------------------------------


def resolve_settings(
    config: ExperimentConfig,
    train: Sequence[Any],
    n_clusters: int,
    *,
    seed: int,
    scalers: Sequence[ViewScaler],
    unreduced_train: Sequence[Any] | None = None,
) -> tuple[ExperimentConfig, dict[str, Any]]:
    """:func:`~specrage_jax.training.defaults.resolve_defaults` on the scaled training rows; the
    record names each chosen value and why (the per-view preprocessing last).

    The rules that look at the rows draw their own seeded batches from every training row held in
    memory, so the command line and the estimator decide alike on the same rows. Rows streamed
    from disk are read once as a seeded sample of at most FULL_BATCH_MAX rows (GROWN_BATCH_MAX
    where views are missing)."""
    described = describe_preprocessing([s.kind for s in scalers], config.data.preprocess, [s.reason for s in scalers])
    described.update(describe_left_out_views(scalers))
    views_missing = any(missing_rows(v).any() for v in train)
    incomplete = config.train.missing_view_batch_growth > 1 and views_missing
    if not config.unresolved_fields() and not incomplete:
        return config, described
    n_train = len(train[0])
    views = unreduced = None
    reads_rows = (
        config.graph.n_neighbors == 0
        or config.model.n_components == AUTO_COMPONENTS
        or (config.data.graph_inputs == AUTO and unreduced_train is not None)  # the short-documents rule
    )
    if reads_rows or incomplete:  # the rules that look at the rows themselves
        rows = None
        if is_streamed(train):
            rows = evaluation_rows(n_train, GROWN_BATCH_MAX if incomplete else FULL_BATCH_MAX, seed=seed, stream=2)
            rows = np.arange(n_train) if rows is None else rows
        views = tuple(np.asarray(v if rows is None else v[rows]) for v in train)  # x[idx] reads streamed rows
        unreduced = None if unreduced_train is None else tuple(select_rows(unreduced_train, rows))
    resolved, chosen = resolve_defaults(
        config,
        DataShape(
            views=views,
            n_clusters=n_clusters,
            seed=seed,
            unreduced_views=unreduced,
            n_train=n_train,
            views_missing=views_missing,
        ),
    )
    chosen.update(described)
    return resolved, chosen


def check_sizes(
    config: ExperimentConfig,
    train: Sequence[Any],
    *,
    n_samples: int,
    n_clusters: int,
    n_test: int | None = None,
    what: str = "X",
    extra: str = "",
) -> None:
    """Before any training: the data is large enough for the kNN graph, the orthogonalization and
    the clusters (:func:`validation.check_training_sizes`), and every view is present on enough
    training rows for its graph (:func:`validation.check_view_coverage`).

    Raises:
      ValueError: naming the setting or the view, the sizes and the fix.
    """
    check_training_sizes(
        n_samples=n_samples,
        n_train=len(train[0]),
        batch_size=config.train.batch_size,
        n_neighbors=config.graph.n_neighbors,
        n_components=config.model.n_components,
        n_clusters=n_clusters,
        n_test=n_test,
        what=what,
        extra=extra,
    )
    check_view_coverage(train, config.graph.n_neighbors)


# --- pre-train ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pretrained:
    """The network's inputs per row set (the scaled views through the autoencoder encoders, as
    scaled without them), the affinity inputs per row set (Siamese codes, else with
    ``data.graph_inputs=unreduced`` the unreduced rows, else None), the nets and the seconds
    each stage took."""

    nets: PretrainedNets
    train: Views
    val: Views
    rest: Views
    codes: tuple[Views, Views, Views] | None  # (train, val, rest); rest is () for unreduced rows
    timings: dict[str, float]


def pretrain(
    scaled: Scaled, config: ExperimentConfig, *, seed: int, restored: PretrainedNets | None = None
) -> Pretrained:
    """The optional pre-training stages (:func:`training.pretrained.pretrain_nets`: autoencoders,
    then Siamese nets on the autoencoded views) trained on ``scaled.train``, and every row set
    through them. A stage whose nets are in ``restored`` (a resumed run) is not retrained."""
    nets, timings = pretrain_nets(scaled.train, config, seed=seed, restored=restored)
    inputs = (scaled.train, scaled.val, scaled.rest)
    if nets.autoencoders is not None:
        start = time.perf_counter()
        inputs = tuple(encode_views(nets.autoencoders, x) for x in inputs)  # type: ignore[assignment]
        timings["autoencoder_seconds"] += time.perf_counter() - start
    codes: tuple[Views, Views, Views] | None = None
    if nets.siamese is not None:
        start = time.perf_counter()
        codes = cast(tuple[Views, Views, Views], tuple(encode_views(nets.siamese, x) for x in inputs))
        timings["siamese_seconds"] += time.perf_counter() - start
    elif config.data.graph_inputs == "unreduced" and scaled.unreduced is not None:
        codes = (*scaled.unreduced, ())
    return Pretrained(nets=nets, train=inputs[0], val=inputs[1], rest=inputs[2], codes=codes, timings=timings)


# --- train --------------------------------------------------------------------------------------


# SpecRaGE trained on the training inputs, its schedule driven by the validation inputs,
# affinities from the codes when given: the training stage is the training layer's own function.
train = train_model


def finish_model(
    state: SpecRaGEState,
    train: Views,
    train_codes: Views | None,
    *,
    n_clusters: int,
    batch_size: int,
    seed: int,
    mesh: Any = None,
    chunk_rows: int = 4096,
    progress: bool = False,
) -> SpecRaGEState:
    """What is fitted once the fusion is trained, on the training inputs: the output map P
    (Y -> Y P) of ``model.output_scaling`` for the number of clusters asked for, then the
    single-view nets of ``model.single_view_nets`` (:mod:`specrage_jax.training.single_view`; the
    fused targets read ``chunk_rows`` rows at a time)."""
    state = fit_output_map(
        state, train, train_codes, n_clusters=n_clusters, batch_size=batch_size, seed=seed, mesh=mesh
    )
    return fit_single_view_nets(state, train, seed=seed, chunk_rows=chunk_rows, progress=progress)[0]


# --- embed, cluster, health ---------------------------------------------------------------------


@dataclass(frozen=True)
class Embedded:
    """An embedding as returned to the user (Y P, unit rows with ``model.output_rows=unit``), the
    raw rows Y as trained, before the output map (what the health check reads) and the view
    weights (n, V)."""

    embedding: np.ndarray
    raw: np.ndarray
    view_weights: np.ndarray


def embed_rows(state: SpecRaGEState, inputs: Sequence[Any], config: ExperimentConfig) -> Embedded:
    """The trained model on the network's inputs (n rows), in batches of ``eval.embed_batch_size``."""
    outputs = embed_outputs(state, inputs, batch_size=config.eval.embed_batch_size)
    mapped = outputs.mapped
    embedding = unit_rows(mapped) if config.model.output_rows == "unit" else mapped  # what embed() returns
    return Embedded(embedding=embedding, raw=outputs.trained, view_weights=outputs.view_weights)


@dataclass(frozen=True)
class Clusters:
    """A seeded k-means of an embedding: labels (n,), centres (n_clusters, k) float32, inertia."""

    labels: np.ndarray
    centres: np.ndarray
    inertia: float


def cluster(
    embedding: np.ndarray, n_clusters: int, config: ExperimentConfig, *, seed: int, one_thread: bool = True
) -> Clusters:
    """k-means (``eval.kmeans_n_init`` starts, seeded) on ``embedding`` (n, k); ``one_thread``
    (the estimator) runs it on one OpenMP thread, False (a run's test k-means) on scikit-learn's.

    Raises:
      ValueError: n_clusters outside 1..n.
    """
    embedding = np.asarray(embedding)
    if not 1 <= n_clusters <= embedding.shape[0]:
        raise ValueError(f"n_clusters must be in 1..{embedding.shape[0]} (the number of samples), got {n_clusters}")
    labels, centres, inertia = kmeans_centres_and_labels(
        embedding, n_clusters, config.eval.kmeans_n_init, seed, one_thread=one_thread
    )
    return Clusters(labels=labels, centres=centres, inertia=inertia)


def health(raw: np.ndarray, labels: np.ndarray, n_clusters: int, config: ExperimentConfig) -> HealthReport:
    """:func:`evaluation.health.embedding_problems` of the raw embedding rows and their clusters."""
    return embedding_problems(raw, labels, n_clusters, convention=config.ortho.convention)


# --- row subsets --------------------------------------------------------------------------------

EVAL_SUBSAMPLE_STREAM = 7  # np.random.default_rng([seed, 7, 0 (SVM train) | 2 (defaults)])


def evaluation_rows(n: int, max_rows: int | None, *, seed: int, stream: int) -> np.ndarray | None:
    """Sorted (max_rows,) seeded random rows of n when n > max_rows, else None (every row)."""
    if max_rows is None or n <= max_rows:
        return None
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1 (or None for every row), got {max_rows}")
    rng = np.random.default_rng([seed, EVAL_SUBSAMPLE_STREAM, stream])
    return np.sort(rng.choice(n, size=max_rows, replace=False))


def validation_split(n: int, seed: int, validation_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, validation rows) of n, seeded: the estimator's split of X."""
    n_val = int(validation_fraction * n)
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def select_rows(views: Sequence[Any], rows: np.ndarray | None) -> tuple[Any, ...]:
    """The views at sorted ``rows`` (None: the views as they are); streamed views stay unread."""
    if rows is None:
        return tuple(views)
    return tuple(v.take(rows) if is_streamed([v]) else v[rows] for v in views)
