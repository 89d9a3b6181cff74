"""Multi-view datasets from `.mat` (MATLAB v5 and v7.3/HDF5) and `.npz` files.

A `.mat` file is first read into plain MATLAB-oriented values (a matrix as MATLAB shows it, a
cell as a list, a char array as a str), whatever its version; the layout is then resolved
from those values: which key holds the views, which the labels, and how each view is oriented.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse

from specrage_jax.data.types import MultiViewData
from specrage_jax.validation import with_missing_rows

CELL_VIEW_KEYS = ("X", "fea", "data", "Xs")
PER_VIEW_PREFIXES = ("X", "x", "view", "View", "fea", "data")
LABEL_KEYS = ("Y", "gt", "truth", "labels", "label", "y", "truelabel", "gnd")
VIEW_NAME_KEYS = ("feas", "view_names", "viewnames", "names")

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# HDF5 puts its superblock at 0 or after a user block of 512 * 2^k bytes; MATLAB v7.3 uses 512.
HDF5_SIGNATURE_OFFSETS = (0, 512, 1024, 2048)


@dataclass(frozen=True)
class ViewSource:
    """One view as found in a file: `where` says where ("cell 'X'[2]", "key 'X3'")."""

    where: str
    array: Any  # np.ndarray or scipy.sparse matrix, MATLAB orientation


# --- reading MATLAB values ---------------------------------------------------------------------


def is_hdf5_file(path: Path) -> bool:
    """True when the file carries the HDF5 signature (a MATLAB v7.3 file is HDF5)."""
    with open(path, "rb") as handle:
        head = handle.read(max(HDF5_SIGNATURE_OFFSETS) + len(HDF5_SIGNATURE))
    return any(head[o : o + len(HDF5_SIGNATURE)] == HDF5_SIGNATURE for o in HDF5_SIGNATURE_OFFSETS)


def _v5_value(value: Any) -> Any:
    """A scipy.io.loadmat value as a plain value: object arrays (cells) become lists, in MATLAB's
    column-major order; char arrays become str."""
    if scipy.sparse.issparse(value):
        return value
    array = np.asarray(value)
    if array.dtype == object:
        return [_v5_value(item) for item in array.ravel(order="F")]
    if array.dtype.kind == "U":
        return "".join(array.ravel(order="F").tolist())
    return array


def read_mat_v5(path: Path) -> dict[str, Any]:
    """Variables of a MATLAB v4/v5/v7 file as plain values (see `_v5_value`)."""
    raw = scipy.io.loadmat(str(path))
    return {key: _v5_value(value) for key, value in raw.items() if not key.startswith("__")}


def _hdf5_char(dataset: Any) -> str:
    """A MATLAB char array (uint16 code units, stored transposed) as a str."""
    codes = np.asarray(dataset[()]).T.ravel(order="F")
    return "".join(chr(int(c)) for c in codes)


def _hdf5_value(node: Any, h5file: Any) -> Any:
    """One MATLAB v7.3 value: HDF5 stores arrays transposed, a cell as a dataset of object
    references, a sparse matrix as a group (data, ir, jc) with a MATLAB_sparse row-count attribute."""
    import h5py

    attrs = node.attrs
    matlab_class = attrs.get("MATLAB_class", b"")
    matlab_class = matlab_class.decode() if isinstance(matlab_class, bytes) else str(matlab_class)
    if isinstance(node, h5py.Group):
        if "MATLAB_sparse" not in attrs:
            raise ValueError(f"HDF5 group {node.name!r} is not a MATLAB sparse matrix (structs are not supported)")
        n_rows = int(attrs["MATLAB_sparse"])
        jc = np.asarray(node["jc"][()], dtype=np.int64).ravel()
        ir = np.asarray(node["ir"][()], dtype=np.int64).ravel() if "ir" in node else np.zeros(0, np.int64)
        data = np.asarray(node["data"][()]).ravel() if "data" in node else np.zeros(0)
        return scipy.sparse.csc_matrix((data, ir, jc), shape=(n_rows, jc.size - 1))
    if int(attrs.get("MATLAB_empty", 0)):
        return np.zeros(tuple(int(d) for d in np.asarray(node[()]).ravel()[::-1]))
    if node.dtype == h5py.ref_dtype or matlab_class == "cell":
        refs = np.asarray(node[()])
        return [_hdf5_value(h5file[ref], h5file) for ref in refs.ravel(order="C")]
    if matlab_class == "char":
        return _hdf5_char(node)
    array = np.asarray(node[()]).T
    return array.astype(np.bool_) if matlab_class == "logical" else array


def read_mat_v73(path: Path) -> dict[str, Any]:
    """Variables of a MATLAB v7.3 (HDF5) file as plain MATLAB-oriented values; needs h5py."""
    try:
        import h5py
    except ImportError as error:
        raise ImportError(f"{path} is a MATLAB v7.3 (HDF5) file; reading it needs h5py (pip install h5py)") from error
    with h5py.File(path, "r") as h5file:
        return {key: _hdf5_value(h5file[key], h5file) for key in h5file.keys() if not key.startswith("#")}


def read_mat_variables(path: Path) -> dict[str, Any]:
    """Variables of any MATLAB file (v5 via scipy, v7.3 via h5py), as plain values."""
    if is_hdf5_file(path):
        return read_mat_v73(path)
    try:
        return read_mat_v5(path)
    except NotImplementedError:  # scipy's answer to a v7.3 header
        return read_mat_v73(path)


# --- resolving the layout ----------------------------------------------------------------------


def describe_variables(variables: Mapping[str, Any]) -> str:
    """ "key: shape dtype" for every variable, for error messages."""

    def describe(value: Any) -> str:
        if isinstance(value, list):
            inner = ", ".join(describe(item) for item in value[:8])
            return f"cell of {len(value)} [{inner}{', ...' if len(value) > 8 else ''}]"
        if isinstance(value, str):
            return f"str {value!r}"
        kind = "sparse " if scipy.sparse.issparse(value) else ""
        return f"{kind}{tuple(value.shape)} {value.dtype}"

    return "; ".join(f"{key}: {describe(value)}" for key, value in variables.items()) or "no variables"


def is_matrix(value: Any) -> bool:
    """True for a 2-D numeric dense or sparse matrix."""
    if scipy.sparse.issparse(value):
        return True
    return (
        isinstance(value, np.ndarray)
        and value.ndim == 2
        and (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_)
    )


def known_keys(variables: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """Keys of ``variables`` among ``names``: exact matches in the names' order, then those that
    match one only up to case (``GT``, ``Data``) in file order."""
    exact = [name for name in names if name in variables]
    folded = {name.lower() for name in names}
    return exact + [key for key in variables if key not in exact and key.lower() in folded]


def per_view_keys(variables: Mapping[str, Any], prefix: str) -> list[str]:
    """Keys `prefix1`, `prefix_2`, ... holding matrices, sorted by their number."""
    pattern = re.compile(rf"^{re.escape(prefix)}_?(\d+)$")
    numbered = [(int(m.group(1)), key) for key in variables if (m := pattern.match(key)) and is_matrix(variables[key])]
    return [key for _, key in sorted(numbered)]


def find_view_sources(variables: Mapping[str, Any], view_key: str | None, *, file: str) -> list[ViewSource]:
    """The views in file order: a cell under `view_key` or a known cell key, else numbered keys
    (X1, X2, ...; view1, ...), else a single matrix under a known cell key (one view)."""

    def from_cell(key: str) -> list[ViewSource]:
        cell = variables[key]
        bad = [i for i, item in enumerate(cell) if not is_matrix(item)]
        if bad or not cell:
            raise ValueError(
                f"{file}: cell {key!r} should hold one 2-D numeric matrix per view; entries {bad} do not "
                f"({describe_variables({key: cell})})"
            )
        return [ViewSource(f"cell {key!r}[{i}]", item) for i, item in enumerate(cell)]

    if view_key is not None:
        if view_key in variables and isinstance(variables[view_key], list):
            return from_cell(view_key)
        if view_key in variables and is_matrix(variables[view_key]):
            return [ViewSource(f"key {view_key!r}", variables[view_key])]
        keys = per_view_keys(variables, view_key)
        if keys:
            return [ViewSource(f"key {key!r}", variables[key]) for key in keys]
        raise ValueError(
            f"{file}: view_key {view_key!r} names no cell, matrix or numbered keys {view_key}1, {view_key}2, ...; "
            f"found {describe_variables(variables)}"
        )
    cell_keys = known_keys(variables, CELL_VIEW_KEYS)
    for key in cell_keys:
        if isinstance(variables[key], list):
            return from_cell(key)
    for prefix in PER_VIEW_PREFIXES:
        keys = per_view_keys(variables, prefix)
        if keys:
            return [ViewSource(f"key {key!r}", variables[key]) for key in keys]
    for key in cell_keys:
        if is_matrix(variables[key]):
            return [ViewSource(f"key {key!r}", variables[key])]
    raise ValueError(
        f"{file}: no views found; tried a cell under {', '.join(CELL_VIEW_KEYS)}, numbered keys "
        f"{', '.join(p + '1' for p in PER_VIEW_PREFIXES)}, ...; found {describe_variables(variables)} "
        f"(pass view_key= to name the key)"
    )


def find_labels(variables: Mapping[str, Any], label_key: str | None, *, file: str) -> tuple[str, np.ndarray]:
    """(key, raw labels flattened to (n,)) from `label_key` or the first known label key."""
    keys = (label_key,) if label_key is not None else LABEL_KEYS
    if label_key is not None:
        key = label_key if label_key in variables else None
    else:
        key = next(iter(known_keys(variables, LABEL_KEYS)), None)
    if key is None:
        raise ValueError(
            f"{file}: no labels found; tried keys {', '.join(keys)}; found {describe_variables(variables)} "
            f"(pass label_key= to name the key)"
        )
    value = variables[key]
    if isinstance(value, list):
        value = labels_from_cell(value, key, file=file)
    if isinstance(value, str):
        raise not_label_vector(key, value, file=file)
    raw = value.toarray() if scipy.sparse.issparse(value) else np.asarray(value)
    if raw.ndim > 2 or (raw.ndim == 2 and min(raw.shape) != 1 and raw.size > 0):
        raise ValueError(f"{file}: labels {key!r} must be (n,), (n, 1) or (1, n), got shape {raw.shape}")
    return key, raw.ravel()


def not_label_vector(key: str, value: Any, *, file: str) -> ValueError:
    """The error for labels ``key`` that hold neither numbers nor class names, showing ``value``."""
    shown = describe_variables({key: value})
    return ValueError(f"{file}: labels {key!r} must be a vector of numbers or class names, got {shown}")


def labels_from_cell(entries: list[Any], key: str, *, file: str) -> Any:
    """The labels of a cell: class names (a cellstr, one per sample) as an array of str, or the one
    label vector of a cell holding a copy per view (some files store the labels so); ValueError
    naming the entries that are not vectors or that disagree with the first."""
    if entries and all(isinstance(e, str) for e in entries):
        return np.asarray(entries, dtype=str)
    vectors = [np.asarray(e.toarray() if scipy.sparse.issparse(e) else e) for e in entries]
    if not vectors or any(isinstance(e, (list, str)) or v.dtype == object for e, v in zip(entries, vectors)):
        raise not_label_vector(key, entries, file=file)
    first = vectors[0].ravel()
    differ = [i for i, v in enumerate(vectors) if not np.array_equal(v.ravel(), first)]
    if differ:
        raise ValueError(
            f"{file}: labels {key!r} is a cell of {len(vectors)} label vectors and entries {differ} differ from "
            f"entry 0, so which one holds the labels is unclear; store one vector"
        )
    return vectors[0]


def labels_to_indices(raw_labels: np.ndarray, *, what: str = "labels") -> np.ndarray:
    """Maps arbitrary label values (n,) to 0..K-1 by sorted unique value; returns (n,) int64.

    Integer storage (MATLAB's uint8 labels) is widened to int64 first, so no value wraps.
    """
    raw = np.asarray(raw_labels)
    if raw.ndim != 1:
        raise ValueError(f"{what}: labels must be 1-D, got shape {raw.shape}")
    if raw.dtype == np.bool_ or np.issubdtype(raw.dtype, np.integer):
        raw = raw.astype(np.int64)
    elif np.issubdtype(raw.dtype, np.floating):
        if not np.all(np.isfinite(raw)):
            raise ValueError(f"{what}: labels hold {int((~np.isfinite(raw)).sum())} NaN or infinite values")
    elif raw.dtype.kind not in "US":
        raise ValueError(f"{what}: labels must be numbers or strings, got dtype {raw.dtype}")
    _, indices = np.unique(raw, return_inverse=True)
    return indices.reshape(-1).astype(np.int64)


def dense_float32(array: Any) -> np.ndarray:
    """A dense float32 copy of a dense or scipy-sparse matrix (integer storage converted)."""
    dense = array.toarray() if scipy.sparse.issparse(array) else np.asarray(array)
    return np.ascontiguousarray(dense, dtype=np.float32)


def orient_samples_first(array: Any, n_samples: int, *, where: str, file: str, all_shapes: str) -> Any:
    """The view as (n_samples, d): as stored when its first dimension is n (also when both are),
    transposed when only its second is; else ValueError naming the shapes."""
    rows, cols = array.shape
    if rows == n_samples:
        return array
    if cols == n_samples:
        return array.T
    raise ValueError(
        f"{file}: {where} has shape {(rows, cols)}; neither dimension matches the {n_samples} labels "
        f"(shapes found: {all_shapes})"
    )


def select_views(n_views: int, views: Sequence[int] | None, *, file: str) -> tuple[int, ...]:
    """The view indices to keep (all when `views` is None), checked against the V found."""
    if views is None:
        return tuple(range(n_views))
    chosen = tuple(int(v) for v in views)
    if not chosen:
        raise ValueError(f"{file}: views= selects no view")
    bad = [v for v in chosen if not 0 <= v < n_views]
    if bad:
        raise ValueError(f"{file}: views {bad} out of range; the file has {n_views} views (0..{n_views - 1})")
    return chosen


def find_view_names(variables: Mapping[str, Any], n_views: int) -> tuple[str, ...] | None:
    """Names from a `feas`-like cell of n_views strings, else None."""
    for key in VIEW_NAME_KEYS:
        value = variables.get(key)
        if isinstance(value, list) and len(value) == n_views and all(isinstance(v, str) for v in value):
            return tuple(value)
    return None


def assemble_views(
    sources: Sequence[ViewSource],
    raw_labels: np.ndarray,
    label_key: str,
    names: Sequence[str] | None,
    views: Sequence[int] | None,
    *,
    file: str,
    dataset_name: str,
    mask: Any = None,
) -> MultiViewData:
    """Selects, orients and densifies the views; maps labels to 0..K-1; a stored view mask
    (:func:`read_view_mask`) turns a missing view's row into NaN."""
    chosen = select_views(len(sources), views, file=file)
    n_samples = raw_labels.shape[0]
    all_shapes = ", ".join(
        [f"{s.where} {tuple(s.array.shape)}" for s in sources] + [f"labels {label_key!r} ({n_samples},)"]
    )
    arrays = tuple(
        dense_float32(
            orient_samples_first(sources[v].array, n_samples, where=sources[v].where, file=file, all_shapes=all_shapes)
        )
        for v in chosen
    )
    view_names = tuple(names[v] for v in chosen) if names is not None else tuple(f"view{v}" for v in chosen)
    labels = labels_to_indices(raw_labels, what=f"{file}: labels {label_key!r}")
    if mask is not None:
        arrays = with_missing_rows(
            arrays, read_view_mask(mask, n_samples, len(sources), file=file)[:, chosen], what=file
        )
    return MultiViewData(views=arrays, labels=labels, name=dataset_name, view_names=view_names)


MASK_KEYS = ("mask", "present", "observed")


def read_view_mask(raw: Any, n_samples: int, n_views: int, *, file: str) -> np.ndarray:
    """A stored missing-view mask as (n, V) bool, True = the sample has the view: samples x views
    or views x samples, boolean or 0/1 numbers.

    Raises:
      ValueError: naming the file, for any other shape or values.
    """
    array = np.asarray(raw.toarray() if hasattr(raw, "toarray") else raw)
    if array.shape == (n_views, n_samples) and array.shape != (n_samples, n_views):
        array = array.T
    if array.shape != (n_samples, n_views):
        raise ValueError(
            f"{file}: the view mask must be (n_samples, n_views) = {(n_samples, n_views)} (or transposed), "
            f"got {array.shape}"
        )
    if array.dtype != np.bool_:
        if not np.isin(array, (0, 1)).all():
            raise ValueError(f"{file}: the view mask must hold booleans or 0/1 (1 = view present), got other values")
        array = array.astype(bool)
    return array


def find_view_mask(variables: Mapping[str, Any]) -> Any:
    """The stored missing-view mask (the first of MASK_KEYS present), or None."""
    return next((variables[key] for key in MASK_KEYS if key in variables), None)


# --- public loaders ----------------------------------------------------------------------------


def _existing_file(path: str | Path) -> Path:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such data file: {file}")
    return file


def load_mat(
    path: str | Path,
    *,
    views: Sequence[int] | None = None,
    view_key: str | None = None,
    label_key: str | None = None,
) -> MultiViewData:
    """A multi-view dataset from a MATLAB file (v5/v7 via scipy, v7.3/HDF5 via h5py).

    Views: a cell under X / fea / data / Xs (or `view_key`), else numbered keys X1, X2, ...
    (x1, view1, ...). Each view may be stored samples x features or features x samples (decided
    from the label count; samples x features when both match), dense or sparse, any numeric type.
    Labels: the first of Y, gt, truth, labels, label, y, truelabel, gnd (or `label_key`), any
    shape (n,), (n, 1), (1, n) or a cell of one such vector per view (all equal), any values, mapped
    to 0..K-1 by sorted unique value.

    Args:
      views: indices of the views to keep, in that order (default all), e.g. (0, 2).

    Returns:
      MultiViewData named after the file's stem, views (n, d_v) float32, labels (n,) int64.
    """
    file = _existing_file(path)
    variables = read_mat_variables(file)
    sources = find_view_sources(variables, view_key, file=str(file))
    found_label_key, raw_labels = find_labels(variables, label_key, file=str(file))
    names = find_view_names(variables, len(sources))
    return assemble_views(
        sources,
        raw_labels,
        found_label_key,
        names,
        views,
        file=str(file),
        dataset_name=file.stem,
        mask=find_view_mask(variables),
    )


def npz_view_keys(keys: Sequence[str]) -> list[str]:
    """`view_0`, `view_1`, ... sorted by number."""
    numbered = [(int(m.group(1)), key) for key in keys if (m := re.fullmatch(r"view_(\d+)", key))]
    return [key for _, key in sorted(numbered)]


def read_npz_arrays(file: Path) -> dict[str, np.ndarray]:
    """Every array of an .npz; ValueError naming a key that holds Python objects, which are never
    unpickled (loading a pickle runs code): a list of views of unequal widths is saved so."""
    with np.load(file, allow_pickle=False) as archive:
        variables = {}
        for key in archive.files:
            try:
                variables[key] = archive[key]
            except ValueError as error:
                raise ValueError(
                    f"{file}: key {key!r} holds Python objects (as a list of views of unequal widths is saved), "
                    f"which are not loaded; save each view under its own key: "
                    f"np.savez(path, view_0=x0, view_1=x1, labels=y)"
                ) from error
    return variables


def load_npz(path: str | Path, *, views: Sequence[int] | None = None) -> MultiViewData:
    """A multi-view dataset from an .npz with keys view_0 ... view_{V-1} (the published code's
    NoisyMNIST format; else numbered keys as in `load_mat`: X1, X2, ...) and labels (or another
    known label key); orientation and label mapping as in `load_mat`.

    Returns:
      MultiViewData named after the file's stem, views (n, d_v) float32, labels (n,) int64.
    """
    file = _existing_file(path)
    variables = read_npz_arrays(file)
    keys = npz_view_keys(list(variables))
    if keys and [int(key.split("_")[1]) for key in keys] != list(range(len(keys))):
        raise ValueError(f"{file}: view keys must run view_0 .. view_{{V-1}} without gaps; found {keys}")
    if not keys:  # numbered keys as in a .mat file: X1, X2, ... or x_1, view1, ...
        keys = next((found for prefix in PER_VIEW_PREFIXES if (found := per_view_keys(variables, prefix))), [])
    if not keys:
        raise ValueError(
            f"{file}: no views found; expected keys view_0, view_1, ... (or X1, X2, ...); "
            f"found {describe_variables(variables)}"
        )
    bad = [key for key in keys if variables[key].ndim != 2]
    if bad:
        raise ValueError(f"{file}: views must be 2-D; {describe_variables({k: variables[k] for k in bad})}")
    label_key, raw_labels = find_labels(variables, "labels" if "labels" in variables else None, file=str(file))
    sources = [ViewSource(f"key {key!r}", variables[key]) for key in keys]
    return assemble_views(
        sources,
        raw_labels,
        label_key,
        None,
        views,
        file=str(file),
        dataset_name=file.stem,
        mask=find_view_mask(variables),
    )


def load_file(path: str | Path, *, views: Sequence[int] | None = None) -> MultiViewData:
    """`load_mat` or `load_npz` by the file's suffix (.mat / .npz)."""
    file = _existing_file(path)
    suffix = file.suffix.lower()
    if suffix == ".mat":
        return load_mat(file, views=views)
    if suffix == ".npz":
        return load_npz(file, views=views)
    raise ValueError(f"{file}: unknown data file type {suffix!r}; expected .mat or .npz")
