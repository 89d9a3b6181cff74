"""Per-view preprocessing, fitted on the training split and applied to every split.

A :class:`ViewScaler` maps a view x (m, d) through up to four fitted stages, each optional:
feature scaling ``(x - offset) / scale``, rows to unit L2 norm, a linear projection to r
dimensions (TruncatedSVD, for sparse views), rows to unit L2 norm again. The kinds of
``data.preprocess`` are fixed recipes of these stages; ``auto`` picks one per view from the
view's statistics (:func:`auto_view_kind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sklearn.decomposition import TruncatedSVD

from specrage_jax.config import PREPROCESS_KINDS  # data.preprocess values: one list for the config and the scalers
from specrage_jax.validation import as_view_arrays, has_no_rows, present_rows

ROW_NORMALIZING_KINDS = {"l2": "none", "standard_l2": "standard"}  # kind -> the feature scaling before it
SPARSE_KIND, DENSE_KIND = "svd_l2", "standard_l2"  # what auto picks for sparse and for dense views
NARROW_SPARSE_KIND = "idf_l2"  # ... and for a sparse view no wider than the SVD's rank
COMPOSITION_KIND = "hellinger"  # ... and for a dense view of compositions (rows of one total: proportions, histograms)
COMPOSITION_TOLERANCE = 1e-3  # row totals within this (relative) of their mean make a view compositional


def normalizes_rows(kind: str) -> bool:
    """Whether a fixed `data.preprocess` kind ends by scaling every row to unit L2 norm."""
    return kind in ROW_NORMALIZING_KINDS or kind in ("svd_l2", "idf_l2", "hellinger")


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row of x (m, d) divided by its L2 norm; all-zero rows stay zero, NaN rows stay NaN."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


def fraction_nonzero(view: np.ndarray) -> float:
    """Fraction of the entries of a view (n, d) that are nonzero (NaN counts as nonzero)."""
    return float(np.count_nonzero(view) / max(view.size, 1))


# A dense view with fewer features keeps its row norms ("standard"): on a circle or a 2-sphere the
# data's directions cover much of the space, so unit rows would map a point far off the data (an
# outlier) onto it. Blobs (2 features per view), 20 % outliers per view, default estimator, pinned
# weights: test ACC 0.727 with unit rows, 0.933 without (BUILD_NOTES, "Data-aware defaults").
MIN_FEATURES_FOR_UNIT_ROWS = 4


def auto_view_kind(view: np.ndarray, *, sparse_below: float = 0.1, svd_components: int = 100) -> str:
    """The preprocessing ``auto`` gives one view (n, d): ``svd_l2`` for a sparse view (fewer
    than ``sparse_below`` of its entries nonzero: bag-of-words, counts, graph adjacency rows)
    wider than ``svd_components``, where cosine geometry in a low-rank subspace is what carries
    the neighbourhoods; ``idf_l2`` for a sparse view at most that wide (an annotation or keyword
    view of a few dozen terms: the SVD would keep nearly every direction, so nothing evens out
    the terms' frequencies but their inverse document frequency; zeros stay zeros, so an empty
    row stays empty); ``hellinger`` for a dense view of compositions (:func:`is_composition`:
    rows of one total, such as proportions, topic mixtures or normalized histograms): the square
    root of each entry, then rows to unit norm, so that the dot product of two rows is their
    Bhattacharyya coefficient (standardizing each feature would inflate the rare bins); ``standard_l2``
    otherwise (every feature on one scale, then cosine geometry); ``standard`` for a view of
    fewer than MIN_FEATURES_FOR_UNIT_ROWS features (at one
    feature unit rows would all be +-1; at two or three they fold points off the data onto it),
    and for a constant view (no geometry to keep)."""
    return auto_view_choice(view, sparse_below=sparse_below, svd_components=svd_components)[0]


def auto_view_choice(view: np.ndarray, *, sparse_below: float = 0.1, svd_components: int = 100) -> tuple[str, str]:
    """(kind, why): :func:`auto_view_kind`'s choice for ``view`` (n, d) and the branch with the
    view's numbers that decided it (width, share of nonzero entries)."""
    x = np.asarray(view)
    width = x.shape[1]
    if width < MIN_FEATURES_FOR_UNIT_ROWS:
        return "standard", f"{width} features (fewer than {MIN_FEATURES_FOR_UNIT_ROWS}): standard"
    if x.shape[0] < 2 or np.ptp(x, axis=0).max() == 0:
        return "standard", f"{width} features, constant over {x.shape[0]} rows: standard"
    nonzero = fraction_nonzero(x)
    if nonzero >= sparse_below:
        density = f"{width} features, {nonzero:.1%} nonzero (>= {sparse_below:.0%})"
        if is_composition(x):
            return COMPOSITION_KIND, f"{density}, rows of one total (compositions): {COMPOSITION_KIND}"
        return DENSE_KIND, f"{density}: {DENSE_KIND}"
    density = f"{width} features, {nonzero:.1%} nonzero (< {sparse_below:.0%})"
    if width > svd_components:
        return SPARSE_KIND, f"{density}, wider than {svd_components}: {SPARSE_KIND}"
    return NARROW_SPARSE_KIND, f"{density}, at most {svd_components} wide: {NARROW_SPARSE_KIND}"


