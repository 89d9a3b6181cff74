"""The streamed experiment path: datasets read from disk on demand (data.lazy), the InfiniteMNIST
cache, equality with the in-memory path, bounded reads, and the CLI switch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specrage_jax.cli import main
from specrage_jax.data import lazy, load_dataset, open_streamed_dataset
from specrage_jax.data.lazy import MemmapRows, StreamedViews
from specrage_jax.data.mnist import InfiniteMnistWarp
from specrage_jax.data.registry import infinitemnist_cache_path, infinitemnist_source
from specrage_jax.data.stream import META_FILE, open_views_memmap, view_file, write_views_memmap
from specrage_jax.data.stream_cache import build_views_cache
from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.runs.experiment import run_experiment, should_stream, train_and_evaluate
from specrage_jax.runs.prepare import prepare_splits, with_n_components
from specrage_jax.training.autoencoder import train_autoencoder
from specrage_jax.training.checkpoint_files import CheckpointError
from specrage_jax.training.stages import encode_views, train_view_nets

# A small, fast configuration of the whole pipeline: autoencoder, Siamese nets, SpecRaGE.
SMALL = [
    "model.view_hidden=32,32",
    "model.weighting_hidden=16",
    "train.epochs=2",
    "train.batch_size=128",
    "train.progress=false",
    "graph.n_neighbors=8",
    "model.n_components=3",  # the data's 3 classes: no data-aware rule reads the rows
    "autoencoder.enabled=true",
    "autoencoder.hidden=32,32",
    "autoencoder.epochs=2",
    "autoencoder.batch_size=64",
    "siamese.enabled=true",
    "siamese.hidden=32",
    "siamese.epochs=1",
    "siamese.pair_block=512",
    "eval.kmeans_n_init=1",
    "eval.embed_batch_size=256",
    "data.preprocess=none",
]


def small_config(dataset: str, *extra: str):
    return apply_overrides(preset(dataset), [*SMALL, *extra])


def class_views(n: int, seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Two views (n, 12), (n, 7) of 3 Gaussian classes, labels (n,)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    views = tuple((rng.standard_normal((n, d)) + 3.0 * np.eye(3, d)[labels]).astype(np.float32) for d in (12, 7))
    return views, labels


def write_dataset(folder: Path, n: int = 900, chunk: int = 128) -> Path:
    views, labels = class_views(n)
    chunks = (((views[0][s : s + chunk], views[1][s : s + chunk]), labels[s : s + chunk]) for s in range(0, n, chunk))
    write_views_memmap(folder, chunks, n, with_labels=True)
    return folder


def idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    return header + array.astype(np.uint8).tobytes()


def fake_mnist(folder: Path, n_train: int = 300, n_test: int = 100, seed: int = 0) -> Path:
    """MNIST-shaped IDX files (28 x 28 uint8 images, labels 0..9) of blurred class templates."""
    rng = np.random.default_rng(seed)
    templates = rng.integers(0, 256, size=(10, 28, 28))
    mnist = folder / "mnist"
    mnist.mkdir(parents=True)
    for split, count in (("train", n_train), ("t10k", n_test)):
        labels = rng.integers(0, 10, size=count)
        images = np.clip(templates[labels] * 0.7 + rng.integers(0, 80, size=(count, 28, 28)), 0, 255)
        (mnist / f"{split}-images-idx3-ubyte").write_bytes(idx_bytes(images))
        (mnist / f"{split}-labels-idx1-ubyte").write_bytes(idx_bytes(labels))
    return folder


def assert_same_run(a: dict, b: dict) -> None:
    """The same metrics, view weights and per-epoch losses, exactly (the streamed run reads the
    same float32 rows in the same order, so every computation is the same)."""
    for group in ("kmeans", "svm"):
        assert b["test"][group] == a["test"][group], group
    assert b["test"]["mean_view_weights"] == a["test"]["mean_view_weights"]
    assert b["test"]["orthogonality_error"] == a["test"]["orthogonality_error"]
    for key in ("train_loss", "val_loss", "view_weights"):
        assert [e[key] for e in b["training"]["epochs"]] == [e[key] for e in a["training"]["epochs"]], key


# --- MemmapRows -------------------------------------------------------------------------------


def test_memmap_rows_index_like_an_array(tmp_path):
    views, labels = class_views(50)
    data = StreamedViews(open_views_memmap(write_dataset(tmp_path / "d", 50, chunk=7)), labels, "t", ("a", "b"))
    split = np.array([1, 4, 5, 6, 20, 33, 49])
    rows = data.subset(split)[0][0]
    expected = views[0][split]
    assert rows.shape == (7, 12) and len(rows) == 7 and rows.ndim == 2 and rows.dtype == np.float32
    for key in (
        np.array([3, 0, 3, 6, 1]),
        slice(2, 6),
        slice(None, None, -2),
        np.array([True, False] * 3 + [True]),
        np.array([-1, 0]),
        4,
    ):
        np.testing.assert_array_equal(rows[key], expected[key])
    with pytest.raises(IndexError, match="out of range"):
        rows[np.array([7])]
    with pytest.raises(TypeError, match="not read whole into memory"):
        np.asarray(rows)
    with pytest.raises(ValueError, match="sorted"):
        rows.take(np.array([2, 1]))
    data.close()


# --- the on-disk cache ------------------------------------------------------------------------


def chunk_factory(n: int, calls: list):
    views, labels = class_views(n)

    def make():
        calls.append(1)
        yield (views[0], views[1]), labels

    return make


def test_cache_is_built_once_and_reused(tmp_path):
    calls: list = []
    folder = tmp_path / "cache" / "c"
    first, built = build_views_cache(folder, {"p": 1}, chunk_factory(40, calls), 40)
    first.close()
    again, built_again = build_views_cache(folder, {"p": 1}, chunk_factory(40, calls), 40)
    assert (built, built_again, len(calls)) == (True, False, 1)
    assert again.meta["source"] == {"p": 1} and len(again.meta["crc32"]) == 3
    again.close()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["c"]  # no staging directory left


@pytest.mark.parametrize("damage", ["truncated", "flipped", "no_meta", "other_params", "no_labels"])
def test_damaged_cache_is_not_reused(tmp_path, damage):
    calls: list = []
    folder = tmp_path / "c"
    build_views_cache(folder, {"p": 1}, chunk_factory(40, calls), 40)[0].close()
    params = {"p": 1}
    if damage == "truncated":
        path = folder / view_file(1)
        path.write_bytes(path.read_bytes()[:-4])
    elif damage == "flipped":
        path = folder / view_file(0)
        raw = bytearray(path.read_bytes())
        raw[-1] ^= 0xFF
        path.write_bytes(bytes(raw))
    elif damage == "no_meta":
        (folder / META_FILE).unlink()
    elif damage == "other_params":
        params = {"p": 2}
    else:
        meta = json.loads((folder / META_FILE).read_text())
        (folder / META_FILE).write_text(json.dumps({**meta, "labels": False}))
    with pytest.warns(UserWarning, match="not reused"):
        data, built = build_views_cache(folder, params, chunk_factory(40, calls), 40)
    views, labels = class_views(40)
    assert built and len(calls) == 2
    np.testing.assert_array_equal(data.rows(slice(None))[0], views[0])
    np.testing.assert_array_equal(data.labels, labels)
    data.close()


def test_killed_generation_leaves_no_cache(tmp_path):
    folder = tmp_path / "c"
    views, labels = class_views(40)

    def dies():
        yield (views[0][:20], views[1][:20]), labels[:20]
        raise KeyboardInterrupt  # killed half way

    with pytest.raises(KeyboardInterrupt):
        build_views_cache(folder, {"p": 1}, dies, 40)
    assert not folder.exists() and list(tmp_path.iterdir()) == []
    # A staging directory left by a process killed outright is never opened as the cache, and
    # is removed once its process is gone (pid 1 runs; 2**23 + 7 exceeds Linux's pid_max).
    alive, dead = tmp_path / ".c.tmp-1-x", tmp_path / f".c.tmp-{2**23 + 7}-y"
    for staging in (alive, dead):
        write_views_memmap(staging, [((views[0], views[1]), labels)], 40, with_labels=True, source={"p": 1})
    calls: list = []
    data, built = build_views_cache(folder, {"p": 1}, chunk_factory(40, calls), 40)
    assert built and calls == [1]
    assert alive.exists() and not dead.exists()
    data.close()


def test_infinitemnist_cache_holds_the_in_memory_rows(tmp_path):
    data_dir = str(fake_mnist(tmp_path / "data"))
    in_ram = load_dataset("infinitemnist:120", seed=3, data_dir=data_dir)
    streamed = open_streamed_dataset("infinitemnist:120", seed=3, data_dir=data_dir, cache_dir=tmp_path / "cache")
    for v in range(2):
        np.testing.assert_array_equal(streamed.views[v][slice(None)], in_ram.views[v])
    np.testing.assert_array_equal(streamed.labels, in_ram.labels)
    assert (streamed.name, streamed.view_names) == (in_ram.name, in_ram.view_names)
    folder = streamed.source.directory
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("infinitemnist-n120-seed3-")
    streamed.close()
    other_seed = open_streamed_dataset("infinitemnist:120", seed=4, data_dir=data_dir, cache_dir=tmp_path / "cache")
    assert other_seed.source.directory != folder
    other_seed.close()


def test_cache_path_depends_on_every_parameter():
    images, labels = np.zeros((4, 784), np.uint8), np.arange(4)
    base = infinitemnist_cache_path("c", infinitemnist_source(10, 0, images, labels, InfiniteMnistWarp()))
    assert base != infinitemnist_cache_path(
        "c", infinitemnist_source(10, 0, images, labels, InfiniteMnistWarp(noise_std=0.3))
    )
    assert base != infinitemnist_cache_path("c", infinitemnist_source(10, 0, images + 1, labels, InfiniteMnistWarp()))


# --- the streamed run equals the in-memory run ---------------------------------------------------


@pytest.mark.slow  # the whole InfiniteMNIST pipeline twice; the test above checks streaming without pre-training
def test_streamed_infinitemnist_run_equals_the_in_memory_run(tmp_path):
    data_dir = str(fake_mnist(tmp_path / "data"))
    name = "infinitemnist:500"
    config = small_config(name)
    kwargs = {"seed": 1, "data_dir": data_dir, "figure": False}
    in_ram = run_experiment(name, config, stream=False, **kwargs)
    streamed = run_experiment(name, config, stream=True, cache_dir=tmp_path / "cache", **kwargs)
    assert_same_run(in_ram, streamed)
    assert "stream" not in in_ram and "eval_rows" not in in_ram["test"]
    assert streamed["stream"]["storage_dtype"] == "float32"
    assert streamed["test"]["eval_rows"]["kmeans_test_rows"] == in_ram["n_samples"]["test"]


def test_streamed_embeddings_equal_in_memory_without_autoencoder(tmp_path):
    """SpecRaGE, the scale estimate, validation, the output map and embed read the streamed rows
    directly. Two components more than the clusters, so the output map is fitted (not the identity)
    from streamed batches."""
    folder = write_dataset(tmp_path / "d")
    name = f"memmap:{folder}"
    config = small_config(name, "autoencoder.enabled=false", "siamese.enabled=false")
    in_ram_data = load_dataset(name)
    config = apply_overrides(config, [f"model.n_components={in_ram_data.n_classes + 2}"])
    a = train_and_evaluate(in_ram_data, config, seed=2)
    assert not np.allclose(np.asarray(a.state.output_map), np.eye(in_ram_data.n_classes + 2))
    streamed_data = open_streamed_dataset(name)
    b = train_and_evaluate(streamed_data, config, seed=2)
    assert isinstance(b.pretrained.splits.train[0], MemmapRows)
    np.testing.assert_array_equal(
        b.evaluation.y_test, a.evaluation.y_test
    )  # the same rows in the same order: bitwise equal
    np.testing.assert_array_equal(b.evaluation.alpha_test, a.evaluation.alpha_test)
    np.testing.assert_array_equal(np.asarray(b.state.output_map), np.asarray(a.state.output_map))
    assert_same_run(a.result, b.result)
    streamed_data.close()


def test_training_never_reads_a_whole_view(tmp_path, monkeypatch):
    """Every read of a streamed view is a batch (128), an embedding chunk (256) or an autoencoder
    batch (64) or encoding chunk; none is a whole training split (648 rows). The configuration is
    the previous test's, so the compiled steps are reused."""
    folder = write_dataset(tmp_path / "d")
    gathers: list[int] = []
    original = MemmapRows.gather

    def recording(self, file_rows):
        gathers.append(int(file_rows.size))
        return original(self, file_rows)

    monkeypatch.setattr(lazy.MemmapRows, "gather", recording)
    name = f"memmap:{folder}"
    config = small_config(name, "autoencoder.enabled=false", "siamese.enabled=false")
    data = open_streamed_dataset(name)
    config = with_n_components(config, data.n_classes)
    outputs = train_and_evaluate(data, config, seed=0)
    n_train = outputs.result["n_samples"]["train"]
    assert gathers and max(gathers) <= 256 < n_train
    gathers.clear()
    nets = train_view_nets(train_autoencoder, data.views, config.autoencoder, config, seed=0)
    assert gathers and max(gathers) == 64  # the autoencoders train on gathered batches
    gathers.clear()
    codes = encode_views(nets, data.views)  # and encode in chunks of 8192 rows (all 900 here)
    assert gathers == [900, 900] and [c.shape for c in codes] == [(900, 10), (900, 10)]
    data.close()


