"""The registry on the real benchmark files (../shared/datasets, or $SPECRAGE_TEST_DATA)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from specrage_jax.data import (
    InfiniteMnistWarp,
    dataset_names,
    infinitemnist_chunk,
    infinitemnist_chunks,
    is_dataset_name,
    load_dataset,
    load_mnist_arrays,
    parse_dataset_name,
)
from specrage_jax.data.registry import DATA_DIR_ENV

MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.fixture(scope="module")
def data_dir() -> str:
    """The folder of real datasets; the tests skip when it is absent."""
    folder = Path(os.environ.get("SPECRAGE_TEST_DATA", Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    if not folder.is_dir():
        pytest.skip(f"real datasets not found at {folder} (set SPECRAGE_TEST_DATA to the folder)")
    return str(folder)


def need(data_dir: str, *names: str) -> None:
    missing = [name for name in names if not (Path(data_dir) / name).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not in {data_dir}")


@pytest.fixture(scope="module")
def mnist(data_dir):
    need(data_dir, "mnist/train-images.idx3-ubyte", "mnist/t10k-images.idx3-ubyte")
    return load_mnist_arrays(data_dir)


def test_handwritten(data_dir):
    need(data_dir, "handwritten.mat")
    data = load_dataset("handwritten", data_dir=data_dir)
    assert data.name == "handwritten"
    assert [v.shape for v in data.views] == [(2000, 240), (2000, 216)]
    assert data.view_names == ("pixel", "profile")
    np.testing.assert_array_equal(np.bincount(data.labels), [200] * 10)
    np.testing.assert_array_equal(data.labels[::200], np.arange(10))  # rows sorted by digit, 0-based
    assert data.views[0].max() == 6 and data.views[1].max() == 1353  # integer storage cast, not wrapped


def test_bdgp(data_dir):
    need(data_dir, "BDGP.mat")
    data = load_dataset("bdgp", data_dir=data_dir)
    assert data.name == "bdgp" and data.view_names == ("visual", "textual")
    assert [v.shape for v in data.views] == [(2500, 1750), (2500, 79)]
    np.testing.assert_array_equal(np.bincount(data.labels), [500] * 5)
    np.testing.assert_array_equal(data.labels[::500], np.arange(5))
    assert set(np.unique(data.views[1]).tolist()) == {0.0, 1.0}
    assert 0.0 <= data.views[0].min() and data.views[0].max() < 0.71


def test_file_path_with_views_equals_handwritten(data_dir):
    need(data_dir, "handwritten.mat")
    named = load_dataset("handwritten", data_dir=data_dir)
    by_path = load_dataset(f"file:{Path(data_dir) / 'handwritten.mat'}#0,2")
    relative = load_dataset("file:handwritten.mat#0,2", data_dir=data_dir)
    for data in (by_path, relative):
        assert data.view_names == named.view_names
        np.testing.assert_array_equal(data.labels, named.labels)
        for got, want in zip(data.views, named.views):
            np.testing.assert_array_equal(got, want)
    assert load_dataset(f"file:{Path(data_dir) / 'handwritten.mat'}").n_views == 6


def test_mnist_arrays(mnist):
    images, labels = mnist
    assert images.shape == (70000, 784) and images.dtype == np.float32
    assert images.min() == 0.0 and images.max() == 1.0
    np.testing.assert_array_equal(np.bincount(labels[:60000]), MNIST_TRAIN_COUNTS)
    np.testing.assert_array_equal(np.bincount(labels[60000:]), MNIST_TEST_COUNTS)
    assert abs(images[:60000].mean() - 0.1307) < 1e-3 and abs(images[:60000].std() - 0.3081) < 1e-3


def test_noisymnist_view2_rows_are_same_class_images_plus_noise(data_dir, mnist):
    images, labels = mnist
    data = load_dataset("noisymnist", seed=3, data_dir=data_dir)
    assert data.name == "noisymnist" and [v.shape for v in data.views] == [(70000, 784)] * 2
    np.testing.assert_array_equal(data.views[0], images)
    np.testing.assert_array_equal(data.labels, labels)
    rows = np.random.default_rng(0).choice(70000, size=40, replace=False)
    noisy = data.views[1][rows]
    # The clean image nearest to a noisy row is its source: the noise (norm^2 ~ 784 * 0.04)
    # is far smaller than the gap between distinct digits.
    distances = (noisy**2).sum(1)[:, None] - 2 * noisy @ images.T + (images**2).sum(1)[None, :]
    sources = distances.argmin(1)
    np.testing.assert_array_equal(labels[sources], labels[rows])
    assert (sources != rows).all()
    residual = noisy - images[sources]
    assert abs(residual.std() - 0.2) < 0.01 and abs(residual.mean()) < 0.01


def test_infinitemnist_is_seeded_chunk_independent_and_same_class(data_dir, mnist):
    images, labels = mnist
    first = load_dataset("infinitemnist:2000", seed=7, data_dir=data_dir)
    again = load_dataset("infinitemnist:2000", seed=7, data_dir=data_dir)
    other = load_dataset("infinitemnist:2000", seed=8, data_dir=data_dir)
    assert first.name == "infinitemnist" and [v.shape for v in first.views] == [(2000, 784)] * 2
    for a, b in zip(first.views, again.views):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first.views[0], other.views[0])
    assert all(np.isfinite(v).all() for v in first.views)
    assert 0.0 <= first.views[0].min() and first.views[0].max() <= 1.0
    assert len(np.unique(first.labels)) == 10
    chunks = list(infinitemnist_chunks(images, labels, n_samples=1500, chunk_size=500, seed=7))
    alone = infinitemnist_chunk(images, labels, 2, 500, seed=7)
    np.testing.assert_array_equal(alone[0][0], chunks[2][0][0])
    np.testing.assert_array_equal(alone[0][1], chunks[2][0][1])
    # Without transforms or noise, both views are MNIST images: find them and check the classes.
    (view1, view2), chunk_labels = infinitemnist_chunk(
        images,
        labels,
        0,
        30,
        seed=7,
        warp=InfiniteMnistWarp(noise_std=0.0, max_shift=0.0, max_rotation_deg=0.0, max_scale=0.0),
    )
    for view in (view1, view2):
        distances = (view**2).sum(1)[:, None] - 2 * view @ images.T + (images**2).sum(1)[None, :]
        found = distances.argmin(1)
        assert np.allclose(images[found], view, atol=1e-6)
        np.testing.assert_array_equal(labels[found], chunk_labels)


def test_names_and_parsing():
    assert dataset_names() == ("blobs", "digits", "handwritten", "bdgp", "noisymnist", "infinitemnist")
    assert parse_dataset_name("infinitemnist:20000").n_samples == 20000
    assert parse_dataset_name("file:a/b.mat#0,2").views == (0, 2)
    assert parse_dataset_name("file:a/b.npz").path == "a/b.npz"
    assert is_dataset_name("infinitemnist:5") and is_dataset_name("file:x.mat") and is_dataset_name("bdgp")
    assert not is_dataset_name("mnist")
    for bad, message in [
        ("infinitemnist:abc", "positive integer"),
        ("infinitemnist:0", "positive integer"),
        ("file:x.mat#0,a", "comma-separated"),
        ("file:", "needs a path"),
        ("mnist", "unknown dataset 'mnist'.*blobs, digits, handwritten"),
    ]:
        with pytest.raises(ValueError, match=message):
            load_dataset(bad)


def test_missing_data_says_what_to_put_where(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=rf"handwritten needs handwritten\.mat: put it in {tmp_path}"):
        load_dataset("handwritten", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"bdgp needs BDGP\.mat: no data directory is set.*SPECRAGE_DATA"):
        load_dataset("bdgp")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=rf"bdgp needs BDGP\.mat: put it in {tmp_path}"):
        load_dataset("bdgp")
    with pytest.raises(FileNotFoundError, match=r"noisymnist needs the MNIST IDX files train-images.*put them in"):
        load_dataset("noisymnist")
    with pytest.raises(FileNotFoundError, match=r"file:nope\.mat: no such file"):
        load_dataset("file:nope.mat")


def test_data_dir_from_environment(data_dir, monkeypatch):
    need(data_dir, "BDGP.mat")
    monkeypatch.setenv(DATA_DIR_ENV, data_dir)
    assert load_dataset("bdgp").view_dims == (1750, 79)
