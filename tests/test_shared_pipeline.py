"""The estimator and the CLI's runs fit through the same pipeline (specrage_jax.api.fit_pipeline): on
the same training and validation rows, with the same seed and settings, they give bitwise the
same model and embedding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specrage_jax import SpecRaGE
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import MultiViewData, split_indices
from specrage_jax.runs.experiment import train_and_evaluate


def _blobs(n: int = 150, k: int = 3, seed: int = 0) -> MultiViewData:
    """Two views of k Gaussian blobs (widths 5 and 3), n rows."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = [rng.normal(0.0, 4.0, (k, d)) for d in (5, 3)]
    views = tuple((c[labels] + rng.normal(0.0, 1.0, (n, c.shape[1]))).astype(np.float32) for c in centres)
    return MultiViewData(views=views, labels=labels, name="two-view blobs", view_names=("a", "b"))


def _config() -> ExperimentConfig:
    """The data-aware defaults (settings resolved from the rows), small nets, two epochs, and the
    autoencoder stage (one epoch), so every stage of the pipeline runs."""
    base = ExperimentConfig()
    return dataclasses.replace(
        base,
        model=dataclasses.replace(base.model, view_hidden=(16, 16), weighting_hidden=(8,)),
        train=dataclasses.replace(base.train, epochs=2, progress=False),
        autoencoder=dataclasses.replace(base.autoencoder, enabled=True, epochs=1, hidden=(16,), embedding_dim=4),
    )


def test_estimator_fitted_on_a_runs_split_embeds_its_test_rows_bitwise_as_the_run():
    data, config, seed = _blobs(), _config(), 3
    run = train_and_evaluate(data, config, seed=seed)

    idx = split_indices(
        data.labels, seed=seed, test_fraction=config.data.test_fraction, val_fraction=config.data.val_fraction
    )
    assert len(idx.val) > 0 and run.result["n_samples"]["train"] == len(idx.train)
    rows = [np.concatenate([x[idx.train], x[idx.val]]) for x in data.views]
    n_train = len(idx.train)
    split = (np.arange(n_train), np.arange(n_train, n_train + len(idx.val)))
    estimator = SpecRaGE(config=config, n_clusters=data.n_classes, random_state=seed)
    estimator._fit(rows, split=split)

    assert estimator.config_ == run.config  # the same settings resolved from the same rows
    losses = [(r["train_loss"], r["val_loss"]) for r in run.result["training"]["epochs"]]
    assert [(r.train_loss, r.val_loss) for r in estimator.history_.epochs] == losses
    test = [x[idx.test] for x in data.views]
    embedding = estimator.transform(test)
    assert embedding.dtype == run.evaluation.y_test.dtype
    assert np.array_equal(embedding, run.evaluation.y_test)
    assert np.array_equal(estimator.view_weights(test), run.evaluation.alpha_test)


def test_the_cli_and_the_estimator_resolve_the_defaults_from_every_training_row(monkeypatch):
    """Above FULL_BATCH_MAX training rows too: the rules draw their batches from all of them, so
    a run and the estimator fitted on the run's rows resolve the same settings (stopped before
    training: the estimator's configuration is taken where it checks the sizes)."""
    from specrage_jax.api import fit_pipeline
    from specrage_jax.runs.prepare import prepare_splits, resolve_run_defaults
    from specrage_jax.training.defaults import FULL_BATCH_MAX

    class Resolved(Exception):
        pass

    def stop(config, *args, **kwargs):
        raise Resolved(config)

    data, seed = _blobs(n=6000), 0
    base = ExperimentConfig()
    config = dataclasses.replace(base, train=dataclasses.replace(base.train, progress=False))  # verbose=False
    splits = prepare_splits(data, config, seed=seed)
    idx = split_indices(
        data.labels, seed=seed, test_fraction=config.data.test_fraction, val_fraction=config.data.val_fraction
    )
    assert len(idx.train) > FULL_BATCH_MAX
    read: list[int] = []
    resolve = fit_pipeline.resolve_defaults
    monkeypatch.setattr(
        fit_pipeline, "resolve_defaults", lambda c, shape: read.append(len(shape.views[0])) or resolve(c, shape)
    )
    monkeypatch.setattr(fit_pipeline, "check_sizes", stop)
    run_config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    rows = [np.concatenate([x[idx.train], x[idx.val]]) for x in data.views]
    n_train = len(idx.train)
    split = (np.arange(n_train), np.arange(n_train, n_train + len(idx.val)))
    estimator = SpecRaGE(config=config, n_clusters=data.n_classes, random_state=seed)
    with pytest.raises(Resolved) as resolved:
        estimator._fit(rows, split=split)
    assert read == [n_train, n_train]  # every training row, not a sample, on both paths
    assert resolved.value.args[0] == run_config