def test_evaluation_subsample_is_seeded_and_recorded(tmp_path):
    folder = write_dataset(tmp_path / "d")
    name = f"memmap:{folder}"
    config = small_config(name, "autoencoder.enabled=false", "siamese.enabled=false")
    first = run_experiment(name, config, seed=0, stream=True, eval_max_rows=50, figure=False)
    again = run_experiment(name, config, seed=0, stream=True, eval_max_rows=50, figure=False)
    rows = first["test"]["eval_rows"]
    assert rows["kmeans_test_rows"] == 180 and rows["svm_train_rows"] == 50 and rows["svm_test_rows"] == 180
    assert first["test"]["kmeans"] == again["test"]["kmeans"] and first["test"]["svm"] == again["test"]["svm"]


# --- the switch ---------------------------------------------------------------------------------


def test_stream_switch(tmp_path):
    folder = write_dataset(tmp_path / "d", n=100)
    assert should_stream("infinitemnist", None) and not should_stream("infinitemnist:3000", None)
    assert should_stream("infinitemnist:3000", True) and not should_stream("infinitemnist", False)
    assert not should_stream(f"memmap:{folder}", None) and not should_stream("blobs", None)
    with pytest.raises(ValueError, match="cannot be streamed"):
        open_streamed_dataset("blobs")
    data = open_streamed_dataset(f"memmap:{folder}")
    with pytest.raises(ValueError, match="data.preprocess='standard' is not supported"):
        prepare_splits(data, apply_overrides(preset(f"memmap:{folder}"), ["data.preprocess=standard"]), seed=0)
    assert prepare_splits(data, preset(f"memmap:{folder}"), seed=0).scalers[0].kind == "none"  # auto: raw values
    data.close()


