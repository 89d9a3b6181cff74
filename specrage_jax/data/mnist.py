"""MNIST from raw IDX files, and the paper's two MNIST-based multi-view sets.

NoisyMNIST: view 1 an image, view 2 another image of the same digit plus N(0, 0.2^2) noise.
InfiniteMNIST: the same pairing on small random affine transforms (rotation, scale, shift) of
MNIST images, generated chunk by chunk from (seed, chunk index) so memory stays bounded.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import ndimage

from specrage_jax.data.synthetic import same_class_partners
from specrage_jax.data.types import MultiViewData

IMAGES_MAGIC = 0x0803
LABELS_MAGIC = 0x0801
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MNIST_PARTS = (
    ("train", "images", "idx3"),
    ("train", "labels", "idx1"),
    ("t10k", "images", "idx3"),
    ("t10k", "labels", "idx1"),
)


# --- IDX files ---------------------------------------------------------------------------------


def read_file_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip-compressed (by content, not only by name)."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def read_idx(path: str | Path) -> np.ndarray:
    """An IDX array (big-endian header: two zero bytes, a type code, the number of dims, then
    one uint32 per dim); MNIST images have magic 0x0803 (uint8, 3 dims), labels 0x0801.

    Returns:
      The array in its stored shape and native-endian dtype, e.g. (60000, 28, 28) uint8.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such IDX file: {file}")
    raw = read_file_bytes(file)
    if len(raw) < 4:
        raise ValueError(f"{file}: {len(raw)} bytes is too short for an IDX header")
    magic = int.from_bytes(raw[:4], "big")
    type_code, n_dims = raw[2], raw[3]
    if raw[:2] != b"\x00\x00" or type_code not in IDX_DTYPES or n_dims == 0:
        raise ValueError(
            f"{file}: bad IDX magic 0x{magic:08x}; expected 0x{IMAGES_MAGIC:08x} (images) or "
            f"0x{LABELS_MAGIC:08x} (labels), or another known type code {sorted(IDX_DTYPES)}"
        )
    header_size = 4 + 4 * n_dims
    if len(raw) < header_size:
        raise ValueError(f"{file}: header declares {n_dims} dims but the file has only {len(raw)} bytes")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(n_dims))
    dtype = np.dtype(IDX_DTYPES[type_code])
    expected = header_size + int(np.prod(shape)) * dtype.itemsize
    if len(raw) != expected:
        raise ValueError(
            f"{file}: header says shape {shape} of {dtype.name} ({expected} bytes with the header), "
            f"the file has {len(raw)} bytes"
        )
    data = np.frombuffer(raw, dtype=dtype, offset=header_size).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def mnist_file_candidates(data_dir: Path, split: str, kind: str, idx: str) -> list[Path]:
    """Where one MNIST file may be: data_dir/mnist/ then data_dir/, named with `.` or `-` before
    idx (train-images.idx3-ubyte, train-images-idx3-ubyte), plain or .gz."""
    names = [f"{split}-{kind}.{idx}-ubyte", f"{split}-{kind}-{idx}-ubyte"]
    names += [name + ".gz" for name in names]
    return [folder / name for folder in (data_dir / "mnist", data_dir) for name in names]


def find_mnist_file(data_dir: Path, split: str, kind: str, idx: str) -> Path:
    """The first existing candidate; FileNotFoundError listing the names and folders looked at."""
    candidates = mnist_file_candidates(data_dir, split, kind, idx)
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        names = sorted({c.name for c in candidates})
        raise FileNotFoundError(
            f"MNIST file {split}-{kind}.{idx}-ubyte not found: looked for {', '.join(names)} "
            f"in {data_dir / 'mnist'} and {data_dir}"
        )
    return found


