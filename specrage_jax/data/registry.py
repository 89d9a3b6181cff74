"""Datasets by name."""

from __future__ import annotations

import os
from typing import Callable

from specrage_jax.data.synthetic import make_blobs_views, make_digits_views
from specrage_jax.data.types import MultiViewData

DATA_DIR_ENV = "SPECRAGE_DATA"


def _builders() -> dict[str, Callable[[int, str | None], MultiViewData]]:
    """Name -> builder(seed, data_dir); a fresh dict each call, so nothing global to mutate."""
    return {
        "blobs": lambda seed, data_dir: make_blobs_views(seed=seed),
        "digits": lambda seed, data_dir: make_digits_views(seed=seed),
    }


def dataset_names() -> tuple[str, ...]:
    """The names `load_dataset` knows."""
    return tuple(_builders())


def resolve_data_dir(data_dir: str | None) -> str | None:
    """`data_dir` if given, else the SPECRAGE_DATA environment variable, else None."""
    return data_dir if data_dir is not None else os.environ.get(DATA_DIR_ENV)


def load_dataset(name: str, *, seed: int = 0, data_dir: str | None = None) -> MultiViewData:
    """Builds or reads the dataset `name` (one of `dataset_names()`).

    data_dir: where real datasets live (default: $SPECRAGE_DATA); the synthetic ones ignore it.
    """
    builders = _builders()
    if name not in builders:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(builders)}")
    return builders[name](seed, resolve_data_dir(data_dir))
