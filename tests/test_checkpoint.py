"""Checkpoints: inference models round-trip bitwise, training checkpoints resume exactly, damaged
or incompatible checkpoints give a CheckpointError naming the directory and the problem."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.api.estimator import SpecRaGE
from specrage_jax.api.pipeline import load_pipeline, save_inference_model
from specrage_jax.cli import main
from specrage_jax.config import (
    AutoencoderConfig,
    OrthoConfig,
)
from specrage_jax.data import apply_view_scalers, fit_view_scalers, load_dataset
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import create_state
from specrage_jax.overrides import config_from_dict, config_to_dict
from specrage_jax.presets import preset
from specrage_jax.training.autoencoder import train_autoencoder
from specrage_jax.training.checkpoint import TrainingCheckpointer, load_model, save_model
from specrage_jax.training.checkpoint_files import (
    RECORD_ITEM,
    CheckpointError,
    CheckpointWarning,
    write_file_manifest,
)
from specrage_jax.training.loop import train_loop
from specrage_jax.training.pretrained import PretrainedNets
from specrage_jax.training.stages import encode_views
from tests.fixed_sections import fixed_data, fixed_experiment, fixed_graph, fixed_model, fixed_train

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))
GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch")


def clustered_views(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])[labels] + rng.normal(size=(n, 2))
    return [x.astype(np.float32), (x @ np.array([[0.0, -1.0], [1.0, 0.0]])).astype(np.float32)]


_BASE_STATE = create_state([2, 2], MODEL, GRAPH, OrthoConfig(), learning_rate=1e-3, seed=0)


def small_state():
    """A fresh copy of one initial state. Copies share its static graphdef, so the jitted steps
    compile once for the whole module (separately built networks hold distinct activation
    function objects and would each compile anew)."""
    return jax.tree.map(jnp.array, _BASE_STATE)


TRAIN = fixed_train(epochs=4, batch_size=32, progress=False)


@pytest.fixture(scope="module")
def trained():
    """A small state after a few epochs (R^-1 and Adam moments far from their initial values)."""
    state, history = train_loop(small_state(), clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=0)
    return state, history


def leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(leaves(a), leaves(b)):
        np.testing.assert_array_equal(x, y)


def largest_file(directory: Path) -> Path:
    return max((p for p in directory.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def edit_record(directory: Path, change) -> None:
    """Rewrites a checkpoint's JSON record (and its file manifest, so only the edit is seen)."""
    path = directory / RECORD_ITEM / "metadata"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))
    write_file_manifest(directory)


# --- inference models ---------------------------------------------------------------------


def test_save_load_embed_is_bitwise_identical(tmp_path, trained, monkeypatch):
    state, _ = trained
    assert not np.allclose(np.asarray(state.r_inv), np.eye(3))
    extra = {
        "scaler": {"offset": np.linspace(0, 1, 5), "scale": np.arange(1, 6, dtype=np.float64)},
        "centres": np.arange(6, dtype=np.float32).reshape(3, 2),
    }
    path = save_model(tmp_path / "m", state, metadata={"note": "x", "k": 3}, extra_trees=extra, model_config=MODEL)
    assert path == (tmp_path / "m").absolute() and not list(tmp_path.glob(".*"))  # no temporary left behind
    loaded = load_model(path)
    np.testing.assert_array_equal(np.asarray(loaded.state.r_inv), np.asarray(state.r_inv))
    assert_trees_equal(loaded.state.params, state.params)
    np.testing.assert_array_equal(np.asarray(loaded.state.view_scales), np.asarray(state.view_scales))
    assert int(loaded.state.step) == int(state.step) > 0
    views = clustered_views(50, 7)
    y0, a0 = embed(state, views, batch_size=64)
    y1, a1 = embed(loaded.state, views, batch_size=64)
    np.testing.assert_array_equal(y1, y0)
    np.testing.assert_array_equal(a1, a0)
    assert loaded.metadata == {"note": "x", "k": 3}
    assert loaded.extra_trees["scaler"]["offset"].dtype == np.float64
    np.testing.assert_array_equal(loaded.extra_trees["scaler"]["scale"], extra["scaler"]["scale"])
    np.testing.assert_array_equal(loaded.extra_trees["centres"], extra["centres"])
    record = loaded.record
    assert record["view_dims"] == [2, 2] and record["model_config"]["view_hidden"] == [16]
    assert record["graph_config"]["n_neighbors"] == 5 and record["ortho_config"]["convention"] == "m_identity"
    assert record["library_version"] and record["format_version"] == 1
    monkeypatch.chdir(tmp_path)  # relative paths work too (orbax itself wants absolute ones)
    np.testing.assert_array_equal(np.asarray(load_model("m").state.r_inv), np.asarray(state.r_inv))
    with pytest.raises(FileExistsError):
        save_model(path, state, model_config=MODEL)
    save_model(path, state, include_optimizer=True, overwrite=True, model_config=MODEL)
    assert_trees_equal(load_model(path).state.opt_state, state.opt_state)


