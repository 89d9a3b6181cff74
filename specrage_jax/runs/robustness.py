"""Robustness experiments (the paper's Sec. 5.3 / 5.4): ACC degradation under contamination.

Protocol (shared by ``experiments/robustness_curves.py`` and ``experiments/fusion_comparison.py``):

1. Load the dataset (optionally a seeded stratified subset of ``max_samples`` rows).
2. Contaminate the *whole* dataset before the split (the paper contaminates the data set and
   clusters it): ``outliers`` = ADBench global anomalies (alpha 1.1) in ``outlier_view`` for a
   fraction of the samples; ``noise`` = N(0, (1.2 std_j)^2) in one random view per chosen sample
   (:mod:`specrage_jax.data.contamination`). Training, validation and test rows are contaminated alike;
   the contamination seed is the run's seed, so every method sees the same contaminated data.
3. The usual pipeline on the contaminated data with the *same* seed as the clean run (same split,
   same initialization, same batches), so the clean/contaminated difference is the contamination:
   stratified split, scaling fitted on train, the preset's pre-training, training, k-means ACC on
   the test split.
4. Relative degradation per seed: 100 (ACC_clean - ACC_contaminated) / ACC_clean, then the mean
   and std over seeds.

Every run is recorded with a signature of everything that changes its result (protocol, the
method's full configuration), so a result file can resume itself or reuse runs of another.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from specrage_jax.config import ExperimentConfig
from specrage_jax.data import MultiViewData, split_indices
from specrage_jax.data.contamination import inject_noise, inject_outliers
from specrage_jax.evaluation.alignment import AlignmentConfig, train_alignment
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.overrides import apply_overrides, config_to_dict
from specrage_jax.runs.evaluate import evaluate_state, split_clusters
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.prepare import (
    PreparedSplits,
    SplitCodes,
    prepare_splits,
    pretrain,
    resolve_run_defaults,
    with_n_components,
)

KINDS = ("outliers", "noise")
CLEAN = "clean"


@dataclass(frozen=True)
class ContaminationSpec:
    """How contamination is injected (the paper's values by default). ``outlier_view`` None: the
    outliers go into every view, each view's samples drawn independently (the paper's blobs figure)."""

    outlier_view: int | None = 0
    alpha: float = 1.1
    sigma: float = 1.2


@dataclass(frozen=True)
class Method:
    """One curve: SpecRaGE with config ``overrides`` (applied after the base configuration), or
    the alignment baseline (``alignment=True``; trained on the same preprocessed splits)."""

    name: str
    overrides: tuple[str, ...] = ()
    alignment: bool = False


def learnable_weight_overrides(dataset: str) -> tuple[str, ...]:
    """Overrides for per-sample learnable view weights without collapse: alpha only in the
    fusion (``graph.weights_in_affinity=false``) at the paper's temperature (BDGP T 250; blobs
    and Handwritten T 90). Chosen earlier on validation ACC, not on test (BUILD_NOTES.md, "Robustness
    and view weighting")."""
    temperature = {"bdgp": 250.0}.get(dataset.split(":")[0], 90.0)
    return (f"model.temperature={temperature:g}", "graph.weights_in_affinity=false")


def paper_loss_overrides(dataset: str) -> tuple[str, ...]:
    """The paper's method as published: the weighting fusion under Eq. 4 (alpha_i alpha_j inside
    every view's affinity) at the temperature of :func:`learnable_weight_overrides`. A down-weighted
    view also loses its edges, which is what makes it robust; robustness_curves' "specrage". With
    the old raw-row BDGP preset the weights collapsed onto the text view; with the unit-norm rows of
    the current preset they do not (clean test ACC 0.976 vs 0.988 with alpha outside, seed 0)."""
    return (learnable_weight_overrides(dataset)[0], "graph.weights_in_affinity=true")


def subsample(data: MultiViewData, max_samples: int, *, seed: int) -> MultiViewData:
    """A seeded, stratified subset of at most ``max_samples`` rows (0 or >= n: all rows)."""
    if max_samples <= 0 or max_samples >= data.n_samples:
        return data
    from sklearn.model_selection import train_test_split

    keep, _ = train_test_split(
        np.arange(data.n_samples), train_size=max_samples, stratify=data.labels, random_state=seed
    )
    return data.subset(np.sort(keep))


def contaminate(
    data: MultiViewData, kind: str, fraction: float, *, seed: int, spec: ContaminationSpec
) -> tuple[MultiViewData, np.ndarray]:
    """The dataset with ``fraction`` of its samples contaminated, and the (n, V) bool mask.

    kind: "outliers" | "noise" | "clean" (fraction ignored: the data unchanged, an all-False mask).
    """
    if kind == CLEAN:
        return data, np.zeros((data.n_samples, data.n_views), bool)
    if kind == "outliers":
        out = inject_outliers(data.views, fraction, seed=seed, view=spec.outlier_view, alpha=spec.alpha)
    elif kind == "noise":
        out = inject_noise(data.views, fraction, seed=seed, sigma=spec.sigma)
    else:
        raise ValueError(f"unknown contamination kind {kind!r}; expected one of {', '.join((CLEAN, *KINDS))}")
    return dataclasses.replace(data, views=out.views), out.mask


def relative_degradation(clean_acc: float, acc: float) -> float:
    """100 (clean_acc - acc) / clean_acc, in percent (negative: contamination helped)."""
    if not clean_acc > 0:
        raise ValueError(f"relative degradation needs a clean ACC > 0, got {clean_acc}")
    return 100.0 * (clean_acc - acc) / clean_acc


def alignment_config(config: ExperimentConfig, n_train: int) -> AlignmentConfig:
    """The alignment baseline with SpecRaGE's view-net widths, k, l, learning rate and batch
    size, and as many epochs as give it SpecRaGE's budget of gradient steps (train.epochs x
    steps per epoch)."""
    batch = min(config.train.batch_size, n_train)
    steps_per_epoch = math.ceil(n_train / batch)
    specrage_steps = config.train.epochs * (config.train.steps_per_epoch or steps_per_epoch)
    return AlignmentConfig(
        hidden=config.model.view_hidden,
        n_components=config.model.n_components,
        n_neighbors=min(config.graph.n_neighbors, batch - 1),
        learning_rate=config.train.learning_rate,
        batch_size=batch,
        epochs=max(1, math.ceil(specrage_steps / steps_per_epoch)),
    )


def method_config(base: ExperimentConfig, method: Method, n_classes: int) -> ExperimentConfig:
    """The base configuration with the method's overrides and k filled in."""
    return with_n_components(apply_overrides(base, list(method.overrides)), n_classes)


def pretrain_key(config: ExperimentConfig) -> str:
    """What the pre-training stages depend on: runs with equal keys share one pre-training."""
    values = config_to_dict(config)
    return json.dumps({s: values[s] for s in ("data", "siamese", "autoencoder")}, sort_keys=True, default=str)


# Configuration fields added after runs were recorded, in the order they were added, each with the
# value under which the code computes what it computed before the field existed. A run recorded
# before a field existed carries the signature of a configuration without it; such a run is the
# same run as one whose configuration holds that value, and only then.
LATER_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("train", "spectral_init", False),
    ("train", "view_net_steps", 0),
    ("graph", "view_alignment", 0.0),
)


