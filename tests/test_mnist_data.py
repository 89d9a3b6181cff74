"""The IDX reader and the MNIST-derived sets (NoisyMNIST pairs, InfiniteMNIST warps and chunks)
on small synthetic images."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from specrage_jax.data import mnist

RNG = np.random.default_rng(0)
# InfiniteMNIST without transforms or noise: both views are MNIST images
STILL = mnist.InfiniteMnistWarp(noise_std=0.0, max_shift=0.0, max_rotation_deg=0.0, max_scale=0.0)


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    header = struct.pack(">HBB", 0, type_code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(">u1" if type_code == 0x08 else ">i4").tobytes()


def test_read_idx_images_labels_and_gzip(tmp_path):
    images = RNG.integers(0, 256, size=(3, 4, 5), dtype=np.uint8)
    (tmp_path / "img").write_bytes(idx_bytes(images))
    (tmp_path / "lab.gz").write_bytes(gzip.compress(idx_bytes(np.array([1, 0, 9], dtype=np.uint8))))
    np.testing.assert_array_equal(mnist.read_idx(tmp_path / "img"), images)
    np.testing.assert_array_equal(mnist.read_idx(tmp_path / "lab.gz"), [1, 0, 9])
    assert mnist.read_idx(tmp_path / "img").dtype == np.uint8
    wide = np.array([[-3, 70000]], dtype=np.int32)
    (tmp_path / "i4").write_bytes(idx_bytes(wide, type_code=0x0C))
    np.testing.assert_array_equal(mnist.read_idx(tmp_path / "i4"), wide)


def test_read_idx_errors(tmp_path):
    good = idx_bytes(np.zeros((2, 3, 3), dtype=np.uint8))
    (tmp_path / "magic").write_bytes(b"\x12\x34" + good[2:])
    with pytest.raises(ValueError, match=r"magic.*bad IDX magic 0x12340803"):
        mnist.read_idx(tmp_path / "magic")
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(ValueError, match=r"short: header says shape \(2, 3, 3\).*33 bytes"):
        mnist.read_idx(tmp_path / "short")
    with pytest.raises(FileNotFoundError, match="absent"):
        mnist.read_idx(tmp_path / "absent")


@pytest.mark.parametrize("style", ["dot", "dash", "gz"])
def test_load_mnist_arrays_file_names(tmp_path, style):
    folder = tmp_path / "mnist" if style != "dash" else tmp_path
    folder.mkdir(exist_ok=True)
    parts = {
        ("train", "images", "idx3"): np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4),
        ("train", "labels", "idx1"): np.array([3, 1], dtype=np.uint8),
        ("t10k", "images", "idx3"): np.full((1, 4, 4), 255, dtype=np.uint8),
        ("t10k", "labels", "idx1"): np.array([7], dtype=np.uint8),
    }
    for (split, kind, idx), array in parts.items():
        name = f"{split}-{kind}.{idx}-ubyte" if style == "dot" else f"{split}-{kind}-{idx}-ubyte"
        content = idx_bytes(array)
        if style == "gz":
            name, content = name + ".gz", gzip.compress(content)
        (folder / name).write_bytes(content)
    images, labels = mnist.load_mnist_arrays(tmp_path)
    assert images.shape == (3, 16) and images.dtype == np.float32
    np.testing.assert_allclose(images[0], np.arange(16) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(images[2], 1.0)
    np.testing.assert_array_equal(labels, [3, 1, 7])
    assert labels.dtype == np.int64


def test_load_mnist_arrays_missing_names_what_it_looked_for(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train-images\.idx3-ubyte.*train-images-idx3-ubyte.*mnist"):
        mnist.load_mnist_arrays(tmp_path)


def toy_digits(n_per_class: int = 6, side: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(3 n, side^2) distinct random images in [0, 1] and (3 n,) labels 0..2."""
    rng = np.random.default_rng(5)
    return rng.random((3 * n_per_class, side * side), dtype=np.float32), np.repeat(np.arange(3), n_per_class)


