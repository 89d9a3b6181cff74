"""Datasets by name: synthetic ones, the paper's real benchmarks, and any file (`file:PATH`).

Names: blobs, digits, handwritten, bdgp, noisymnist, infinitemnist (or `infinitemnist:N` for
N samples), `file:PATH` or `file:PATH#0,2` (a .mat/.npz file, optionally a subset of views), and
`memmap:DIR` (a directory of per-view .npy files written by `data.stream.write_views_memmap`).
Real datasets are read from the data directory: the `data_dir` argument, else $SPECRAGE_DATA.

Streaming (`open_streamed_dataset`): infinitemnist[:N] and memmap:DIR can also be opened as
memory-mapped files read on demand (`data.lazy.StreamedViews`) instead of arrays in RAM.
InfiniteMNIST is then generated once, chunk by chunk, into a cache directory
(`infinitemnist_cache_path`) and reused while its recorded parameters and CRC32s match.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from specrage_jax.data.lazy import StreamedViews, streamed_labels
from specrage_jax.data.loaders import load_file, load_mat
from specrage_jax.data.mnist import (
    InfiniteMnistWarp,
    infinitemnist_chunks,
    load_mnist_arrays,
    make_infinitemnist,
    make_noisymnist,
)
from specrage_jax.data.stream import META_FILE, open_views_memmap
from specrage_jax.data.stream_cache import build_views_cache
from specrage_jax.data.synthetic import make_blobs_views, make_digits_views
from specrage_jax.data.types import MultiViewData

DATA_DIR_ENV = "SPECRAGE_DATA"
INFINITEMNIST_DEFAULT_SAMPLES = 1_000_000
INFINITEMNIST_CHUNK = 50_000  # make_infinitemnist's chunk size: chunk i is drawn from (seed, i)
INFINITEMNIST_VIEW_NAMES = ("transformed", "same_class_transformed_noisy")
CACHE_SUBDIR = "specrage_cache"
CACHE_FORMAT_VERSION = 1
STREAMABLE = ("infinitemnist", "memmap")
MNIST_FILES = ("train-images.idx3-ubyte", "train-labels.idx1-ubyte", "t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte")


@dataclass(frozen=True)
class DatasetRequest:
    """A parsed dataset name: `base` (e.g. "infinitemnist", "file"), and the options it carries."""

    base: str
    n_samples: int | None = None
    path: str | None = None
    views: tuple[int, ...] | None = None

    @property
    def streamable(self) -> bool:
        """Whether ``open_streamed_dataset`` can open it from disk (infinitemnist, memmap:DIR)."""
        return self.base in STREAMABLE


def resolve_data_dir(data_dir: str | None) -> str | None:
    """`data_dir` if given, else the SPECRAGE_DATA environment variable, else None."""
    return data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)


def missing_data_message(dataset: str, needs: str, data_dir: str | None, *, plural: bool = False) -> str:
    """Says exactly which file(s) to put where."""
    it = "them" if plural else "it"
    if data_dir is None:
        return (
            f"{dataset} needs {needs}: no data directory is set; put {it} in a folder and pass --data-dir "
            f"(data_dir=...) / set {DATA_DIR_ENV} to that folder"
        )
    return f"{dataset} needs {needs}: put {it} in {data_dir} or pass --data-dir / set {DATA_DIR_ENV}"


def required_file(dataset: str, file_name: str, data_dir: str | None) -> Path:
    """data_dir / file_name, or FileNotFoundError saying where to put it."""
    if data_dir is not None and (Path(data_dir) / file_name).is_file():
        return Path(data_dir) / file_name
    raise FileNotFoundError(missing_data_message(dataset, file_name, data_dir))


def load_handwritten(data_dir: str | None) -> MultiViewData:
    """UCI handwritten: views pix (2000, 240) and fac/profile (2000, 216) = cells 0 and 2 of
    handwritten.mat's `X`; labels (2000,) 0..9, 200 per class."""
    data = load_mat(required_file("handwritten", "handwritten.mat", data_dir), views=(0, 2))
    return replace(data, name="handwritten")