def signature_values(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as a signature sees it: without the fields that only say how a run
    executes (progress bars, where the data lives), not what it computes."""
    values = config_to_dict(config)
    for execution_only in ("progress", "data_on_device"):
        values["train"].pop(execution_only, None)
    return values


def hash_signature(protocol: dict[str, Any], method: Method, values: dict[str, Any]) -> str:
    """A short hash of the protocol, the method's kind and the configuration ``values``."""
    payload = {"protocol": protocol, "alignment": method.alignment, "config": values}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_signature(protocol: dict[str, Any], config: ExperimentConfig, method: Method) -> str:
    """A short hash of everything that changes a run's result apart from (kind, fraction, seed)."""
    return hash_signature(protocol, method, signature_values(config))


def earlier_signatures(protocol: dict[str, Any], config: ExperimentConfig, method: Method) -> list[str]:
    """The signatures this run was recorded under before the fields of LATER_FIELDS existed: for
    each field, the configuration without it and every field added after it, where all of those
    hold their earlier behaviour's value (none where one does not)."""
    values = signature_values(config)
    earlier = []
    for start in range(len(LATER_FIELDS)):
        dropped = LATER_FIELDS[start:]
        if all(values[section].get(name) == value for section, name, value in dropped):
            trimmed = {section: dict(fields) for section, fields in values.items()}
            for section, name, _ in dropped:
                trimmed[section].pop(name, None)
            earlier.append(hash_signature(protocol, method, trimmed))
    return earlier


def mean_weights(alpha: np.ndarray, rows: np.ndarray) -> list[float] | None:
    """Mean view weights (V,) over the rows of alpha (n, V) selected by rows (n,) bool; None if none."""
    return [float(w) for w in alpha[rows].mean(axis=0)] if rows.any() else None


def evaluate_specrage(
    splits: PreparedSplits, codes: SplitCodes | None, config: ExperimentConfig, *, seed: int, test_mask: np.ndarray
) -> dict[str, Any]:
    """Trains SpecRaGE on the splits; test k-means metrics and the mean view weights of the
    contaminated / clean test rows (test_mask (n_test, V) bool)."""
    state, history = train_on_splits(splits, config, seed=seed, codes=codes)
    evaluation = evaluate_state(state, splits, config, seed=seed)
    metrics, alpha = evaluation.metrics, evaluation.alpha_test
    hit = cast(np.ndarray, test_mask.any(axis=1))  # (n_test,): test_mask is 2-D
    return {
        **metrics["kmeans"],
        "steps": history.steps,
        "mean_view_weights": metrics["mean_view_weights"],
        "weights_contaminated_rows": mean_weights(alpha, hit),
        "weights_clean_rows": mean_weights(alpha, ~hit),
    }


def evaluate_alignment(splits: PreparedSplits, config: ExperimentConfig, *, seed: int) -> dict[str, Any]:
    """Trains the alignment baseline on the training split; k-means metrics of its concatenated
    test embedding."""
    model = train_alignment(splits.train, alignment_config(config, len(splits.train_labels)), seed=seed)
    embedding = model.transform(splits.test)
    metrics = kmeans_metrics(
        embedding, splits.test_labels, n_clusters=split_clusters(splits), seed=seed, n_init=config.eval.kmeans_n_init
    )
    return {**metrics, "epochs": model.config.epochs}


@dataclass(frozen=True)
class LevelRun:
    """One (kind, fraction, seed) cell for the methods that still need it."""

    kind: str
    fraction: float
    seed: int
    methods: tuple[Method, ...]


def run_level(
    data: MultiViewData,
    level: LevelRun,
    base: ExperimentConfig,
    *,
    spec: ContaminationSpec,
    on_result: Callable[[Method, dict[str, Any]], None],
) -> None:
    """Contaminates, splits, pre-trains once per pre-training key, trains every method and
    hands each result to ``on_result`` as soon as it exists."""
    dirty, mask = contaminate(data, level.kind, level.fraction, seed=level.seed, spec=spec)
    test_rows = split_indices(
        data.labels, seed=level.seed, test_fraction=base.data.test_fraction, val_fraction=base.data.val_fraction
    ).test
    splits = prepare_splits(dirty, base, seed=level.seed)
    pretrained: dict[str, tuple[PreparedSplits, SplitCodes | None, float]] = {}
    for method in level.methods:
        config = method_config(base, method, data.n_classes)
        config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=level.seed)  # e.g. data-rule widths
        start = time.perf_counter()
        if method.alignment:
            result = evaluate_alignment(splits, config, seed=level.seed)
        else:
            key = pretrain_key(config)
            if key not in pretrained:
                stage_start = time.perf_counter()
                done_splits, codes, _ = pretrain(splits, config, seed=level.seed)
                pretrained[key] = (done_splits, codes, time.perf_counter() - stage_start)
            done_splits, codes, pretrain_seconds = pretrained[key]
            result = evaluate_specrage(done_splits, codes, config, seed=level.seed, test_mask=mask[test_rows])
            result["pretrain_seconds"] = pretrain_seconds
        result["seconds"] = time.perf_counter() - start
        on_result(method, result)


