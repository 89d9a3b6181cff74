"""One complete run: load, split, preprocess (fitted on train), train, embed, evaluate, write.

The CLI is a thin shell around :func:`run_experiment`; notebooks and experiment scripts call
the pieces directly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from specrage_jax.config import ExperimentConfig, config_to_dict
from specrage_jax.data import MultiViewData, apply_view_scalers, fit_view_scalers, load_dataset, split_indices
from specrage_jax.embed import embed
from specrage_jax.evaluate import kmeans_metrics, svm_metrics
from specrage_jax.ops.ortho import orthogonality_error
from specrage_jax.autoencoder import train_autoencoder
from specrage_jax.pretrain import TrainedNet
from specrage_jax.siamese import train_siamese
from specrage_jax.steps import SpecRaGEState, create_state
from specrage_jax.train import History, estimate_view_scales, fit


@dataclass(frozen=True)
class PreparedSplits:
    """Preprocessed views (scalers fitted on the training split only) and labels per split."""

    train: tuple[np.ndarray, ...]
    val: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]
    train_labels: np.ndarray
    val_labels: np.ndarray
    test_labels: np.ndarray


def prepare_splits(data: MultiViewData, config: ExperimentConfig, *, seed: int) -> PreparedSplits:
    """The paper's stratified 80/20 then 90/10 split, and per-view scaling fitted on train."""
    idx = split_indices(data.labels, seed=seed, test_fraction=config.data.test_fraction,
                        val_fraction=config.data.val_fraction)
    train, val, test = data.subset(idx.train), data.subset(idx.val), data.subset(idx.test)
    scalers = fit_view_scalers(train.views, config.data.preprocess)
    return PreparedSplits(
        train=apply_view_scalers(scalers, train.views), val=apply_view_scalers(scalers, val.views),
        test=apply_view_scalers(scalers, test.views),
        train_labels=train.labels, val_labels=val.labels, test_labels=test.labels,
    )


@dataclass(frozen=True)
class SplitCodes:
    """Affinity inputs per split (Siamese codes), V arrays (n_split, c_v) each."""

    train: tuple[np.ndarray, ...]
    val: tuple[np.ndarray, ...]
    test: tuple[np.ndarray, ...]