def test_load_model_names_missing_and_foreign_directories(tmp_path):
    with pytest.raises(CheckpointError, match=r"no checkpoint at .*nowhere: no such directory"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"other is not a specrage_jax checkpoint"):
        load_model(tmp_path / "other")


def test_incompatible_checkpoints_are_refused(tmp_path, trained):
    state, _ = trained
    with pytest.raises(ValueError, match="does not describe the state's network"):
        save_model(tmp_path / "wrong", state, model_config=dataclasses.replace(MODEL, view_hidden=(32,)))
    assert not (tmp_path / "wrong").exists()
    path = save_model(tmp_path / "m", state, model_config=MODEL)
    edit_record(path, lambda r: r.update(format_version=99))
    with pytest.raises(CheckpointError, match=r"checkpoint format version 99 is not supported"):
        load_model(path)
    path = save_model(tmp_path / "m", state, overwrite=True, model_config=MODEL)
    edit_record(path, lambda r: r.update(library_version="7.0.0"))
    with pytest.raises(CheckpointError, match=r"written by specrage_jax 7\.0\.0.*different major version"):
        load_model(path)
    path = save_model(tmp_path / "m", state, overwrite=True, model_config=MODEL)
    edit_record(path, lambda r: r.update(view_dims=[2, 2, 2]))  # a different view count
    with pytest.raises(CheckpointError, match=r"m: the saved arrays do not match the model built from the recorded"):
        load_model(path)