def summarize_curves(
    runs: Sequence[dict[str, Any]], methods: Iterable[str], kinds: Sequence[str], fractions: Sequence[float]
) -> dict[str, Any]:
    """{kind: {method: {"fractions", "acc_mean", "degradation_mean", "degradation_std", "n_seeds",
    "clean_acc_mean"}}} from run records ({"method", "kind", "fraction", "seed", "acc"}). A level
    lacking a run (or its seed's clean run) is NaN, written as null."""
    clean = {(r["method"], r["seed"]): r["acc"] for r in runs if r["kind"] == CLEAN}
    curves: dict[str, Any] = {}
    for kind in kinds:
        curves[kind] = {}
        for name in methods:
            rows: dict[str, Any] = {
                "fractions": list(fractions),
                "acc_mean": [],
                "degradation_mean": [],
                "degradation_std": [],
                "n_seeds": [],
            }
            for fraction in fractions:
                cell = [
                    r
                    for r in runs
                    if r["method"] == name
                    and r["kind"] == kind
                    and math.isclose(r["fraction"], fraction)
                    and (name, r["seed"]) in clean
                ]
                drops = [relative_degradation(clean[(name, r["seed"])], r["acc"]) for r in cell]
                rows["acc_mean"].append(_mean([r["acc"] for r in cell]))
                rows["degradation_mean"].append(_mean(drops))
                rows["degradation_std"].append(float(np.std(drops)) if drops else None)
                rows["n_seeds"].append(len(drops))
            rows["clean_acc_mean"] = _mean([acc for (m, _), acc in clean.items() if m == name])
            curves[kind][name] = rows
    return curves


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def pending_levels(
    methods: Sequence[Method],
    signatures: dict[str, str],
    done: set[tuple[str, str, float, int]],
    kinds: Sequence[str],
    fractions: Sequence[float],
    seeds: Sequence[int],
) -> list[LevelRun]:
    """The cells still to run: the clean ones first, then the largest fraction first (both kinds,
    every seed), so a job cut short has the most telling levels; ``done`` holds (signature,
    kind, fraction, seed) of the runs already recorded."""
    cells = [(CLEAN, 0.0, seed) for seed in seeds]
    cells += [(kind, float(f), seed) for f in sorted(fractions, reverse=True) for seed in seeds for kind in kinds]
    levels = []
    for kind, fraction, seed in cells:
        todo = tuple(m for m in methods if (signatures[m.name], kind, fraction, seed) not in done)
        if todo:
            levels.append(LevelRun(kind=kind, fraction=fraction, seed=seed, methods=todo))
    return levels


