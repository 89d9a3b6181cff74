"""Data-aware defaults: the settings whose good value depends on the data, resolved at fit.

:meth:`ExperimentConfig.auto` leaves them unresolved (0, (0,), "auto"); :func:`resolve_defaults`
fills each from what the training rows show (their number, the requested number of clusters,
the views' widths) and says why. An explicit value is never touched, except the batch size
where views are missing (:func:`~specrage_jax.training.missing_view_rules.batch_for_missing_views`)
and ``siamese.enabled`` where the opt-in ``siamese.positives=auto`` picks joint positives.
Per-view preprocessing (``data.preprocess="auto"``) is resolved where the scalers are fitted
(:func:`specrage_jax.data.preprocess.auto_view_kind`); :func:`describe_preprocessing` reports it.

This module holds the resolver and the rules that build no graph (batch size, epochs, widths,
graph inputs, degree normalization, output rows); the rules that read the training rows'
graphs are in :mod:`specrage_jax.training.graph_rules`, on the measurements of
:mod:`specrage_jax.training.graph_probes`. The rules and the measurements behind them are in
BUILD_NOTES.md ("Data-aware defaults").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specrage_jax.config import (
    AUTO,
    AUTO_COMPONENTS,
    AUTO_STEPS_PER_EPOCH,
    AUTO_VIEW_NET_STEPS,
    AUTO_WIDTHS,
    VIEW_NETS_UNTIL_STALL,
    ExperimentConfig,
    SiameseConfig,
    TrainConfig,
)
from specrage_jax.training.graph_rules import (
    CLEAR_EIGENGAP,
    GAP_GAIN,
    MANY_CLUSTERS,
    batch_component_count,
    component_count,
    neighbor_choice,
    sparse_split_in_doubt,
)
from specrage_jax.training.missing_view_rules import (
    GROWN_BATCH_MAX,
    batch_for_missing_views,
    joint_is_clearly_cleaner,
    joint_split_scores,
)
from specrage_jax.validation import missing_rows

FULL_BATCH_MAX = 4096  # up to this many training rows, every step sees the whole training set
SHORT_DOCUMENT_TERMS = 15  # projected views whose median row has at most this many terms: short documents
STEP_BUDGET = 400  # gradient steps of a run (at least; an epoch is never cut short)
MIN_STEPS_PER_EPOCH = 10  # small sets: an "epoch" of the schedule is this many full-batch steps
WIDTHS_BY_ROWS = (  # (below this many training rows, per-view MLP widths)
    (1500, (512, 512, 256)),
    (FULL_BATCH_MAX + 1, (256, 256, 128)),  # whole-set steps grow with n x width^2: narrower nets
    (50000, (512, 512, 256)),  # mini-batches of FULL_BATCH_MAX rows: the step no longer grows with n
)
LARGE_WIDTHS = (1024, 1024, 512)  # the paper's widths, from 50000 training rows on


@dataclass(frozen=True)
class DataShape:
    """What the rules look at: the model's input views on the training rows (after the per-view
    preprocessing; all of them, or a sample when there are many), V arrays (rows, d_v), and the
    number of clusters asked for. Only the choice of l reads the rows; without it ``views`` may
    be None with ``n_train`` given."""

    views: tuple[np.ndarray, ...] | None
    n_clusters: int
    seed: int = 0
    unreduced_views: tuple[np.ndarray, ...] | None = None  # graph inputs of data.graph_inputs=unreduced
    n_train: int = 0  # training rows when ``views`` hold a sample of them (or None); 0: the rows of ``views``
    views_missing: bool | None = None  # some training sample lacks a view; None: read from ``views``

    def __post_init__(self) -> None:
        if not self.n_train:
            if self.views is None:
                raise ValueError("DataShape needs the training views or n_train")
            object.__setattr__(self, "n_train", int(self.views[0].shape[0]))
        if self.views_missing is None:
            missing = self.views is not None and any(missing_rows(np.asarray(x)).any() for x in self.views)
            object.__setattr__(self, "views_missing", missing)


def projected_document_terms(shape: DataShape) -> float | None:
    """The median number of nonzero entries per row of the longest projected view (an svd_l2
    view, whose unreduced rows are wider than the model's inputs), over its present rows; None
    when no view is projected or the unreduced rows are not given."""
    if shape.unreduced_views is None or shape.views is None:
        return None
    medians = []
    for reduced, unreduced in zip(shape.views, shape.unreduced_views):
        x = np.asarray(unreduced)
        if x.shape[1] == np.asarray(reduced).shape[1]:
            continue
        rows = x[~missing_rows(x)]
        if rows.size:
            medians.append(float(np.median(np.count_nonzero(rows, axis=1))))
    return max(medians) if medians else None


def graph_inputs_rule(shape: DataShape, whole: bool) -> tuple[str, str, str]:
    """(``data.graph_inputs``, why, rule): the unreduced rows where the whole training set is one batch,
    unless the projected views hold short documents (:func:`projected_document_terms` at most
    SHORT_DOCUMENT_TERMS): two such documents share too few terms for their raw rows to find
    neighbours, and the reduced (LSA) rows pool the terms that occur together."""
    if not whole:
        return "model", "mini-batches: each step's graph is built on the reduced rows", "mini-batches"
    terms = projected_document_terms(shape)
    if terms is not None and terms <= SHORT_DOCUMENT_TERMS:
        return (
            "model",
            f"short documents: the longest projected view's median row has {terms:g} terms (at most "
            f"{SHORT_DOCUMENT_TERMS}), too few shared for the raw rows' neighbours; the graph is built on the "
            "reduced rows",
            "short documents",
        )
    terms_read = "" if terms is None else f"; the longest projected view's median row has {terms:g} terms"
    return (
        "unreduced",
        f"the whole training set is one batch, so the graph of the unreduced rows is built once{terms_read}",
        "whole set",
    )


def auto_output_rows(views_missing: bool) -> str:
    """``model.output_rows`` auto: unit where some training sample lacks a view (its row norm then
    follows the views it has), raw otherwise (the embedding as trained)."""
    return "unit" if views_missing else "raw"


def full_batch_size(n_train: int) -> int:
    """m: the whole training set while it fits one step (FULL_BATCH_MAX rows), else FULL_BATCH_MAX."""
    return max(1, min(n_train, FULL_BATCH_MAX))


def degree_normalization_rule(n_clusters: int) -> tuple[str, str, str]:
    """(graph.degree_normalization, why, rule) for ``n_clusters`` clusters: 'samples' above
    MANY_CLUSTERS clusters, else 'none'. With many small clusters each real cluster is
    a few rows, and the unnormalized Laplacian's bottom directions can as cheaply cut off a handful
    of low-degree rows; scaling W_ij by 1 / sqrt(d_i d_j) prices a cut by the degree it removes
    (the normalized cut). With few clusters the graph stays as built: there the scaling lost as
    often as it gained (BUILD_NOTES, "Data-aware defaults")."""
    if n_clusters > MANY_CLUSTERS:
        return (
            "samples",
            f"{n_clusters} clusters (more than {MANY_CLUSTERS}): W_ij / sqrt(d_i d_j) times the mean "
            "degree, so a cluster of a few rows is cut by the degree it loses, not split off cheaply at low degree",
            "many clusters",
        )
    return "none", f"{n_clusters} clusters (at most {MANY_CLUSTERS}): each view's graph as built", "few clusters"


def hidden_widths(n_train: int) -> tuple[int, ...]:
    """Per-view MLP widths by training rows (WIDTHS_BY_ROWS): 512-512-256 for small sets; while the
    whole training set is one batch (up to FULL_BATCH_MAX rows) a step's work grows with
    n x width^2, so from 1,500 rows the nets narrow to 256-256-128 to keep a fit on 3,000 rows
    under a minute on 2 CPU cores; mini-batch training (larger sets) goes back to 512-512-256,
    and the paper's 1024-1024-512 from 50,000 rows on."""
    return widths_by_rows(n_train)[0]


def widths_by_rows(n_train: int) -> tuple[tuple[int, ...], str]:
    """(widths, the band of training rows that chose them) of :func:`hidden_widths`."""
    for below, widths in WIDTHS_BY_ROWS:
        if n_train < below:
            return widths, f"fewer than {below} rows"
    return LARGE_WIDTHS, f"{WIDTHS_BY_ROWS[-1][0]} rows or more"


def epoch_steps(n_train: int, batch_rows: int) -> int:
    """Gradient steps of an epoch the data decides: one pass over ``n_train`` rows in batches of
    ``batch_rows``, at least MIN_STEPS_PER_EPOCH (so that the schedule's patience, counted in
    epochs, watches the same work on a set that is one batch)."""
    return max(math.ceil(n_train / max(batch_rows, 1)), MIN_STEPS_PER_EPOCH)


def view_net_steps_for(batch_rows: int, n_train: int) -> int:
    """train.view_net_steps from the data: the view nets train until their validation loss stalls
    where the whole training set is one batch (VIEW_NETS_UNTIL_STALL), throughout otherwise (0)."""
    return VIEW_NETS_UNTIL_STALL if batch_rows >= n_train else 0


def resolve_epoch_settings(train: TrainConfig, n_train: int, batch_rows: int) -> TrainConfig:
    """``train`` with train.steps_per_epoch and train.view_net_steps left to the data (-1)
    resolved for ``n_train`` rows in batches of ``batch_rows``, by the rules :func:`resolve_defaults`
    applies (what the training loop does when it is given them unresolved)."""
    if train.steps_per_epoch == AUTO_STEPS_PER_EPOCH:
        train = dataclasses.replace(train, steps_per_epoch=epoch_steps(n_train, batch_rows))
    if train.view_net_steps == AUTO_VIEW_NET_STEPS:
        train = dataclasses.replace(train, view_net_steps=view_net_steps_for(batch_rows, n_train))
    return train


def budget_epochs(steps_per_epoch: int) -> int:
    """Epochs of ``steps_per_epoch`` steps that spend STEP_BUDGET gradient steps (an epoch is never cut short)."""
    return max(1, math.ceil(STEP_BUDGET / max(steps_per_epoch, 1)))


def resolve_defaults(config: ExperimentConfig, shape: DataShape) -> tuple[ExperimentConfig, dict[str, Any]]:
    """``config`` with every unresolved field filled from ``shape``, and {field: {value, why}}.

    Explicit values stay as they are, with one exception: where views are missing for some
    training samples, ``train.batch_size`` (the batch for complete data) may grow
    (:func:`batch_for_missing_views`, up to ``train.missing_view_batch_growth`` times). Complete
    data with nothing unresolved comes back unchanged with an empty record (``model.output_rows``
    auto becomes raw there without a record: the embedding as trained).
    """
    graph, train = config.graph, config.train
    chosen: dict[str, Any] = {}

    def choose(key: str, value: Any, why: str, rule: str = "") -> Any:
        chosen[key] = {"value": list(value) if isinstance(value, tuple) else value, "why": why}
        if rule:
            chosen[key]["rule"] = rule
        return value

    if train.batch_size == 0:
        train = dataclasses.replace(
            train,
            batch_size=choose(
                "train.batch_size",
                full_batch_size(shape.n_train),
                f"the whole training set ({shape.n_train} rows) up to {FULL_BATCH_MAX} rows per step",
                "whole set" if shape.n_train <= FULL_BATCH_MAX else "largest batch",
            ),
        )
    m = min(train.batch_size, shape.n_train)
    pass_rows = m  # the batch an epoch's pass is counted in (before any growth for missing views)
    if config.data.graph_inputs == AUTO:
        config = dataclasses.replace(
            config,
            data=dataclasses.replace(
                config.data, graph_inputs=choose("data.graph_inputs", *graph_inputs_rule(shape, m >= shape.n_train))
            ),
        )
    graph_views = shape.views
    if config.data.graph_inputs == "unreduced" and shape.unreduced_views is not None:
        graph_views = shape.unreduced_views
    batch_graph = None  # the batch's mean graph at the chosen l, where the choice of l built it
    split_in_doubt = False  # the chosen l is below the dense candidate, its k-way split in doubt
    if graph.n_neighbors == 0:
        if graph_views is None:
            raise ValueError("graph.n_neighbors=0 (from the data) needs the training views in DataShape")
        neighbors = neighbor_choice(
            graph_views, shape.n_clusters, m, seed=shape.seed, distinct=graph.distinct_neighbors
        )
        batch_graph = neighbors.graph
        split_in_doubt = sparse_split_in_doubt(neighbors.l, neighbors.scores)
        graph = dataclasses.replace(
            graph,
            n_neighbors=choose(
                "graph.n_neighbors",
                neighbors.l,
                f"{neighbors.explain()}; a {m}-row batch, k = {shape.n_clusters}",
                neighbors.rule,
            ),
        )
    model = config.model
    if model.n_components == AUTO_COMPONENTS:
        if graph_views is None:
            raise ValueError("model.n_components=-1 (from the data) needs the training views in DataShape")
        components = (
            batch_component_count(
                graph_views, shape.n_clusters, m, graph.n_neighbors, seed=shape.seed, distinct=graph.distinct_neighbors
            )
            if batch_graph is None
            else component_count(batch_graph, shape.n_clusters, seed=shape.seed, split_in_doubt=split_in_doubt)
        )
        model = dataclasses.replace(
            model,
            n_components=choose(
                "model.n_components", components.c, components.explain(shape.n_clusters), components.rule
            ),
        )
    if graph.degree_normalization == AUTO:
        graph = dataclasses.replace(
            graph,
            degree_normalization=choose("graph.degree_normalization", *degree_normalization_rule(shape.n_clusters)),
        )
    if shape.views is not None and train.missing_view_batch_growth > 1:
        grown, reference, gaps = batch_for_missing_views(
            shape.unreduced_views if config.data.graph_inputs == "unreduced" and shape.unreduced_views else shape.views,
            shape.n_clusters,
            m,
            graph.n_neighbors,
            train.missing_view_batch_growth,
            seed=shape.seed,
            distinct=graph.distinct_neighbors,
        )
        if gaps:
            configured, m = m, grown  # grown: at most the sampled rows, so at most n_train
            if m > configured and train.epochs and train.steps_per_epoch == 0:
                train = dataclasses.replace(
                    train,
                    steps_per_epoch=choose(
                        "train.steps_per_epoch",
                        math.ceil(shape.n_train / configured),
                        f"the batch grew from {configured} rows: an epoch keeps the gradient steps of one pass "
                        f"at {configured} rows, so the run takes as many steps as on complete data",
                        "batch grew",
                    ),
                )
            shown = ", ".join(f"{size}: {gap:.3g}" for size, gap in gaps.items())
            train = dataclasses.replace(
                train,
                batch_size=choose(
                    "train.batch_size",
                    m,
                    f"views are missing: the batch doubles from {train.batch_size} (up to "
                    f"{train.missing_view_batch_growth}x, {GROWN_BATCH_MAX} rows) until its graph splits into "
                    f"{shape.n_clusters} groups as cleanly as {configured} complete samples "
                    f"(eigengap {reference:.3g}); eigengap by batch size: {shown}",
                    "views missing",
                ),
            )
    if train.steps_per_epoch == AUTO_STEPS_PER_EPOCH:
        passes = math.ceil(shape.n_train / max(pass_rows, 1))
        grew = (
            f" (the batch grew to {m} rows for missing views; an epoch keeps a pass at {pass_rows})"
            if m > pass_rows
            else ""
        )
        train = dataclasses.replace(
            train,
            steps_per_epoch=choose(
                "train.steps_per_epoch",
                epoch_steps(shape.n_train, pass_rows),
                f"one pass over the training rows is {passes} step{'s' if passes != 1 else ''}, at least "
                f"{MIN_STEPS_PER_EPOCH} steps{grew}; the same whether train.epochs is set or resolved",
                "one pass" if passes > MIN_STEPS_PER_EPOCH else "fewest steps",
            ),
        )
    if train.epochs == 0:
        per_epoch = train.steps_per_epoch or math.ceil(shape.n_train / max(m, 1))
        train = dataclasses.replace(
            train,
            epochs=choose(
                "train.epochs",
                budget_epochs(per_epoch),
                f"a budget of {STEP_BUDGET} gradient steps in epochs of {per_epoch} steps",
                "step budget",
            ),
        )
    if train.view_net_steps == AUTO_VIEW_NET_STEPS:
        whole = m >= shape.n_train
        train = dataclasses.replace(
            train,
            view_net_steps=choose(
                "train.view_net_steps",
                view_net_steps_for(m, shape.n_train),
                "the whole training set is one batch: the view nets train until their validation loss has not "
                "improved for train.view_net_patience epochs, then only the weighting net and R^-1 train, on the "
                "frozen nets' outputs"
                if whole
                else "mini-batches: the view nets train throughout",
                "whole set" if whole else "mini-batches",
            ),
        )
    if model.view_hidden == AUTO_WIDTHS:
        widths, band = widths_by_rows(shape.n_train)
        model = dataclasses.replace(
            model,
            view_hidden=choose(
                "model.view_hidden",
                widths,
                f"{shape.n_train} training rows; 512-512-256 below 1500, 256-256-128 while the whole set is one "
                f"batch (a step grows with n x width^2), 512-512-256 with mini-batches, 1024-1024-512 from 50000",
                band,
            ),
        )
    if model.output_rows == AUTO:
        rows = auto_output_rows(bool(shape.views_missing))
        if shape.views_missing:
            choose(
                "model.output_rows",
                rows,
                "views are missing: a sample's row norm depends on which views it has, not only on its "
                "cluster, so the embedding's rows are scaled to unit norm",
                "views missing",
            )
        model = dataclasses.replace(model, output_rows=rows)  # complete data: raw, as trained (not recorded)
    siamese = config.siamese
    if siamese.positives == AUTO:
        siamese = _resolve_siamese_positives(siamese, shape, graph.n_neighbors, m, choose)
    resolved = dataclasses.replace(config, model=model, graph=graph, train=train, siamese=siamese)
    return resolved, chosen


def _resolve_siamese_positives(
    siamese: SiameseConfig, shape: DataShape, l: int, batch_rows: int, choose: Any
) -> SiameseConfig:
    """``siamese.positives`` auto (opt-in; the default is own): joint where views are missing and
    the samples that have every view split into k groups clearly more cleanly under all views
    together than under the mean of the views' own graphs (:func:`joint_split_scores`,
    :func:`joint_is_clearly_cleaner`); the Siamese nets are then enabled. Own otherwise; complete
    data: own, unrecorded (the paper's). Not the default: on BDGP it lifts p 0.5 from 0.916 to
    0.930 over 5 seeds, but k-means merged two classes at p 0.1 (BUILD_NOTES)."""
    if not shape.views_missing or shape.views is None:
        return dataclasses.replace(siamese, positives="own")
    joint, own = joint_split_scores(shape.views, shape.n_clusters, batch_rows, l, seed=shape.seed)
    scores = f"eigengap of the samples with every view: joint graph {joint:.3g}, mean of the views' graphs {own:.3g}"
    if not joint_is_clearly_cleaner(joint, own):
        choose(
            "siamese.positives",
            "own",
            f"views are missing, but all views together do not split the samples clearly more cleanly than each "
            f"view's own neighbours ({scores}; joint needs >= {CLEAR_EIGENGAP} and {GAP_GAIN:g}x the gap)",
        )
        return dataclasses.replace(siamese, positives="own")
    choose(
        "siamese.positives",
        "joint",
        f"views are missing and all views together split the samples clearly more cleanly ({scores}): each view's "
        "Siamese net learns the joint neighbours, so a sample seen through one view gets the neighbours its other "
        "views would have given it",
    )
    if not siamese.enabled:
        choose("siamese.enabled", True, "views are missing: the joint positives need the Siamese nets")
    return dataclasses.replace(siamese, positives="joint", enabled=True)


def describe_preprocessing(kinds: Sequence[str], requested: str, reasons: Sequence[str] = ()) -> dict[str, Any]:
    """The record entry for ``data.preprocess``: the kind each view was given and, per view, the
    branch of :func:`~specrage_jax.data.preprocess.auto_view_kind` that gave it (``reasons``)."""
    if requested != "auto":
        return {}
    why = "; ".join(f"view {v}: {reason}" for v, reason in enumerate(reasons) if reason) or (
        "per view: where fewer than data.sparse_below of the entries are nonzero, svd_l2 if wider "
        "than data.svd_components, else idf_l2; standard_l2 for dense views"
    )
    return {"data.preprocess": {"value": list(kinds), "why": why, "rule": "per view"}}


def format_choices(chosen: dict[str, Any]) -> list[str]:
    """One line per resolved setting, for logs and the CLI: the value, then the branch that fired
    (where the rule has branches) and why."""
    return [
        f"{key} = {entry['value']}  ({entry['rule'] + ': ' if entry.get('rule') else ''}{entry['why']})"
        for key, entry in chosen.items()
    ]