def load_bdgp(data_dir: str | None) -> MultiViewData:
    """BDGP: BDGP.mat's `data` cell, stored features x samples: views visual (2500, 1750) and
    textual (2500, 79); labels `truth` 1..5 -> (2500,) 0..4, 500 per class."""
    data = load_mat(required_file("bdgp", "BDGP.mat", data_dir))
    if data.view_dims != (1750, 79):
        raise ValueError(f"{data_dir}/BDGP.mat: expected views of 1750 and 79 features, found {data.view_dims}")
    return replace(data, name="bdgp", view_names=("visual", "textual"))


def mnist_arrays(dataset: str, data_dir: str | None) -> tuple[np.ndarray, np.ndarray]:
    """load_mnist_arrays(data_dir), or FileNotFoundError naming the four IDX files and the folder."""
    needs = "the MNIST IDX files " + ", ".join(MNIST_FILES)
    if data_dir is None:
        raise FileNotFoundError(missing_data_message(dataset, needs, None, plural=True))
    try:
        return load_mnist_arrays(data_dir)
    except FileNotFoundError as error:
        where = f"{Path(data_dir) / 'mnist'} (or {data_dir})"
        raise FileNotFoundError(f"{missing_data_message(dataset, needs, where, plural=True)} [{error}]") from error


def load_noisymnist(seed: int, data_dir: str | None) -> MultiViewData:
    """NoisyMNIST from the 70,000 MNIST digits: views (70000, 784) x 2, labels 0..9."""
    return make_noisymnist(*mnist_arrays("noisymnist", data_dir), seed=seed)


def load_infinitemnist(n_samples: int, seed: int, data_dir: str | None) -> MultiViewData:
    """InfiniteMNIST with n_samples affine-transformed pairs: views (n, 784) x 2, labels 0..9."""
    return make_infinitemnist(*mnist_arrays("infinitemnist", data_dir), n_samples=n_samples, seed=seed)


def load_named_file(path: str, views: tuple[int, ...] | None, data_dir: str | None) -> MultiViewData:
    """A .mat/.npz file: PATH as given, else relative to the data directory."""
    file = Path(path).expanduser()
    if not file.is_file() and not file.is_absolute() and data_dir is not None and (Path(data_dir) / file).is_file():
        file = Path(data_dir) / file
    if not file.is_file():
        tried = f" (also looked in {data_dir})" if data_dir is not None and not file.is_absolute() else ""
        raise FileNotFoundError(f"file:{path}: no such file {file}{tried}")
    return load_file(file, views=views)


def memmap_path(path: str, data_dir: str | None) -> Path:
    """DIR as given, else relative to the data directory; FileNotFoundError when neither holds meta.json."""
    folder = Path(path).expanduser()
    beside_data = None if data_dir is None or folder.is_absolute() else Path(data_dir) / folder
    if not (folder / META_FILE).is_file() and beside_data is not None and (beside_data / META_FILE).is_file():
        folder = beside_data
    if not (folder / META_FILE).is_file():
        raise FileNotFoundError(
            f"memmap:{path}: {folder / META_FILE} not found; memmap:DIR needs a directory "
            f"written completely by write_views_memmap"
        )
    return folder


def load_memmap_dir(path: str, data_dir: str | None) -> MultiViewData:
    """memmap:DIR read into memory (the in-RAM path; ``open_streamed_dataset`` streams it)."""
    folder = memmap_path(path, data_dir)
    with open_views_memmap(folder) as source:
        labels = streamed_labels(source, what=f"memmap:{path}")
        views = tuple(source.rows(slice(None)))
    return MultiViewData(
        views=views, labels=labels, name=f"memmap:{path}", view_names=tuple(f"view{v}" for v in range(len(views)))
    )


def _builders() -> dict[str, Callable[[DatasetRequest, int, str | None], MultiViewData]]:
    """Name -> builder(request, seed, data_dir); a fresh dict each call, so nothing global to mutate."""
    return {
        "blobs": lambda request, seed, data_dir: make_blobs_views(seed=seed),
        "digits": lambda request, seed, data_dir: make_digits_views(seed=seed),
        "handwritten": lambda request, seed, data_dir: load_handwritten(data_dir),
        "bdgp": lambda request, seed, data_dir: load_bdgp(data_dir),
        "noisymnist": lambda request, seed, data_dir: load_noisymnist(seed, data_dir),
        "infinitemnist": lambda request, seed, data_dir: load_infinitemnist(
            request.n_samples or INFINITEMNIST_DEFAULT_SAMPLES, seed, data_dir
        ),
    }