@dataclass(frozen=True)
class CurveSpec:
    """Which cells a curve file holds: contamination kinds and fractions, seeds (the mean over
    them is reported), a stratified subset of ``max_samples`` rows (0: all), the injection."""

    kinds: tuple[str, ...] = KINDS
    fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    seeds: tuple[int, ...] = (0,)
    max_samples: int = 0
    contamination: ContaminationSpec = ContaminationSpec()

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"contamination kinds must be among {', '.join(KINDS)}; got {self.kinds}")
        if not self.fractions or any(not 0.0 < f <= 1.0 for f in self.fractions):
            raise ValueError(f"contamination fractions must lie in (0, 1]; got {self.fractions}")
        if not self.seeds:
            raise ValueError("at least one seed is needed")


def protocol_record(dataset: str, spec: CurveSpec) -> dict[str, Any]:
    """The part of the protocol that changes a run's result besides its configuration."""
    return {
        "dataset": dataset,
        "max_samples": spec.max_samples,
        "contamination": dataclasses.asdict(spec.contamination),
    }


def method_signature_sets(
    dataset: str, spec: CurveSpec, base: ExperimentConfig, methods: Sequence[Method], n_classes: int
) -> tuple[dict[str, str], dict[str, list[str]]]:
    """({method name: run signature}, {method name: the signatures its runs had before later
    fields existed} (:func:`earlier_signatures`)); ValueError for two methods with one name."""
    names = [m.name for m in methods]
    if len(set(names)) != len(names):
        raise ValueError(f"method names must be distinct, got {names}")
    protocol = protocol_record(dataset, spec)
    configs = {m.name: method_config(base, m, n_classes) for m in methods}
    return (
        {m.name: run_signature(protocol, configs[m.name], m) for m in methods},
        {m.name: earlier_signatures(protocol, configs[m.name], m) for m in methods},
    )