def signed_sqrt(x: np.ndarray) -> np.ndarray:
    """sign(x) sqrt(|x|) entrywise: the square root of non-negative entries, defined (not NaN) for
    a negative entry a new row may hold."""
    return np.sign(x) * np.sqrt(np.abs(x))


def is_composition(x: np.ndarray) -> bool:
    """Whether the rows of x (n, d) are compositions: non-negative, each summing to the same
    positive total (within COMPOSITION_TOLERANCE, relative): proportions, normalized histograms,
    topic mixtures, counts over a fixed number of draws."""
    x = np.asarray(x, np.float64)
    x = x[~np.isnan(x).any(axis=1)]  # rows of a missing view say nothing
    if len(x) == 0 or x.min() < 0:
        return False
    totals = x.sum(axis=1)
    mean = totals.mean()
    return bool(mean > 0 and np.abs(totals - mean).max() <= COMPOSITION_TOLERANCE * mean)


def inverse_document_frequency(x: np.ndarray) -> np.ndarray:
    """Smoothed IDF of each column of x (n, d): ``log((1 + n) / (1 + df)) + 1``, df the rows
    where the column is nonzero; (d,) float64, at least 1."""
    document_frequency = np.count_nonzero(x, axis=0)
    return np.log((1.0 + x.shape[0]) / (1.0 + document_frequency)) + 1.0


@dataclass(frozen=True)
class ViewScaler:
    """Maps a view x (m, d) to ``(x - offset) / scale`` (offset, scale (d,), scale nonzero);
    then with ``sqrt_entries`` each entry to its signed square root; then with
    ``unit_rows_first`` each row to unit L2 norm; then with ``components`` (d, r) the projection
    onto them; then with ``unit_rows`` each row to unit L2 norm. ``kind`` names the recipe it
    was fitted with. A ``left_out`` view (``data.unrelated_views``) is checked for its width but
    not passed on: :func:`apply_view_scalers` returns the other views only."""

    offset: np.ndarray
    scale: np.ndarray
    unit_rows: bool = False
    unit_rows_first: bool = False
    sqrt_entries: bool = False  # the Hellinger map of compositions (a scaler pickled before it: False)
    components: np.ndarray | None = None
    kind: str = ""
    left_out: bool = False  # the view takes no part in the fit (a scaler pickled before it: False)
    reason: str = field(default="", compare=False)  # data.preprocess=auto: why this kind (not in saved models)
    left_out_why: str = field(default="", compare=False)  # "<rule>: <reason>" of a left-out view (not saved)

    @property
    def in_dim(self) -> int:
        return int(self.offset.shape[0])

    @property
    def out_dim(self) -> int:
        return self.in_dim if self.components is None else int(self.components.shape[1])

    def transform(self, x: np.ndarray) -> np.ndarray:
        """(m, d) -> (m, out_dim) float32."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.in_dim:
            raise ValueError(f"scaler fitted on {self.in_dim} features, got an array of shape {x.shape}")
        z = (x - self.offset) / self.scale
        if self.sqrt_entries:
            z = signed_sqrt(z)
        if self.unit_rows_first:
            z = unit_rows(z)
        if self.components is not None:
            z = z @ self.components
        return (unit_rows(z) if self.unit_rows else z).astype(np.float32)

    def unreduced(self, x: np.ndarray) -> np.ndarray:
        """(m, d) -> the rows before the projection (unit norm, float32); :meth:`transform` when
        there is no projection. What the kNN graph sees with ``data.graph_inputs=unreduced``."""
        if self.components is None:
            return self.transform(x)
        z = (np.asarray(x) - self.offset) / self.scale
        return unit_rows(z).astype(np.float32)

    def as_tree(self) -> dict[str, np.ndarray]:
        """The fitted arrays and flags as a dict of arrays (what checkpoints store)."""
        tree = {
            "offset": np.asarray(self.offset),
            "scale": np.asarray(self.scale),
            "flags": np.asarray([self.unit_rows, self.unit_rows_first, self.sqrt_entries, self.left_out], np.int32),
        }
        if self.components is not None:
            tree["components"] = np.asarray(self.components)
        return tree


def scaler_from_tree(tree: dict[str, Any], *, default_kind: str) -> ViewScaler:
    """The scaler :meth:`ViewScaler.as_tree` stored; a record written before the flags existed
    (offset and scale only) takes its row normalization from the run's ``data.preprocess``."""
    offset, scale = np.asarray(tree["offset"]), np.asarray(tree["scale"])
    if "flags" in tree:
        flags = [bool(f) for f in np.asarray(tree["flags"]).ravel()]
        unit, first = flags[0], flags[1]
        sqrt, left_out = len(flags) > 2 and flags[2], len(flags) > 3 and flags[3]  # fewer flags: saved before them
    else:
        unit, first, sqrt, left_out = normalizes_rows(default_kind), False, False, False
    components = np.asarray(tree["components"]) if "components" in tree else None
    return ViewScaler(
        offset=offset,
        scale=scale,
        unit_rows=unit,
        unit_rows_first=first,
        sqrt_entries=sqrt,
        components=components,
        left_out=left_out,
    )