def test_truncated_or_altered_files_give_a_clear_error(tmp_path, trained):
    state, _ = trained
    path = save_model(tmp_path / "m", state, model_config=MODEL)
    biggest = largest_file(path)
    os.truncate(biggest, biggest.stat().st_size // 2)
    with pytest.raises(CheckpointError, match=r"checkpoint .*m is corrupted: file .* has \d+ bytes.*truncated"):
        load_model(path)
    path = save_model(tmp_path / "m", state, overwrite=True, model_config=MODEL)
    biggest = largest_file(path)
    data = bytearray(biggest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    biggest.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"is corrupted: file .* does not match its recorded checksum"):
        load_model(path)
    # without the file manifest, the arrays' own checksums (or the read itself) still catch it
    (path / "specrage_files.json").unlink()
    with pytest.raises(CheckpointError, match=r"m is corrupted: (array|its arrays)"):
        load_model(path)


# --- training checkpoints -----------------------------------------------------------------


def test_resumed_fit_equals_the_uninterrupted_run(tmp_path, trained):
    state_full, history_full = trained
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=3, model_config=MODEL) as ckpt:
        train_loop(small_state(), clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=0, checkpointer=ckpt)
        assert ckpt.epochs() == [2, 3, 4]
        restored = ckpt.restore(2, small_state())
    assert restored.progress.epochs_done == 2 and restored.progress.seed == 0
    assert [r.epoch for r in restored.progress.history.epochs] == [0, 1]
    state, history = train_loop(
        restored.state, clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=0, resume=restored.progress
    )
    assert_trees_equal(state.params, state_full.params)
    assert_trees_equal(state.opt_state, state_full.opt_state)
    np.testing.assert_array_equal(np.asarray(state.r_inv), np.asarray(state_full.r_inv))
    strip = [dataclasses.replace(r, seconds=0.0) for r in history.epochs]
    assert strip == [dataclasses.replace(r, seconds=0.0) for r in history_full.epochs]
    assert history.steps == history_full.steps and history.stop_reason == history_full.stop_reason
    with pytest.raises(ValueError, match="seed 1 a run trained with seed 0"):
        train_loop(
            restored.state, clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=1, resume=restored.progress
        )


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(tmp_path):
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=3, model_config=MODEL) as ckpt:
        train_loop(small_state(), clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=0, checkpointer=ckpt)
    newest = tmp_path / "ck" / "epoch_4"
    target = largest_file(newest / "arrays")
    os.truncate(target, target.stat().st_size // 2)
    ckpt = TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=3, model_config=MODEL)
    with pytest.raises(CheckpointError, match=r"epoch_4 is corrupted: file arrays/.* \(truncated\?\)"):
        ckpt.restore(4, small_state())
    ckpt.restore(3, small_state())  # the previous step still loads
    with pytest.warns(
        CheckpointWarning, match=r"skipped damaged training checkpoints: .*epoch_4.*resuming from .*epoch_3"
    ):
        restored = ckpt.restore_latest(small_state())
    assert restored.progress.epochs_done == 3 and ckpt.epochs() == [2, 3]
    assert list((tmp_path / "ck").glob("epoch_4.unreadable-*"))
    ckpt.close()


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=2, model_config=MODEL) as ckpt:
        train_loop(small_state(), clustered_views(96, 0), clustered_views(40, 1), TRAIN, seed=0, checkpointer=ckpt)
        assert ckpt.epochs() == [2, 4]
        three_views = create_state([2, 2, 2], MODEL, GRAPH, OrthoConfig(), learning_rate=1e-3, seed=0)
        with pytest.raises(CheckpointError, match=r"epoch_4 was written for another model: its view_dims is \[2, 2\]"):
            ckpt.restore(4, three_views)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(CheckpointError, match="another model"):
                ckpt.restore_latest(three_views)


def test_config_round_trips_through_its_dict():
    config = preset("bdgp")
    assert config_from_dict(json.loads(json.dumps(config_to_dict(config)))) == config
    with pytest.raises(ValueError, match=r"section 'model': unknown fields \['depth'\]"):
        config_from_dict({"model": {"depth": 3}})


# --- the inference pipeline and `specrage embed` --------------------------------------------


@pytest.mark.parametrize("autoencoder", [False, True])
def test_cli_embed_equals_in_process_embedding(tmp_path, capsys, trained, autoencoder):
    """The saved pipeline (scalers fitted on training rows, autoencoder encoders, model) applied by
    `specrage embed` to raw rows gives bitwise what the in-memory pieces give."""
    state, _ = trained
    data = load_dataset("blobs", seed=0)  # two 2-D views, as the small model expects
    train_rows = [v[:400] for v in data.views]
    scalers = fit_view_scalers(train_rows, "standard")
    ae_config = AutoencoderConfig(enabled=autoencoder, hidden=(8,), embedding_dim=2, epochs=1, batch_size=128)
    aes = None
    if autoencoder:
        scaled = apply_view_scalers(scalers, train_rows)
        aes = tuple(train_autoencoder(x, ae_config, seed=v) for v, x in enumerate(scaled))
    config = fixed_experiment(model=MODEL, graph=GRAPH, autoencoder=ae_config)
    save_inference_model(
        tmp_path / "run" / "model",
        state,
        config,
        scalers=scalers,
        nets=PretrainedNets(autoencoders=aes),
        input_dims=data.view_dims,
        view_names=data.view_names,
        dataset="blobs",
        seed=0,
    )
    rows = [v[400:700] for v in data.views]
    np.savez(tmp_path / "new.npz", view_0=rows[0], view_1=rows[1].T)  # a view stored features-first is fine
    code = main(
        [
            "embed",
            "--checkpoint",
            str(tmp_path / "run"),
            "--input",
            str(tmp_path / "new.npz"),
            "--output",
            str(tmp_path / "y.npy"),
            "--weights",
            str(tmp_path / "w.npy"),
            "--batch-size",
            "128",
        ]
    )
    assert code == 0, capsys.readouterr().err
    inputs = apply_view_scalers(scalers, rows)
    if autoencoder:
        inputs = encode_views(aes, inputs)
    y, weights = embed(state, inputs, batch_size=128)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), y)
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), weights)
    assert y.shape == (300, 3) and not np.allclose(inputs[0], rows[0])
    pipeline = load_pipeline(tmp_path / "run")
    assert pipeline.model.metadata["dataset"] == "blobs" and (pipeline.encoders is not None) == autoencoder
    loaded = SpecRaGE.load(tmp_path / "run")
    assert (loaded.autoencoders_ is not None) == autoencoder
    with pytest.raises(ValueError, match=r"X: view 1 has 3 features, but SpecRaGE is expecting 2"):
        loaded.transform([rows[0], np.zeros((300, 3))])


