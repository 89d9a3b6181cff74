"""Input checks at the library boundary: every error names the view and the problem.

Missing views (inference only): a view given as an all-NaN row for a sample, or marked
False in a mask (n, V), is left out of that sample's fusion. A row with only some NaN
features is an error naming the view, and so is any infinite value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.utils import check_array


class InputTypeError(ValueError, TypeError):
    """Input of the wrong kind (sparse, non-numeric objects). A ValueError like every input
    error here, and a TypeError as scikit-learn and NumPy raise for such input."""


def as_view_array(view: Any, *, name: str) -> np.ndarray:
    """One view from any array-like (list of rows, NumPy, pandas) as a float32 array (n, d).

    Non-finite values are kept (see :func:`check_finite_view`); everything else is checked
    here, and every error starts with ``name`` (e.g. "X: view 1").

    Raises:
      ValueError: for 1-D, 3-D, empty, complex, ragged or non-numeric input (an
        :class:`InputTypeError`, also a TypeError, for sparse matrices and objects such as dicts).
    """
    ndim = getattr(view, "ndim", None)
    if ndim is not None and ndim > 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got a {ndim}-D array of shape {tuple(view.shape)}"
        )
    try:
        array = check_array(
            view,
            accept_sparse=False,
            dtype="numeric",
            ensure_all_finite=False,
            ensure_2d=True,
            allow_nd=False,
            input_name=name,
        )
    except TypeError as err:
        raise InputTypeError(f"{name}: {err}") from err
    except ValueError as err:
        text = str(err)
        if "inhomogeneous" in text or "sequence" in text:
            raise ValueError(
                f"{name} is ragged: its rows differ in length or hold nested sequences ({text.splitlines()[0]})"
            ) from err
        if "could not convert" in text or "strings" in text:
            raise ValueError(f"{name} is not numeric: {text}") from err
        if "dim 3" in text or "dim 4" in text:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features): {text}") from err
        raise ValueError(f"{name}: {text}") from err
    with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, reported below
        return np.ascontiguousarray(array, dtype=np.float32)


def check_finite_view(array: np.ndarray, *, name: str, allow_missing: bool = False) -> np.ndarray:
    """(n,) bool, True where the view is present in that row.

    Without ``allow_missing`` every value must be finite. With it, an all-NaN row marks the
    view missing for that sample; a row with only some NaN features, or any infinite value,
    is still an error.

    Raises:
      ValueError: naming the view, the problem and the first offending rows.
    """
    n_rows = array.shape[0]
    finite = np.isfinite(array)
    if finite.all():
        return np.ones(n_rows, dtype=bool)
    missing = np.isnan(array).all(axis=1) if allow_missing else np.zeros(n_rows, dtype=bool)
    bad_rows = np.flatnonzero(~finite.all(axis=1) & ~missing)
    if bad_rows.size:
        n_bad = int((~finite[bad_rows]).sum())
        hint = (
            "a missing view must be NaN in every feature of that row"
            if allow_missing
            else "impute or drop those samples first"
        )
        raise ValueError(
            f"{name} holds {n_bad} NaN or infinite values (first bad rows: {bad_rows[:5].tolist()}); {hint}"
        )
    return ~missing


def has_no_rows(views: Sequence[Any]) -> bool:
    """True for an empty split: one or more 2-D views (arrays or row sources), none with rows
    (e.g. the validation split of ``val_fraction=0``), which passes where a view with some
    empty and some filled parts is an error."""
    return len(views) > 0 and all(np.ndim(v) == 2 and np.shape(v)[0] == 0 for v in views)


def is_row_source(x: Any) -> bool:
    """True for a view streamed from disk (``data.lazy.MemmapRows``, marked ``streamed``)."""
    return getattr(x, "streamed", False) is True


def missing_rows(x: Any) -> np.ndarray:
    """(n,) bool: the rows of one view (n, d) that are all NaN, i.e. a view the sample does not
    have. A view streamed from disk answers from its dataset's mask (``present()``), unread;
    other inputs that are not NumPy arrays have none."""
    if is_row_source(x):
        return ~np.asarray(x.present(), dtype=bool)
    if not isinstance(x, np.ndarray) or x.dtype.kind != "f" or x.ndim != 2 or x.shape[1] == 0:
        return np.zeros(len(x), bool)
    return np.asarray(np.isnan(x).all(axis=1))


def present_rows(x: Any) -> Any:
    """The rows of one view (n, d) that the samples have (not all NaN); ``x`` itself when no row
    is missing. A view streamed from disk gives a row source over those rows, unread (``take``)."""
    missing = missing_rows(x)
    if not missing.any():
        return x
    return x.take(np.flatnonzero(~missing)) if is_row_source(x) else x[~missing]


def present_views(views: Sequence[Any]) -> np.ndarray:
    """(n, V) bool: True where sample i has view v (its row is not all NaN; a view streamed from
    disk answers from its mask, unread). No checks: :func:`view_presence` validates as well."""
    return np.stack([~missing_rows(x if is_row_source(x) else np.asarray(x)) for x in views], axis=1)


def view_presence(views: Sequence[np.ndarray], mask: Any = None, *, what: str = "views") -> np.ndarray:
    """(n, V) bool, True where view v of sample i is present (used in the fusion).

    A view is missing for a sample when its row is all NaN or ``mask`` (n, V), True =
    present, says so. Every sample needs at least one present view.

    Raises:
      ValueError: naming the view (partial-NaN rows, infinite values), the mask's problem,
        or the first sample with every view missing.
    """
    present = np.stack(
        [check_finite_view(np.asarray(x), name=f"{what}: view {v}", allow_missing=True) for v, x in enumerate(views)],
        axis=1,
    )
    if mask is not None:
        given = np.asarray(mask)
        if given.shape != present.shape:
            raise ValueError(f"{what}: mask must have shape (n_samples, n_views) = {present.shape}, got {given.shape}")
        if given.dtype != np.bool_:
            raise ValueError(f"{what}: mask must be boolean (True = view present), got dtype {given.dtype}")
        present &= given
    check_each_sample_has_a_view(present, what=what)
    return present


def check_each_sample_has_a_view(present: np.ndarray, *, what: str) -> None:
    """ValueError naming the first sample whose row of ``present`` (n, V) bool is all False."""
    empty = np.flatnonzero(~present.any(axis=1))
    if empty.size:
        raise ValueError(
            f"{what}: sample {int(empty[0])} has every view missing (all-NaN rows or mask "
            f"False; {empty.size} such samples, first {empty[:5].tolist()}); it cannot be embedded"
        )


def with_missing_rows(views: Sequence[np.ndarray], mask: Any = None, *, what: str = "views") -> tuple[np.ndarray, ...]:
    """The views with every missing view's row all NaN: the one form of missing data the training
    pipeline reads. A view is missing where its row is all NaN or ``mask`` (n, V) is False; the
    views come back unchanged (not copied) when none is missing.

    Raises:
      ValueError: as :func:`view_presence` (naming the view, the mask's problem, or the first
        sample with every view missing).
    """
    present = view_presence(views, mask, what=what)
    if present.all():
        return tuple(views)
    return fill_missing_rows(views, present, np.nan)


def fill_missing_rows(arrays: Sequence[np.ndarray], present: np.ndarray, value: float) -> tuple[np.ndarray, ...]:
    """Copies of V arrays (n, d_v) with the rows where ``present`` (n, V) is False set to ``value``
    (NaN marks a missing view; 0 is what the jitted steps are given in its place)."""
    return tuple(np.where(present[:, v, None], x, np.asarray(value, x.dtype)) for v, x in enumerate(arrays))


def check_view_coverage(views: Sequence[Any], n_neighbors: int, *, what: str = "training rows") -> None:
    """Every view must be present on more than ``n_neighbors`` of the rows (an all-NaN row is a
    missing view), or its kNN graph cannot be built. Raises ValueError naming the view."""
    for v, x in enumerate(views):
        count = int(len(x) - missing_rows(x).sum())
        if count <= n_neighbors:
            raise ValueError(
                f"view {v} is present on only {count} of the {len(x)} {what}; its kNN graph needs more than "
                f"n_neighbors={n_neighbors}: lower n_neighbors or provide more samples that have view {v}"
            )


def as_view_arrays(
    views: Sequence[np.ndarray], *, what: str = "views", allow_missing: bool = False
) -> tuple[np.ndarray, ...]:
    """Validates a multi-view input and returns it as a tuple of float32 arrays.

    Args:
      views: V arrays, view v of shape (n, d_v); the same n for every view.
      what: how the caller names the input in error messages.
      allow_missing: keep all-NaN rows (missing views, see :func:`view_presence`); other
        non-finite values are still errors.

    Returns:
      A tuple of V C-contiguous float32 arrays of shape (n, d_v).

    Raises:
      ValueError: naming the view when it is not 2-D, has no rows or columns, disagrees on
        the number of samples, or holds NaN or infinite values.
    """
    if isinstance(views, np.ndarray) or not isinstance(views, Sequence) or len(views) == 0:
        raise ValueError(
            f"{what} must be a non-empty list of 2-D arrays, one (n_samples, n_features_v) "
            f"array per view; got {type(views).__name__}"
        )
    arrays = []
    for v, view in enumerate(views):
        array = np.asarray(view)
        if array.ndim != 2:
            raise ValueError(f"{what}: view {v} must be 2-D (n_samples, n_features), got shape {array.shape}")
        if array.shape[0] == 0 or array.shape[1] == 0:
            raise ValueError(f"{what}: view {v} is empty, shape {array.shape}")
        if not np.issubdtype(array.dtype, np.number) and array.dtype != np.bool_:
            raise ValueError(f"{what}: view {v} has non-numeric dtype {array.dtype}")
        array = np.ascontiguousarray(array, dtype=np.float32)
        check_finite_view(array, name=f"{what}: view {v}", allow_missing=allow_missing)
        arrays.append(array)
    n_rows = {a.shape[0] for a in arrays}
    if len(n_rows) != 1:
        shapes = ", ".join(f"view {v}: {a.shape}" for v, a in enumerate(arrays))
        raise ValueError(f"{what}: views disagree on the number of samples ({shapes})")
    return tuple(arrays)


def check_view_dims(views: Sequence[np.ndarray], expected_dims: Sequence[int], *, what: str = "views") -> None:
    """Raises ValueError naming the view whose feature count differs from the trained model's."""
    if len(views) != len(expected_dims):
        raise ValueError(f"{what}: expected {len(expected_dims)} views, got {len(views)}")
    for v, (view, dim) in enumerate(zip(views, expected_dims)):
        if view.shape[1] != dim:
            raise ValueError(f"{what}: view {v} has {view.shape[1]} features, the model was built for {dim}")