def load_mnist_arrays(data_dir: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """The 70,000 MNIST digits, train then t10k, from raw IDX files under data_dir(/mnist).

    Returns:
      images (70000, 784) float32 in [0, 1], labels (70000,) int64 in 0..9.
    """
    folder = Path(data_dir)
    images, labels = [], []
    for split in ("train", "t10k"):
        image_file = find_mnist_file(folder, split, "images", "idx3")
        label_file = find_mnist_file(folder, split, "labels", "idx1")
        split_images, split_labels = read_idx(image_file), read_idx(label_file)
        if split_images.ndim != 3 or split_images.dtype != np.uint8:
            raise ValueError(
                f"{image_file}: expected (n, rows, cols) uint8 images, got {split_images.shape} {split_images.dtype}"
            )
        if split_labels.ndim != 1 or split_labels.shape[0] != split_images.shape[0]:
            raise ValueError(
                f"{label_file}: expected ({split_images.shape[0]},) labels to match {image_file.name} "
                f"{split_images.shape}, got {split_labels.shape}"
            )
        images.append(split_images.reshape(split_images.shape[0], -1))
        labels.append(split_labels)
    dims = {a.shape[1] for a in images}
    if len(dims) != 1:
        raise ValueError(f"{folder}: train and t10k images differ in size ({[a.shape for a in images]})")
    pixels = np.concatenate(images).astype(np.float32) / np.float32(255.0)
    return pixels, np.concatenate(labels).astype(np.int64)


# --- NoisyMNIST --------------------------------------------------------------------------------


def check_images_and_labels(images: np.ndarray, labels: np.ndarray, *, what: str) -> tuple[np.ndarray, np.ndarray]:
    """images (n, d) as float32 and labels (n,) as int64, or ValueError naming the shapes."""
    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 2 or labels.ndim != 1 or images.shape[0] != labels.shape[0] or images.shape[0] == 0:
        raise ValueError(f"{what}: expected images (n, d) and labels (n,), got {images.shape} and {labels.shape}")
    return images.astype(np.float32, copy=False), labels.astype(np.int64)


def make_noisymnist(images: np.ndarray, labels: np.ndarray, *, seed: int, noise_std: float = 0.2) -> MultiViewData:
    """NoisyMNIST: view 1 = image i; view 2 = another image of the same class (seeded, uniform
    among the class) plus N(0, noise_std^2) per pixel, not clipped.

    Args:
      images: (n, d) pixels in [0, 1]; labels: (n,) digits.

    Returns:
      MultiViewData "noisymnist", views (n, d) "image" and (n, d) "same_class_noisy", labels (n,).
    """
    images, labels = check_images_and_labels(images, labels, what="noisymnist")
    if noise_std < 0:
        raise ValueError(f"noisymnist: noise_std must be >= 0, got {noise_std}")
    rng = np.random.default_rng(seed)
    partners = same_class_partners(labels, rng)
    noise = rng.standard_normal(images.shape, dtype=np.float32) * np.float32(noise_std)
    return MultiViewData(
        views=(images, images[partners] + noise),
        labels=labels,
        name="noisymnist",
        view_names=("image", "same_class_noisy"),
    )


# --- InfiniteMNIST -----------------------------------------------------------------------------


@dataclass(frozen=True)
class InfiniteMnistWarp:
    """The random affine warp of every InfiniteMNIST image, and view 2's pixel noise."""

    noise_std: float = 0.2
    max_shift: float = 2.0
    max_rotation_deg: float = 10.0
    max_scale: float = 0.1

    def __post_init__(self) -> None:
        if self.noise_std < 0 or self.max_shift < 0 or self.max_rotation_deg < 0 or not 0 <= self.max_scale < 1:
            raise ValueError(
                f"infinitemnist: need noise_std, max_shift, max_rotation_deg >= 0 and 0 <= max_scale < 1, got {self}"
            )


def random_affine_params(
    rng: np.random.Generator, count: int, warp: InfiniteMnistWarp
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count,) rotations in radians, (count,) scales in [1-max_scale, 1+max_scale], (count, 2)
    shifts in pixels (row, col), each uniform."""
    angles = np.deg2rad(rng.uniform(-warp.max_rotation_deg, warp.max_rotation_deg, size=count))
    scales = rng.uniform(1.0 - warp.max_scale, 1.0 + warp.max_scale, size=count)
    shifts = rng.uniform(-warp.max_shift, warp.max_shift, size=(count, 2))
    return angles, scales, shifts


def inverse_affine(
    angles: np.ndarray, scales: np.ndarray, shifts: np.ndarray, center: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For the forward map out = s R(angle) (in - c) + c + shift, the (B, 2, 2) matrices and
    (B, 2) offsets with in = M out + offset, as scipy.ndimage.affine_transform takes them."""
    cos, sin = np.cos(angles), np.sin(angles)
    rotation_t = np.stack([np.stack([cos, sin], -1), np.stack([-sin, cos], -1)], -2)  # R^T
    matrices = rotation_t / scales[:, None, None]
    offsets = center - np.einsum("bij,bj->bi", matrices, center + shifts)
    return matrices, offsets


def warp_images(images: np.ndarray, matrices: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Bilinear (order 1) affine warp of each (H, W) image, zero outside; (B, H, W) -> (B, H, W)."""
    out = np.empty_like(images)
    for b in range(images.shape[0]):
        ndimage.affine_transform(images[b], matrices[b], offsets[b], order=1, mode="constant", cval=0.0, output=out[b])
    return out


def image_side(n_pixels: int) -> int:
    """The side of a square image with n_pixels pixels, or ValueError."""
    side = int(round(np.sqrt(n_pixels)))
    if side * side != n_pixels:
        raise ValueError(f"infinitemnist: images must be square, got {n_pixels} pixels per row")
    return side


def chunk_rng(seed: int, chunk_index: int) -> np.random.Generator:
    """The generator of one chunk: SeedSequence(seed).spawn(...)[chunk_index], made directly."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(chunk_index,)))


def class_partner_sampler(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, class_start, class_count, rank): samples sorted by class, each class's start and
    size in that order, and each sample's position within its class, for `same_class_other`."""
    order = np.argsort(labels, kind="stable")
    classes, class_start, class_count = np.unique(labels[order], return_index=True, return_counts=True)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size) - np.repeat(class_start, class_count)
    class_index = np.searchsorted(classes, labels)
    return order, class_start[class_index], class_count[class_index], rank


def same_class_other(
    sources: np.ndarray, sampler: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], rng: np.random.Generator
) -> np.ndarray:
    """(m,) for each source index, another sample of its class, uniform (itself if alone)."""
    order, start, count, rank = sampler
    shift = rng.integers(1, np.maximum(count[sources], 2))
    return order[start[sources] + (rank[sources] + shift) % count[sources]]