def adopt_runs(
    known: Iterable[dict[str, Any]], signatures: dict[str, str], earlier: dict[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """The recorded runs whose signature belongs to one of our methods, renamed to that method
    (a run of "weighting" in one file is the "specrage" run of another), one per cell. A run
    recorded under one of a method's ``earlier`` signatures is adopted under its current one."""
    current = {sig: (name, sig) for name, sig in reversed(list(signatures.items()))}
    for name, olds in (earlier or {}).items():
        current.update({old: (name, signatures[name]) for old in olds if old not in current})
    adopted: dict[tuple[str, str, float, int], dict[str, Any]] = {}
    for run in known:
        recorded = run.get("signature")
        if recorded in current:
            name, sig = current[recorded]
            renamed = {**run, "method": name, "signature": sig}
            if recorded != sig:
                renamed["recorded_signature"] = recorded
            adopted.setdefault((sig, run["kind"], float(run["fraction"]), int(run["seed"])), renamed)
    return list(adopted.values())


def run_curves(
    dataset: str,
    load: Callable[[int], MultiViewData],
    methods: Sequence[Method],
    base: ExperimentConfig,
    spec: CurveSpec,
    *,
    known_runs: Iterable[dict[str, Any]] = (),
    on_update: Callable[[list[dict[str, Any]], dict[str, Any]], object] = lambda runs, curves: None,
    log: Callable[[str], None] = print,
    run_missing: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Runs every missing (method, kind, fraction, seed) cell plus the clean runs, reusing
    ``known_runs`` with matching signatures; calls ``on_update(runs, curves)`` after every run
    (so a long job can write partial results). ``load(seed)`` gives the full dataset of a seed.
    ``run_missing=False`` only summarizes the adopted runs (missing cells stay null).

    Returns (run records, curves as :func:`summarize_curves`)."""
    first = subsample(load(spec.seeds[0]), spec.max_samples, seed=spec.seeds[0])
    signatures, earlier = method_signature_sets(dataset, spec, base, methods, first.n_classes)
    runs = adopt_runs(known_runs, signatures, earlier)
    names = [m.name for m in methods]
    summarize = lambda: summarize_curves(runs, names, spec.kinds, spec.fractions)  # noqa: E731
    done = {(r["signature"], r["kind"], float(r["fraction"]), int(r["seed"])) for r in runs}
    data_seed, data = spec.seeds[0], first
    todo = pending_levels(methods, signatures, done, spec.kinds, spec.fractions, spec.seeds) if run_missing else []
    for level in todo:
        if level.seed != data_seed:
            data_seed, data = level.seed, subsample(load(level.seed), spec.max_samples, seed=level.seed)

        def record(method: Method, result: dict[str, Any], level: LevelRun = level) -> None:
            runs.append(
                {
                    "method": method.name,
                    "signature": signatures[method.name],
                    "kind": level.kind,
                    "fraction": level.fraction,
                    "seed": level.seed,
                    **result,
                }
            )
            log(
                f"{dataset} {method.name} {level.kind} {level.fraction:.0%} seed {level.seed}: "
                f"ACC {result['acc']:.4f} ({result['seconds']:.0f} s)"
            )
            on_update(runs, summarize())

        run_level(data, level, base, spec=spec.contamination, on_result=record)
    return runs, summarize()


# --- the experiment scripts' shared command line and result file --------------------------------