def _nonzero_scale(scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Replaces the scale of (numerically) constant features with 1, so they map to 0, not NaN."""
    constant = scale <= 10.0 * np.finfo(np.float64).eps * np.abs(offset)
    return np.where(constant | (scale == 0.0), 1.0, scale)


def svd_rank(n_rows: int, width: int, requested: int) -> int:
    """Dimensions TruncatedSVD keeps: ``requested``, below the width and the row count, at least 1."""
    return max(1, min(requested, width - 1, n_rows - 1))


def fit_view_scaler(view: np.ndarray, kind: str, *, svd_components: int = 100, sparse_below: float = 0.1) -> ViewScaler:
    """Fits one scaler to a view (n, d); pass the training split only. Rows that are all NaN (the
    view is missing for that sample) are left out of the fit, and stay all NaN when applied."""
    view = present_rows(view)
    if kind == "auto":
        kind, reason = auto_view_choice(view, sparse_below=sparse_below, svd_components=svd_components)
        return replace(fit_view_scaler(view, kind, svd_components=svd_components), reason=reason)
    if kind in ROW_NORMALIZING_KINDS:
        return replace(fit_view_scaler(view, ROW_NORMALIZING_KINDS[kind]), unit_rows=True, kind=kind)
    x = np.asarray(view, dtype=np.float64)
    if kind == "svd_l2":
        if x.shape[1] < 2 or x.shape[0] < 2:
            return replace(fit_view_scaler(view, "l2"), kind=kind)
        rows = unit_rows(x)
        svd = TruncatedSVD(
            svd_rank(x.shape[0], x.shape[1], svd_components), algorithm="randomized", random_state=0
        ).fit(rows)
        return ViewScaler(
            offset=np.zeros(x.shape[1]),
            scale=np.ones(x.shape[1]),
            unit_rows=True,
            unit_rows_first=True,
            components=svd.components_.T.astype(np.float64),
            kind=kind,
        )
    if kind == "hellinger":
        return ViewScaler(
            offset=np.zeros(x.shape[1]), scale=np.ones(x.shape[1]), unit_rows=True, sqrt_entries=True, kind=kind
        )
    if kind == "idf_l2":
        scale = 1.0 / inverse_document_frequency(x)
        return ViewScaler(offset=np.zeros(x.shape[1]), scale=scale, unit_rows=True, kind=kind)
    if kind == "standard":
        offset, scale = x.mean(axis=0), x.std(axis=0)
    elif kind == "minmax":
        offset, scale = x.min(axis=0), x.max(axis=0) - x.min(axis=0)
    elif kind == "none":
        offset, scale = np.zeros(x.shape[1]), np.ones(x.shape[1])
    else:
        raise ValueError(f"unknown scaler kind {kind!r}; choose one of {PREPROCESS_KINDS}")
    return ViewScaler(offset=offset, scale=_nonzero_scale(scale, offset), kind=kind)


def fit_view_scalers(
    views: Sequence[np.ndarray], kind: str, *, svd_components: int = 100, sparse_below: float = 0.1
) -> tuple[ViewScaler, ...]:
    """One scaler per view (n, d_v), fitted on the views given (the caller passes the training split).

    kind: "standard" (zero mean, unit std), "minmax" (range [0, 1]), "none" (identity), "l2" (rows
    to unit L2 norm), "standard_l2" (standard, then rows to unit norm), "svd_l2" (rows to unit
    norm, TruncatedSVD to ``svd_components`` dimensions, rows to unit norm), "idf_l2" (each column
    times its inverse document frequency, then rows to unit norm), "hellinger" (the square root of
    each entry, then rows to unit norm: for compositions) or "auto" (per view:
    :func:`auto_view_kind`).
    """
    if kind not in PREPROCESS_KINDS:
        raise ValueError(f"unknown scaler kind {kind!r}; choose one of {PREPROCESS_KINDS}")
    return tuple(
        fit_view_scaler(view, kind, svd_components=svd_components, sparse_below=sparse_below)
        for view in as_view_arrays(views, what="views to fit scalers on", allow_missing=True)
    )


def kept_views(scalers: Sequence[ViewScaler]) -> tuple[int, ...]:
    """The indices of the views that take part in the fit (not ``left_out``), ascending."""
    return tuple(v for v, s in enumerate(scalers) if not s.left_out)


def with_left_out_views(weights: np.ndarray, scalers: Sequence[ViewScaler]) -> np.ndarray:
    """Per-sample view weights of the kept views (n, V') -> (n, V): a left-out view's weight is 0.
    Unchanged where no scaler is given or none is left out."""
    if not scalers or weights.shape[1] == len(scalers):
        return weights
    every_view = np.zeros((weights.shape[0], len(scalers)), weights.dtype)
    every_view[:, list(kept_views(scalers))] = weights
    return every_view


def leave_out_views(
    scalers: Sequence[ViewScaler], views: Sequence[int], why: Sequence[str] = ()
) -> tuple[ViewScaler, ...]:
    """``scalers`` with the views ``views`` marked ``left_out``, each with its reason from ``why``
    (in the order of ``views``; none given: no reason recorded)."""
    reasons = dict(zip(views, why))
    return tuple(
        replace(s, left_out=True, left_out_why=reasons.get(v, "")) if v in views else s for v, s in enumerate(scalers)
    )


def graph_input_views(scalers: Sequence[ViewScaler], views: Sequence[np.ndarray]) -> tuple[np.ndarray, ...] | None:
    """The kept views as ``data.graph_inputs=unreduced`` builds their graphs (:meth:`ViewScaler.unreduced`);
    None when no kept view's scaler projects (the graph then sees the model's inputs)."""
    if all(s.components is None for s in scalers if not s.left_out):
        return None
    arrays = _views_to_scale(scalers, views)
    return tuple(s.unreduced(x) for s, x in zip(scalers, arrays) if not s.left_out)


def _views_to_scale(scalers: Sequence[ViewScaler], views: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The views checked (:func:`validation.as_view_arrays`); an empty split (every view with no
    rows, e.g. no validation rows) passes as (0, in_dim) arrays."""
    if len(views) == len(scalers) and has_no_rows(views):
        return tuple(np.zeros((0, s.in_dim), np.float32) for s in scalers)
    return as_view_arrays(views, what="views to scale", allow_missing=True)  # all-NaN rows stay all NaN


def apply_view_scalers(scalers: Sequence[ViewScaler], views: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Scales view v (m, d_v) with scalers[v]; returns one float32 array (m, out_dim of scalers[v])
    per kept view (:func:`kept_views`), after checking every view's width."""
    arrays = _views_to_scale(scalers, views)
    if len(arrays) != len(scalers):
        raise ValueError(f"views to scale: {len(scalers)} scalers for {len(arrays)} views")
    for v, (scaler, view) in enumerate(zip(scalers, arrays)):
        if view.shape[1] != scaler.in_dim:
            raise ValueError(
                f"views to scale: view {v} has {view.shape[1]} features, its scaler was fitted on {scaler.in_dim}"
            )
    return tuple(scaler.transform(view) for scaler, view in zip(scalers, arrays) if not scaler.left_out)
