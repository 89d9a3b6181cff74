"""Multi-view datasets, splits and per-view preprocessing (NumPy in, NumPy out)."""

from __future__ import annotations

from specrage_jax.data.lazy import MemmapRows, StreamedViews, is_streamed
from specrage_jax.data.loaders import (
    labels_to_indices,
    load_file,
    load_mat,
    load_npz,
    read_mat_variables,
)
from specrage_jax.data.mnist import (
    InfiniteMnistWarp,
    infinitemnist_chunk,
    infinitemnist_chunks,
    load_mnist_arrays,
    make_infinitemnist,
    make_noisymnist,
    read_idx,
)
from specrage_jax.data.preprocess import (
    ViewScaler,
    apply_view_scalers,
    fit_view_scalers,
)
from specrage_jax.data.registry import (
    dataset_names,
    dataset_rows,
    is_dataset_name,
    load_dataset,
    open_streamed_dataset,
    parse_dataset_name,
)
from specrage_jax.data.splits import SplitIndices, split_indices
from specrage_jax.data.stream import MemmapViews, open_views_memmap, write_views_memmap
from specrage_jax.data.stream_batches import (
    map_views_in_chunks,
    memmap_batches,
    prefetch_to_device,
    random_batch_indices,
)
from specrage_jax.data.synthetic import make_blobs_views, make_digits_views
from specrage_jax.data.types import MultiViewData

__all__ = [
    "MemmapRows",
    "MemmapViews",
    "MultiViewData",
    "SplitIndices",
    "StreamedViews",
    "ViewScaler",
    "apply_view_scalers",
    "dataset_names",
    "dataset_rows",
    "fit_view_scalers",
    "InfiniteMnistWarp",
    "infinitemnist_chunk",
    "infinitemnist_chunks",
    "is_dataset_name",
    "is_streamed",
    "labels_to_indices",
    "load_dataset",
    "load_file",
    "load_mat",
    "load_mnist_arrays",
    "load_npz",
    "make_blobs_views",
    "make_digits_views",
    "make_infinitemnist",
    "make_noisymnist",
    "map_views_in_chunks",
    "memmap_batches",
    "open_streamed_dataset",
    "open_views_memmap",
    "parse_dataset_name",
    "prefetch_to_device",
    "random_batch_indices",
    "read_idx",
    "read_mat_variables",
    "split_indices",
    "write_views_memmap",
]
