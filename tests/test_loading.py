"""One way to load: ``SpecRaGE.load`` opens a `specrage train` run, its DIR/model and an estimator
save alike, and embeds exactly as ``specrage embed`` does, missing views included."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from specrage_jax import SpecRaGE
from specrage_jax.cli import main
from specrage_jax.data import split_indices
from specrage_jax.training.checkpoint import load_model
from specrage_jax.training.checkpoint_files import CheckpointWarning


def clustered_views(n: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Two views of three Gaussian clusters (widths 6 and 4)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 3
    centres = rng.normal(scale=4.0, size=(3, 10))
    base = centres[labels] + rng.normal(size=(n, 10))
    return [base[:, :6].astype(np.float32), (base[:, 6:] @ rng.normal(size=(4, 4))).astype(np.float32)], labels


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """A short `specrage train` run (autoencoders on, so the encoders are part of the pipeline)."""
    folder = tmp_path_factory.mktemp("loading")
    views, labels = clustered_views(150, seed=0)
    np.savez(folder / "mine.npz", view_0=views[0], view_1=views[1], labels=labels)
    code = main(
        [
            "train",
            "--dataset",
            f"file:{folder / 'mine.npz'}",
            "--out",
            str(folder / "run"),
            "--quiet",
            "--no-figure",
            "--set",
            "train.epochs=3",
            "--set",
            "autoencoder.enabled=true",
            "--set",
            "autoencoder.epochs=2",
            "--set",
            "autoencoder.embedding_dim=5",
            "--set",
            "autoencoder.hidden=32,32",
        ]
    )
    assert code == 0
    new, _ = clustered_views(40, seed=1)
    new[1][3] = np.nan  # sample 3 misses view 1
    np.savez(folder / "new.npz", view_0=new[0], view_1=new[1])
    return folder, new


def embed_cli(folder, checkpoint, *extra: str) -> tuple[np.ndarray, np.ndarray]:
    code = main(
        [
            "embed",
            "--checkpoint",
            str(checkpoint),
            "--input",
            str(folder / "new.npz"),
            "--output",
            str(folder / "y.npy"),
            "--weights",
            str(folder / "w.npy"),
            *extra,
        ]
    )
    assert code == 0
    return np.load(folder / "y.npy"), np.load(folder / "w.npy")


def test_a_cli_run_loaded_with_specrage_load_embeds_bitwise_like_specrage_embed(cli_run):
    folder, new = cli_run
    est = SpecRaGE.load(folder / "run")
    y_cli, w_cli = embed_cli(folder, folder / "run")
    np.testing.assert_array_equal(est.transform(new), y_cli)
    np.testing.assert_array_equal(est.view_weights(new), w_cli)
    np.testing.assert_array_equal(SpecRaGE.load(folder / "run" / "model").transform(new), y_cli)
    assert est.autoencoders_ is not None and est.view_dims_ == (6, 4) and est.n_components_ == 3
    assert w_cli[3].tolist() == [1.0, 0.0] and np.isfinite(y_cli).all()  # the missing view left out


def test_a_loaded_run_predicts_with_its_centres_and_keeps_its_record(cli_run):
    folder, new = cli_run
    est = SpecRaGE.load(folder / "run")
    metrics = json.loads((folder / "run" / "metrics.json").read_text())
    assert est.cluster_centers_.shape == (3, 3) and est.n_clusters == 3
    assert est.predict(new).shape == (40,) and set(est.predict(new)) <= {0, 1, 2}
    assert est.health_.as_dict() == metrics["test"]["health"]
    assert est.history_.steps == metrics["training"]["steps"] and est.resolved_defaults_ == metrics["resolved_defaults"]
    with pytest.raises(ValueError, match="47 features"):
        est.transform([np.zeros((2, 47)), np.zeros((2, 4))])


def test_a_loaded_run_predicts_with_the_centres_of_its_training_embedding(cli_run):
    """The saved centres are k-means centres of the training rows' embedding (each the mean of the
    training rows nearest it), not of the test rows'; the run records the test ACC they give."""
    folder, _ = cli_run
    est = SpecRaGE.load(folder / "run")
    views, labels = clustered_views(150, seed=0)
    train = split_indices(labels, seed=0).train
    embedding = est.transform([v[train] for v in views])
    nearest = est.predict([v[train] for v in views])
    for c, centre in enumerate(est.cluster_centers_):
        np.testing.assert_allclose(embedding[nearest == c].mean(axis=0), centre, atol=1e-4)
    metrics = json.loads((folder / "run" / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["kmeans_training_centres"]["acc"] <= 1.0


def test_a_loaded_run_saves_and_loads_again(cli_run, tmp_path):
    """A run's model has no training labels or inertia; its estimator still saves and loads."""
    folder, new = cli_run
    est = SpecRaGE.load(folder / "run")
    est.save(tmp_path / "again")
    same = SpecRaGE.load(tmp_path / "again")
    np.testing.assert_array_equal(same.transform(new), est.transform(new))
    np.testing.assert_array_equal(same.predict(new), est.predict(new))
    assert same.labels_ is None and same.inertia_ is None


def test_specrage_embed_takes_a_mask_and_an_estimator_save(cli_run, tmp_path):
    folder, new = cli_run
    mask = np.ones((40, 2), bool)
    mask[5, 0] = False
    np.save(folder / "mask.npy", mask)
    est = SpecRaGE.load(folder / "run")
    y_masked, w_masked = embed_cli(folder, folder / "run", "--mask", str(folder / "mask.npy"))
    np.testing.assert_array_equal(y_masked, est.transform(new, mask=mask))
    assert w_masked[5].tolist() == [0.0, 1.0] and w_masked[3].tolist() == [1.0, 0.0]

    views, _ = clustered_views(120, seed=2)
    fitted = SpecRaGE(n_clusters=3, random_state=0, max_epochs=2).fit(views)
    fitted.save(tmp_path / "est")
    y_est, w_est = embed_cli(folder, tmp_path / "est")
    np.testing.assert_array_equal(y_est, fitted.transform(new))
    np.testing.assert_array_equal(w_est, fitted.view_weights(new))


def test_load_model_warns_that_it_returns_the_network_alone(cli_run):
    folder, _ = cli_run
    with pytest.warns(CheckpointWarning, match="SpecRaGE.load"):
        load_model(folder / "run" / "model")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SpecRaGE.load(folder / "run")
