"""specrage embed: read an input file's views (and a mask), embed them with SpecRaGE.load(DIR),
write the embedding atomically."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specrage_jax.cli.output import one_line


def read_input_views(
    path: str | Path, expected_dims: Sequence[int], views: Sequence[int] | None = None
) -> tuple[np.ndarray, ...]:
    """The views of an embedding input file, samples first: an .npz with view_0 ... (labels not
    needed) or a multi-view .mat (any layout ``data.loaders`` reads). A view stored features-first
    is transposed when only its first dimension matches the model's input width.

    Raises:
      FileNotFoundError, ValueError: naming the file and, for a wrong shape, the view.
    """
    from specrage_jax.data.loaders import (
        dense_float32,
        find_view_sources,
        npz_view_keys,
        read_mat_variables,
        select_views,
    )

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such input file: {file}")
    suffix = file.suffix.lower()
    if suffix == ".npz":
        with np.load(file, allow_pickle=False) as archive:
            keys = npz_view_keys(archive.files)
            if not keys:
                raise ValueError(f"{file}: no views found; expected keys view_0, view_1, ...; found {archive.files}")
            arrays = [archive[key] for key in keys]
    elif suffix == ".mat":
        arrays = [source.array for source in find_view_sources(read_mat_variables(file), None, file=str(file))]
    else:
        raise ValueError(f"{file}: unknown input file type {suffix!r}; expected .npz or .mat")
    chosen = select_views(len(arrays), views, file=str(file))
    arrays = [arrays[v] for v in chosen]
    if len(arrays) != len(expected_dims):
        raise ValueError(
            f"{file}: {len(arrays)} views, the model was trained on {len(expected_dims)} "
            f"(input widths {list(expected_dims)}); pick views with --views"
        )
    oriented = []
    for v, (array, dim) in enumerate(zip(arrays, expected_dims)):
        if array.ndim != 2:
            raise ValueError(f"{file}: view {v} must be 2-D (n_samples, n_features), got shape {array.shape}")
        if array.shape[1] != dim and array.shape[0] == dim:
            array = array.T
        if array.shape[1] != dim:
            raise ValueError(f"{file}: view {v} has shape {tuple(array.shape)}; the model expects {dim} features")
        oriented.append(dense_float32(array))
    return tuple(oriented)


def save_npy_atomic(path: str | Path, array: np.ndarray) -> None:
    """numpy.save through a temporary file and a rename (no torn file on a crash)."""
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def read_mask(path: str | None, n_samples: int, n_views: int) -> np.ndarray | None:
    """--mask FILE.npy: an (n, V) boolean array, True = view present (None without the option)."""
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such mask file: {file}")
    mask = np.load(file, allow_pickle=False)
    if mask.shape != (n_samples, n_views) or mask.dtype != np.bool_:
        raise ValueError(
            f"{file}: the mask must be a boolean array of shape (n_samples, n_views) = "
            f"{(n_samples, n_views)}, got {mask.dtype} {mask.shape}"
        )
    return mask


def run_embed(args: argparse.Namespace) -> int:
    from specrage_jax.api.estimator import SpecRaGE

    try:
        views = None if args.views is None else [int(v) for v in args.views.split(",") if v.strip()]
        model = SpecRaGE.load(args.checkpoint)
        inputs = read_input_views(args.input, model.view_dims_, views)
        mask = read_mask(args.mask, inputs[0].shape[0], len(inputs))
        y, weights = model._embed(list(inputs), mask, batch_size=args.batch_size)
    except (ValueError, FileNotFoundError) as err:  # CheckpointError is a ValueError
        if args.debug:
            raise
        print(f"specrage: {one_line(err)}", file=sys.stderr)
        return 2
    save_npy_atomic(args.output, y)
    if args.weights:
        save_npy_atomic(args.weights, weights)
    print(f"wrote {args.output} ({y.shape[0]} x {y.shape[1]})" + (f" and {args.weights}" if args.weights else ""))
    return 0