def encode_splits(trainer: Callable[..., TrainedNet], splits: PreparedSplits, stage_config: Any,
                  config: ExperimentConfig, *, seed: int) -> SplitCodes:
    """One net per view trained on that view's training rows by ``trainer``; its codes for every split."""
    nets = [trainer(x, stage_config, seed=seed + v, progress=config.train.progress, name=f"view {v}")
            for v, x in enumerate(splits.train)]

    def encode(views: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        return tuple(net.encode(x) for net, x in zip(nets, views))

    return SplitCodes(train=encode(splits.train), val=encode(splits.val), test=encode(splits.test))


def pretrain(splits: PreparedSplits, config: ExperimentConfig, *, seed: int) -> tuple[PreparedSplits, SplitCodes | None, dict[str, float]]:
    """The optional pre-training stages, in the paper's order: autoencoder, then Siamese nets.
    Returns the (possibly autoencoded) splits, the Siamese codes (None when disabled) and timings."""
    timings: dict[str, float] = {}
    if config.autoencoder.enabled:
        start = time.perf_counter()
        embedded = encode_splits(train_autoencoder, splits, config.autoencoder, config, seed=seed)
        splits = dataclasses.replace(splits, train=embedded.train, val=embedded.val, test=embedded.test)
        timings["autoencoder_seconds"] = time.perf_counter() - start
    codes = None
    if config.siamese.enabled:
        start = time.perf_counter()
        codes = encode_splits(train_siamese, splits, config.siamese, config, seed=seed)
        timings["siamese_seconds"] = time.perf_counter() - start
    return splits, codes, timings


def with_n_components(config: ExperimentConfig, n_classes: int) -> ExperimentConfig:
    """Fills model.n_components = number of classes when it is 0 (the paper's choice of k)."""
    if config.model.n_components:
        return config
    return dataclasses.replace(config, model=dataclasses.replace(config.model, n_components=n_classes))


def train_on_splits(
    splits: PreparedSplits, config: ExperimentConfig, *, seed: int, codes: SplitCodes | None = None
) -> tuple[SpecRaGEState, History]:
    """Global Gaussian scales from the training split's affinity inputs, a fresh state, :func:`fit`."""
    view_dims = [v.shape[1] for v in splits.train]
    train_codes = None if codes is None else codes.train
    scales = None
    if config.graph.scale_mode == "global":
        scales = estimate_view_scales(train_codes or splits.train, config.graph, config.train.batch_size, seed=seed)
    state = create_state(view_dims, config.model, config.graph, config.ortho,
                         learning_rate=config.train.learning_rate, seed=seed, view_scales=scales)
    return fit(state, splits.train, splits.val, config.train, seed=seed, train_codes=train_codes,
               val_codes=None if codes is None else codes.val)


def evaluate_state(state: SpecRaGEState, splits: PreparedSplits, config: ExperimentConfig, *, seed: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Test metrics (k-means on the test embedding; SVM trained on train, scored on test),
    plus the test embedding (n_test, k) and view weights (n_test, V)."""
    batch = config.eval.embed_batch_size
    y_train, _ = embed(state, splits.train, batch_size=batch)
    y_test, alpha_test = embed(state, splits.test, batch_size=batch)
    n_clusters = int(max(splits.train_labels.max(), splits.test_labels.max()) + 1)
    metrics = {
        "kmeans": kmeans_metrics(y_test, splits.test_labels, n_clusters=n_clusters, seed=seed,
                                 n_init=config.eval.kmeans_n_init),
        "svm": svm_metrics(y_train, splits.train_labels, y_test, splits.test_labels, seed=seed),
        "orthogonality_error": float(orthogonality_error(y_test, config.ortho.convention)),
        "mean_view_weights": [float(w) for w in alpha_test.mean(axis=0)],
    }
    return metrics, y_test, alpha_test


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Writes JSON through a temporary file and a rename, so a crash never leaves a torn file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    os.replace(tmp, path)


def environment_info() -> dict[str, str]:
    return {"python": platform.python_version(), "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": str(jax.devices()), "machine": platform.machine()}


def run_experiment(
    dataset: str, config: ExperimentConfig, *, seed: int, out_dir: str | Path | None = None,
    data_dir: str | None = None, figure: bool = True,
) -> dict[str, Any]:
    """Trains and evaluates on ``dataset``; with ``out_dir`` writes metrics.json and embedding.png.

    Returns the metrics dictionary (metrics are fractions in [0, 1]).
    """
    start = time.perf_counter()
    data = load_dataset(dataset, seed=seed, data_dir=data_dir)
    config = with_n_components(config, data.n_classes)
    splits = prepare_splits(data, config, seed=seed)
    train_start = time.perf_counter()
    splits, codes, stage_seconds = pretrain(splits, config, seed=seed)
    fit_start = time.perf_counter()
    state, history = train_on_splits(splits, config, seed=seed, codes=codes)
    stage_seconds["specrage_seconds"] = time.perf_counter() - fit_start
    train_seconds = time.perf_counter() - train_start
    eval_start = time.perf_counter()
    test_metrics, y_test, alpha_test = evaluate_state(state, splits, config, seed=seed)
    result: dict[str, Any] = {
        "dataset": dataset, "seed": seed,
        "n_samples": {"train": len(splits.train_labels), "val": len(splits.val_labels), "test": len(splits.test_labels)},
        "view_dims": list(data.view_dims),
        "test": test_metrics,
        "timing": {"train_seconds": train_seconds, **stage_seconds, "eval_seconds": time.perf_counter() - eval_start,
                   "total_seconds": time.perf_counter() - start},
        "training": history.as_dict(),
        "config": config_to_dict(config),
        "environment": environment_info(),
    }
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "metrics.json", result)
        if figure:
            from specrage_jax.plots import plot_embedding

            plot_embedding(y_test, splits.test_labels, alpha_test, out / "embedding.png",
                           title=dataset, view_names=data.view_names)
    return result