def test_cli_stream_flags(tmp_path, capsys):
    folder = write_dataset(tmp_path / "d", n=300)
    out = tmp_path / "run"
    args = ["train", "--dataset", f"memmap:{folder}", "--out", str(out), "--quiet", "--no-figure", "--stream", "on"]
    assert main(args + ["--set", "data.preprocess=standard"]) == 2
    assert "data.preprocess=none" in capsys.readouterr().err
    assert main(["train", "--dataset", "blobs", "--stream", "on", "--out", str(out)]) == 2
    assert "cannot be streamed" in capsys.readouterr().err
    small = [a for item in SMALL for a in ("--set", item)]
    assert main(args + small + ["--set", "autoencoder.enabled=false", "--eval-max-rows", "40"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    rows = metrics["test"]["eval_rows"]
    assert rows["svm_train_rows"] == 40 and rows["kmeans_test_rows"] == 60 and "stream" in metrics  # every test row
    record = json.loads((out / "checkpoints" / "run.json").read_text())
    assert (
        record["stream"] is True
        and record["data"]["file_crc32"] == json.loads((folder / META_FILE).read_text())["crc32"]
    )


def test_streamed_run_resumes_streamed_only(tmp_path):
    folder = write_dataset(tmp_path / "d")
    name, out = f"memmap:{folder}", tmp_path / "run"
    config = small_config(
        name,
        "autoencoder.enabled=false",
        "siamese.enabled=false",
        "checkpoint.every_epochs=1",
        "checkpoint.save_model=false",
    )
    first = run_experiment(name, config, seed=0, out_dir=out, stream=True, figure=False)
    again = run_experiment(name, config, seed=0, out_dir=out, stream=True, figure=False, resume=True)
    assert again["training"]["resumed_from_epoch"] == 2 and again["test"]["kmeans"] == first["test"]["kmeans"]
    with pytest.raises(CheckpointError, match="data"):  # the in-memory run's fingerprint differs
        run_experiment(name, config, seed=0, out_dir=out, stream=False, figure=False, resume=True)