def row_index(table: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row of `rows`, the index of the identical row of `table` (exact match)."""
    matches = (rows[:, None, :] == table[None, :, :]).all(-1)
    assert (matches.sum(1) == 1).all()
    return matches.argmax(1)


def test_make_noisymnist_pairs_same_class_images_plus_noise():
    images, labels = toy_digits()
    clean = mnist.make_noisymnist(images, labels, seed=1, noise_std=0.0)
    np.testing.assert_array_equal(clean.views[0], images)
    partners = row_index(images, clean.views[1])
    np.testing.assert_array_equal(labels[partners], labels)
    assert (partners != np.arange(labels.size)).all()
    noisy = mnist.make_noisymnist(images, labels, seed=1, noise_std=0.2)
    residual = noisy.views[1] - images[partners]
    assert abs(residual.std() - 0.2) < 0.02 and residual.max() > 0.4
    again = mnist.make_noisymnist(images, labels, seed=1)
    np.testing.assert_array_equal(again.views[1], noisy.views[1])
    assert noisy.name == "noisymnist"


def test_warp_images_integer_shift_and_quarter_turn():
    image = np.random.default_rng(2).random((1, 6, 6), dtype=np.float32)
    center = np.full(2, 2.5)
    matrices, offsets = mnist.inverse_affine(np.zeros(1), np.ones(1), np.array([[1.0, 2.0]]), center)
    shifted = mnist.warp_images(image, matrices, offsets)[0]
    np.testing.assert_allclose(shifted[1:, 2:], image[0, :-1, :-2], atol=1e-6)
    assert (shifted[0] == 0).all() and (shifted[:, :2] == 0).all()
    matrices, offsets = mnist.inverse_affine(np.array([np.pi / 2]), np.ones(1), np.zeros((1, 2)), center)
    turned = mnist.warp_images(image, matrices, offsets)[0]
    assert any(np.allclose(turned, np.rot90(image[0], k), atol=1e-5) for k in (1, 3))


def test_infinitemnist_without_transforms_pairs_same_class_images():
    images, labels = toy_digits()
    (view1, view2), chunk_labels = mnist.infinitemnist_chunk(
        images,
        labels,
        0,
        40,
        seed=3,
        warp=STILL,
    )
    sources, partners = row_index(images, view1), row_index(images, view2)
    np.testing.assert_array_equal(labels[sources], chunk_labels)
    np.testing.assert_array_equal(labels[partners], chunk_labels)
    assert (sources != partners).all()


def test_infinitemnist_chunks_are_seeded_independent_and_bounded():
    images, labels = toy_digits()
    chunks = list(mnist.infinitemnist_chunks(images, labels, n_samples=25, chunk_size=10, seed=4))
    assert [c[1].shape[0] for c in chunks] == [10, 10, 5]
    alone = mnist.infinitemnist_chunk(images, labels, 2, 5, seed=4)
    np.testing.assert_array_equal(alone[0][0], chunks[2][0][0])
    np.testing.assert_array_equal(alone[0][1], chunks[2][0][1])
    np.testing.assert_array_equal(alone[1], chunks[2][1])
    assert not np.array_equal(chunks[0][0][0], chunks[1][0][0])
    data = mnist.make_infinitemnist(images, labels, n_samples=25, chunk_size=10, seed=4)
    np.testing.assert_array_equal(data.views[0][20:], chunks[2][0][0])
    assert data.n_samples == 25 and data.view_dims == (64, 64) and data.name == "infinitemnist"
    assert (data.views[0] >= 0).all() and (data.views[0] <= 1).all()
    other = mnist.make_infinitemnist(images, labels, n_samples=25, chunk_size=10, seed=5)
    assert not np.array_equal(other.views[0], data.views[0])


def test_infinitemnist_rejects_non_square_images():
    with pytest.raises(ValueError, match="square"):
        mnist.infinitemnist_chunk(np.zeros((4, 10), np.float32), np.zeros(4, int), 0, 2)