def check_label_shape(labels: np.ndarray, n_samples: int, *, what: str) -> np.ndarray:
    """Returns ``labels`` as an array after checking it is 1-D with one label per sample."""
    array = np.asarray(labels)
    if array.ndim != 1:
        raise ValueError(f"{what}: labels must be 1-D (n_samples,), got shape {array.shape}")
    if array.shape[0] != n_samples:
        raise ValueError(f"{what}: {array.shape[0]} labels for {n_samples} samples")
    return array


def check_training_sizes(
    *,
    n_samples: int,
    n_train: int,
    batch_size: int,
    n_neighbors: int,
    n_components: int,
    n_clusters: int,
    n_test: int | None = None,
    what: str = "X",
    extra: str = "",
) -> None:
    """Before any training: the data is large enough for the kNN graph, the orthogonalization
    and the clusters. The estimator and the CLI both call this.

    Raises:
      ValueError: naming the setting, the sizes and the fix.
    """
    m = min(batch_size, n_train)
    context = f"{what} has n_samples={n_samples}{extra}"
    if m <= n_neighbors:
        raise ValueError(
            f"n_neighbors={n_neighbors} needs batches of more than {n_neighbors} samples, but the batch holds "
            f"m = min(batch_size={batch_size}, training rows={n_train}) = {m} ({context}); lower n_neighbors "
            f"(graph.n_neighbors) below {m}, or pass more samples"
        )
    if n_components > m:
        raise ValueError(
            f"n_components={n_components} is larger than the batch of m={m} samples ({context}); the "
            f"orthogonalization needs at least n_components rows per batch: lower n_components "
            f"(model.n_components) to at most {m}"
        )
    if n_clusters > n_samples:
        raise ValueError(f"n_clusters={n_clusters} is larger than n_samples={n_samples}")
    if n_test is not None and n_clusters > n_test:
        raise ValueError(
            f"the test split has {n_test} samples, fewer than the {n_clusters} clusters k-means must "
            f"find on it: raise data.test_fraction or pass more samples"
        )