def dataset_names() -> tuple[str, ...]:
    """The named datasets `load_dataset` knows (it also takes `infinitemnist:N` and `file:PATH`)."""
    return tuple(_builders())


def parse_dataset_name(name: str) -> DatasetRequest:
    """Parses "infinitemnist:20000", "file:data/x.mat#0,2" or a plain name; ValueError if unknown."""
    if name.startswith("file:"):
        path, _, view_text = name[len("file:") :].partition("#")
        if not path:
            raise ValueError(f"dataset {name!r}: file: needs a path, e.g. file:data/handwritten.mat#0,2")
        views = None
        if view_text:
            try:
                views = tuple(int(part) for part in view_text.split(","))
            except ValueError:
                raise ValueError(
                    f"dataset {name!r}: views after '#' must be comma-separated integers, e.g. #0,2"
                ) from None
        return DatasetRequest(base="file", path=path, views=views)
    if name.startswith("memmap:"):
        path = name[len("memmap:") :]
        if not path:
            raise ValueError(f"dataset {name!r}: memmap: needs a directory, e.g. memmap:data/imnist_1m")
        return DatasetRequest(base="memmap", path=path)
    base, colon, count = name.partition(":")
    if base == "infinitemnist" and colon:
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"dataset {name!r}: infinitemnist:N needs a positive integer N, e.g. infinitemnist:20000")
        return DatasetRequest(base=base, n_samples=int(count))
    if name not in _builders():
        raise ValueError(
            f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}, infinitemnist:N, "
            f"file:PATH[#0,2], memmap:DIR"
        )
    return DatasetRequest(base=name)


def is_dataset_name(name: str) -> bool:
    """True for every name `load_dataset` accepts (named, infinitemnist:N, file:PATH[#views])."""
    try:
        parse_dataset_name(name)
    except ValueError:
        return False
    return True


def load_dataset(name: str, *, seed: int = 0, data_dir: str | None = None) -> MultiViewData:
    """Builds or reads the dataset `name` (see the module docstring for the accepted names).

    data_dir: where real datasets live (default: $SPECRAGE_DATA); the synthetic ones ignore it.
    Raises FileNotFoundError saying which file to put where when a real dataset is missing.
    """
    request = parse_dataset_name(name)
    data_dir = resolve_data_dir(data_dir)
    if request.base == "file":
        assert request.path is not None  # parse_dataset_name sets the path of file:PATH
        return load_named_file(request.path, request.views, data_dir)
    if request.base == "memmap":
        assert request.path is not None  # parse_dataset_name sets the path of memmap:DIR
        return load_memmap_dir(request.path, data_dir)
    return _builders()[request.base](request, seed, data_dir)


# --- streaming ----------------------------------------------------------------------------------


def dataset_rows(name: str, data_dir: str | None = None) -> int | None:
    """The number of samples of a streamable dataset without reading it (infinitemnist[:N]: N;
    memmap:DIR: meta.json's n); None for the others."""
    request = parse_dataset_name(name)
    if request.base == "infinitemnist":
        return request.n_samples or INFINITEMNIST_DEFAULT_SAMPLES
    if request.base == "memmap":
        assert request.path is not None  # parse_dataset_name sets the path of memmap:DIR
        folder = memmap_path(request.path, resolve_data_dir(data_dir))
        return int(json.loads((folder / META_FILE).read_text())["n"])
    return None


def arrays_crc32(*arrays: np.ndarray) -> str:
    """CRC32 (8 hex digits) over the bytes of the arrays in turn."""
    crc = 0
    for array in arrays:
        crc = zlib.crc32(np.ascontiguousarray(array).tobytes(), crc)
    return f"{crc:08x}"


