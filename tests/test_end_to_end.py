"""End-to-end checks of the method on the two no-download datasets, and of the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from specrage_jax.cli import main
from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.nets.embed import embed
from specrage_jax.ops.diagnostics import grassmann_distance_sq
from specrage_jax.ops.spectral import mean_laplacian_eigenvectors
from specrage_jax.presets import preset
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.prepare import prepare_splits, with_n_components


def _train(dataset: str, **train_changes):
    data = load_dataset(dataset, seed=0)
    config = with_n_components(preset(dataset), data.n_classes)
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=False, **train_changes))
    splits = prepare_splits(data, config, seed=0)
    state, history = train_on_splits(splits, config, seed=0)
    return config, splits, state, history


@pytest.mark.slow  # ~25 s; the digits comparison with the exact spectral embedding runs by default
def test_blobs_recovers_clusters_and_the_joint_eigenspace():
    config, splits, state, _ = _train("blobs", epochs=20)
    k = config.model.n_components
    y, _ = embed(state, splits.test)
    acc = kmeans_metrics(y, splits.test_labels, n_clusters=k, seed=0)["acc"]
    _, eigvecs = mean_laplacian_eigenvectors(splits.test, k, config.graph)
    distance = grassmann_distance_sq(y, eigvecs)
    assert acc >= 0.99
    assert distance <= 0.1 * k, f"squared Grassmann distance {distance:.3f} to the bottom-{k} eigenvectors of L-bar"


@pytest.mark.slow  # an exact SE of digits and a fit: ~40 s; the default suite is at its time budget
def test_digits_matches_the_exact_spectral_embedding():
    config, splits, state, _ = _train("digits")
    k = config.model.n_components
    y, _ = embed(state, splits.test)
    ours = kmeans_metrics(y, splits.test_labels, n_clusters=k, seed=0)["acc"]
    _, eigvecs = mean_laplacian_eigenvectors(splits.test, k, config.graph)
    exact = kmeans_metrics(eigvecs, splits.test_labels, n_clusters=k, seed=0)["acc"]
    assert ours >= exact - 0.02, f"SpecRaGE test ACC {ours:.3f} vs exact spectral embedding {exact:.3f}"


@pytest.mark.slow  # a blobs run and its figure: 140 s at load 7; the docs pages run specrage train by default
def test_cli_train_writes_metrics_and_figure(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--dataset",
            "blobs",
            "--seed",
            "3",
            "--epochs",
            "4",
            "--out",
            str(out),
            "--quiet",
            "--set",
            "model.view_hidden=128,128",
            "--set",
            "graph.n_neighbors=20",
        ]
    )
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["dataset"] == "blobs" and metrics["seed"] == 3
    for group, names in {"kmeans": ("acc", "nmi", "ari"), "svm": ("acc", "f1", "precision")}.items():
        for name in names:
            assert 0.0 <= metrics["test"][group][name] <= 1.0
    assert metrics["test"]["kmeans"]["acc"] >= 0.9
    assert metrics["test"]["svm"]["acc"] >= 0.9
    assert metrics["timing"]["train_seconds"] > 0
    assert metrics["config"]["model"]["view_hidden"] == [128, 128]
    assert metrics["config"]["graph"]["n_neighbors"] == 20
    assert len(metrics["training"]["epochs"]) <= 4
    png = (out / "embedding.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    printed = capsys.readouterr().out
    assert "k-means ACC" in printed and "SVM macro F1" in printed


def test_cli_rejects_unknown_config_field(capsys):
    assert main(["train", "--dataset", "blobs", "--set", "model.no_such_field=1"]) == 2
    assert "no_such_field" in capsys.readouterr().err


def test_dataset_smaller_than_batch_trains():
    """The published code makes zero steps when n < batch size; here m shrinks to n."""
    data = load_dataset("blobs", seed=0).subset(np.arange(300))
    config = with_n_components(preset("blobs"), data.n_classes)
    config = dataclasses.replace(
        config,
        model=dataclasses.replace(config.model, view_hidden=(64, 64)),
        train=dataclasses.replace(config.train, epochs=5, batch_size=1024, progress=False),
    )
    splits = prepare_splits(data, config, seed=0)
    state, history = train_on_splits(splits, config, seed=0)
    assert history.batch_size == len(splits.train_labels) < 1024
    assert history.steps == 5
    assert int(state.step) == 5
    assert all(np.isfinite(r.train_loss) for r in history.epochs)


def test_cli_version(capsys):
    import specrage_jax

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"specrage {specrage_jax.__version__}"
