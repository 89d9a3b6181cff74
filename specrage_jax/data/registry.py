"""Datasets by name: synthetic ones, the paper's real benchmarks, and any file (`file:PATH`).

Names: blobs, digits, handwritten, bdgp, noisymnist, infinitemnist (or `infinitemnist:N` for
N samples), and `file:PATH` or `file:PATH#0,2` (a .mat/.npz file, optionally a subset of views).
Real datasets are read from the data directory: the `data_dir` argument, else $SPECRAGE_DATA.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
from specrage_jax.data.loaders import load_file, load_mat
from specrage_jax.data.mnist import load_mnist_arrays, make_infinitemnist, make_noisymnist
from specrage_jax.data.synthetic import make_blobs_views, make_digits_views
from specrage_jax.data.types import MultiViewData

DATA_DIR_ENV = "SPECRAGE_DATA"
INFINITEMNIST_DEFAULT_SAMPLES = 1_000_000
MNIST_FILES = ("train-images.idx3-ubyte", "train-labels.idx1-ubyte", "t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte")


@dataclass(frozen=True)
class DatasetRequest:
    """A parsed dataset name: `base` (e.g. "infinitemnist", "file"), and the options it carries."""

    base: str
    n_samples: int | None = None
    path: str | None = None
    views: tuple[int, ...] | None = None


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
    base, colon, count = name.partition(":")
    if base == "infinitemnist" and colon:
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"dataset {name!r}: infinitemnist:N needs a positive integer N, e.g. infinitemnist:20000")
        return DatasetRequest(base=base, n_samples=int(count))
    if name not in _builders():
        raise ValueError(
            f"unknown dataset {name!r}; known datasets: {', '.join(dataset_names())}, infinitemnist:N, file:PATH[#0,2]"
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
        return load_named_file(request.path, request.views, data_dir)
    return _builders()[request.base](request, seed, data_dir)