def infinitemnist_source(
    n_samples: int, seed: int, images: np.ndarray, labels: np.ndarray, warp: InfiniteMnistWarp
) -> dict:
    """Everything an InfiniteMNIST cache's content depends on (recorded in its meta.json)."""
    return {
        "dataset": "infinitemnist",
        "cache_format": CACHE_FORMAT_VERSION,
        "n_samples": int(n_samples),
        "seed": int(seed),
        "chunk_size": INFINITEMNIST_CHUNK,
        "warp": asdict(warp),
        "mnist_crc32": arrays_crc32(images, labels),
        "mnist_shape": list(images.shape),
    }


def infinitemnist_cache_path(cache_dir: str | Path, source: dict) -> Path:
    """CACHE_DIR/infinitemnist-n{N}-seed{S}-{hash of the source parameters}."""
    digest = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:12]
    return Path(cache_dir) / f"infinitemnist-n{source['n_samples']}-seed{source['seed']}-{digest}"


def default_cache_dir(data_dir: str | None) -> Path:
    """DATA_DIR/specrage_cache; FileNotFoundError when no data directory is set."""
    if data_dir is None:
        raise FileNotFoundError(
            f"streaming InfiniteMNIST needs a cache directory: pass --cache-dir (cache_dir=...) "
            f"or a data directory (--data-dir / ${DATA_DIR_ENV}; the cache goes to "
            f"DATA_DIR/{CACHE_SUBDIR})"
        )
    return Path(data_dir) / CACHE_SUBDIR


def open_infinitemnist_cache(
    n_samples: int,
    seed: int,
    data_dir: str | None,
    cache_dir: str | Path | None,
    *,
    warp: InfiniteMnistWarp | None = None,
    verify_crc: bool = True,
) -> StreamedViews:
    """InfiniteMNIST (n_samples pairs, the same rows as ``make_infinitemnist``) from its on-disk
    cache, generated chunk by chunk (one 50k-row chunk in memory) when missing or unusable.
    ``warp`` None: the default ``InfiniteMnistWarp()``."""
    warp = warp if warp is not None else InfiniteMnistWarp()
    images, labels = mnist_arrays("infinitemnist", data_dir)
    source = infinitemnist_source(n_samples, seed, images, labels, warp)
    folder = infinitemnist_cache_path(cache_dir if cache_dir is not None else default_cache_dir(data_dir), source)
    opened, _ = build_views_cache(
        folder,
        source,
        lambda: infinitemnist_chunks(
            images, labels, n_samples=n_samples, chunk_size=INFINITEMNIST_CHUNK, seed=seed, warp=warp
        ),
        n_samples,
        verify_crc=verify_crc,
    )
    return StreamedViews(
        source=opened,
        labels=streamed_labels(opened, what=str(folder)),
        name="infinitemnist",
        view_names=INFINITEMNIST_VIEW_NAMES,
    )


def open_memmap_dataset(path: str, data_dir: str | None) -> StreamedViews:
    """memmap:DIR opened for streaming (labels required)."""
    source = open_views_memmap(memmap_path(path, data_dir))
    try:
        labels = streamed_labels(source, what=f"memmap:{path}")
    except ValueError:
        source.close()
        raise
    return StreamedViews(
        source=source,
        labels=labels,
        name=f"memmap:{path}",
        view_names=tuple(f"view{v}" for v in range(len(source.views))),
    )


def open_streamed_dataset(
    name: str, *, seed: int = 0, data_dir: str | None = None, cache_dir: str | Path | None = None
) -> StreamedViews:
    """The dataset ``name`` as memory-mapped files read on demand (infinitemnist[:N], memmap:DIR).

    infinitemnist is generated into ``cache_dir`` (default DATA_DIR/specrage_cache) once and reused.
    Close it (``.close()``) when done. Raises ValueError for a dataset that cannot be streamed.
    """
    request = parse_dataset_name(name)
    data_dir = resolve_data_dir(data_dir)
    if request.base == "infinitemnist":
        return open_infinitemnist_cache(request.n_samples or INFINITEMNIST_DEFAULT_SAMPLES, seed, data_dir, cache_dir)
    if request.base == "memmap":
        assert request.path is not None  # parse_dataset_name sets the path of memmap:DIR
        return open_memmap_dataset(request.path, data_dir)
    raise ValueError(
        f"dataset {name!r} cannot be streamed from disk; streaming is for infinitemnist[:N] and "
        f"memmap:DIR (it fits in memory: run it without streaming)"
    )
