"""Incomplete multi-view data: seeded removal of whole views, and the mean-imputation baseline.

A sample that does not have view v holds an all-NaN row in view v (the one form of missing data
the library reads; a mask (n, V) is turned into it, :func:`validation.with_missing_rows`).

* :func:`remove_views_at_random` — the protocol of ``experiments/incomplete.py``: a seeded
  fraction p of the samples loses views at random (with V views, between 1 and V - 1 of them, so
  every sample keeps at least one);
* :func:`mean_impute` — the baseline that fills every missing row with its view's mean over the
  rows given for fitting (the training split).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specrage_jax.validation import as_view_arrays, missing_rows


def remove_views_at_random(
    views: Sequence[np.ndarray], fraction: float, *, seed: int
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """(views with removed rows set to NaN, present (n, V) bool) after removing views of
    round(fraction n) samples drawn without replacement: each such sample loses a uniformly drawn
    number of views in 1..V-1, which views drawn uniformly. The inputs are not modified.

    Raises:
      ValueError: for a fraction outside [0, 1], fewer than two views, or views already missing.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"the fraction of samples with missing views must be in [0, 1], got {fraction}")
    arrays = as_view_arrays(views, what="views")
    n_views, n = len(arrays), arrays[0].shape[0]
    if n_views < 2:
        raise ValueError(f"removing views needs at least two views (every sample keeps one), got {n_views}")
    rng = np.random.default_rng([seed, 17])
    present = np.ones((n, n_views), bool)
    chosen = np.sort(rng.choice(n, size=int(round(fraction * n)), replace=False))
    counts = rng.integers(1, n_views, size=chosen.size)  # 1 .. V-1 views removed
    for row, count in zip(chosen, counts):
        present[row, rng.choice(n_views, size=count, replace=False)] = False
    out = tuple(np.where(present[:, v, None], x, np.asarray(np.nan, x.dtype)) for v, x in enumerate(arrays))
    return out, present


def mean_impute(views: Sequence[np.ndarray], fit_rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """The views with every missing (all-NaN) row replaced by its view's mean over the present
    rows among ``fit_rows`` (row indices, e.g. the training split).

    Raises:
      ValueError: naming a view that none of ``fit_rows`` has.
    """
    out = []
    for v, x in enumerate(views):
        missing = missing_rows(x)
        fit = np.asarray(fit_rows)[~missing[fit_rows]]
        if fit.size == 0:
            raise ValueError(f"view {v}: none of the rows to fit the mean on has this view")
        out.append(np.where(missing[:, None], x[fit].mean(axis=0, dtype=np.float64).astype(x.dtype), x))
    return tuple(out)