def test_cli_embed_names_the_wrong_view(tmp_path, capsys, trained):
    state, _ = trained
    save_model(tmp_path / "m", state, model_config=MODEL)
    np.savez(tmp_path / "three.npz", view_0=np.zeros((4, 2)), view_1=np.zeros((4, 2)), view_2=np.zeros((4, 2)))
    np.savez(tmp_path / "wide.npz", view_0=np.zeros((4, 2)), view_1=np.zeros((4, 5)))

    def embed_cli(model: str, data: str) -> int:
        return main(
            [
                "embed",
                "--checkpoint",
                str(tmp_path / model),
                "--input",
                str(tmp_path / data),
                "--output",
                str(tmp_path / "y.npy"),
            ]
        )

    assert embed_cli("m", "three.npz") == 2
    assert "3 views, the model was trained on 2" in capsys.readouterr().err
    assert embed_cli("m", "wide.npz") == 2
    assert "view 1 has shape (4, 5); the model expects 2 features" in capsys.readouterr().err
    assert embed_cli("none", "wide.npz") == 2
    assert "no checkpoint at" in capsys.readouterr().err
    assert not (tmp_path / "y.npy").exists()


def test_cli_checkpoint_defaults():
    from specrage_jax.cli.train import resolve_config

    default = resolve_config("digits", None, [], True).checkpoint
    assert (default.every_epochs, default.min_seconds, default.keep) == (1, 60.0, 3)
    explicit = resolve_config("digits", None, [], True, checkpoint_every=2, keep_checkpoints=5).checkpoint
    assert (explicit.every_epochs, explicit.min_seconds, explicit.keep) == (2, 0.0, 5)
    assert resolve_config("digits", None, ["checkpoint.every_epochs=0"], True).checkpoint.every_epochs == 0


def test_saved_pipeline_reapplies_row_normalization(tmp_path, trained):
    """data.preprocess=standard_l2 (feature scaling, then unit rows) is restored by load_pipeline."""
    state, _ = trained
    data = load_dataset("blobs", seed=0)
    scalers = fit_view_scalers([v[:400] for v in data.views], "standard_l2")
    config = fixed_experiment(model=MODEL, graph=GRAPH, data=fixed_data(preprocess="standard_l2"))
    save_inference_model(
        tmp_path / "run" / "model",
        state,
        config,
        scalers=scalers,
        nets=None,
        input_dims=data.view_dims,
        view_names=data.view_names,
        dataset="blobs",
        seed=0,
    )
    rows = [v[400:500] for v in data.views]
    expected, _ = embed(state, apply_view_scalers(scalers, rows), batch_size=128)
    restored = load_pipeline(tmp_path / "run")
    assert all(s.unit_rows for s in restored.scalers)
    np.testing.assert_array_equal(SpecRaGE.load(tmp_path / "run").transform(rows), expected)