def infinitemnist_chunk(
    images: np.ndarray,
    labels: np.ndarray,
    chunk_index: int,
    size: int,
    *,
    seed: int = 0,
    warp: InfiniteMnistWarp = InfiniteMnistWarp(),
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Chunk `chunk_index` of InfiniteMNIST, drawn from (seed, chunk_index) alone.

    Sample j: a random MNIST image under a random affine transform; view 2 a different random
    image of the same class under its own transform, plus N(0, noise_std^2).

    Returns:
      ((view1 (size, d), view2 (size, d)) float32, labels (size,) int64).
    """
    images, labels = check_images_and_labels(images, labels, what="infinitemnist")
    side = image_side(images.shape[1])
    rng = chunk_rng(seed, chunk_index)
    sources = rng.integers(0, images.shape[0], size=size)
    partners = same_class_other(sources, class_partner_sampler(labels), rng)
    center = np.full(2, (side - 1) / 2.0)
    pairs = np.concatenate([sources, partners])
    matrices, offsets = inverse_affine(
        *random_affine_params(rng, 2 * size, warp),
        center,
    )
    warped = warp_images(images[pairs].reshape(-1, side, side), matrices, offsets).reshape(2 * size, -1)
    noise = rng.standard_normal((size, images.shape[1]), dtype=np.float32) * np.float32(warp.noise_std)
    return (warped[:size], warped[size:] + noise), labels[sources]


def infinitemnist_chunks(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    n_samples: int = 1_000_000,
    chunk_size: int = 50_000,
    seed: int = 0,
    warp: InfiniteMnistWarp = InfiniteMnistWarp(),
) -> Iterator[tuple[tuple[np.ndarray, np.ndarray], np.ndarray]]:
    """InfiniteMNIST in ceil(n_samples / chunk_size) chunks ((view1, view2), labels), each
    `chunk_size` long but the last; chunk i is `infinitemnist_chunk(..., i, ...)`, independent of
    the others, so a chunk generated twice with the same seed is identical."""
    if n_samples < 1 or chunk_size < 1:
        raise ValueError(f"infinitemnist: need n_samples >= 1 and chunk_size >= 1, got {n_samples}, {chunk_size}")
    for chunk_index, start in enumerate(range(0, n_samples, chunk_size)):
        yield infinitemnist_chunk(
            images,
            labels,
            chunk_index,
            min(chunk_size, n_samples - start),
            seed=seed,
            warp=warp,
        )


def make_infinitemnist(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    n_samples: int,
    seed: int,
    chunk_size: int = 50_000,
    warp: InfiniteMnistWarp = InfiniteMnistWarp(),
) -> MultiViewData:
    """All chunks of `infinitemnist_chunks` in one dataset (for moderate n: 2 x n x d float32).

    Returns:
      MultiViewData "infinitemnist", views (n, d) "transformed" and (n, d)
      "same_class_transformed_noisy", labels (n,).
    """
    chunks = list(
        infinitemnist_chunks(
            images,
            labels,
            n_samples=n_samples,
            chunk_size=chunk_size,
            seed=seed,
            warp=warp,
        )
    )
    views = tuple(np.concatenate([chunk[0][v] for chunk in chunks]) for v in range(2))
    return MultiViewData(
        views=views,
        labels=np.concatenate([chunk[1] for chunk in chunks]),
        name="infinitemnist",
        view_names=("transformed", "same_class_transformed_noisy"),
    )
