"""Input validation through the estimator: every malformed input is a ValueError that names the
view (or the sample, or the parameter) and the problem; degenerate but valid input (a constant
view, duplicated samples) trains without NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.exceptions import NotFittedError

from specrage_jax import SpecRaGE

TINY = dict(
    n_clusters=3, n_neighbors=5, batch_size=32, max_epochs=1, view_hidden=(16,), weighting_hidden=(8,), random_state=0
)


def two_views(n: int = 40, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, 3)), rng.standard_normal((n, 2))]


def with_value(views: list[np.ndarray], view: int, row: int, value: float) -> list[np.ndarray]:
    out = [v.copy() for v in views]
    out[view][row, 0] = value
    return out


GOOD = two_views()

FIT_CASES = {
    "no views": ([], {}, "holds no views"),
    "different sample counts": (
        [GOOD[0], GOOD[1][:39]],
        {},
        r"views disagree on the number of samples \(view 0: 40, view 1: 39\)",
    ),
    "NaN in training": (
        with_value(GOOD, 1, 7, np.nan),
        {},
        r"X: view 1 holds 1 NaN or infinite values \(first bad rows: \[7\]\)",
    ),
    "Inf in training": (
        with_value(GOOD, 0, 2, np.inf),
        {},
        r"X: view 0 holds 1 NaN or infinite values \(first bad rows: \[2\]\)",
    ),
    "a training sample with no view": (
        [
            np.where(np.arange(40)[:, None] == 3, np.nan, GOOD[0]),
            np.where(np.arange(40)[:, None] == 3, np.nan, GOOD[1]),
        ],
        {},
        r"X: sample 3 has every view missing",
    ),
    "strings": ([GOOD[0], GOOD[1].astype(str)], {}, "X: view 1 is not numeric"),
    "objects": ([np.array([[{"a": 1}, 2.0]] * 40, dtype=object), GOOD[1]], {}, "X: view 0: .*must be .*number"),
    "ragged view": ([GOOD[0], [[1.0, 2.0], [3.0]] * 20], {}, "X: view 1 is ragged"),
    "ragged rows": ([[1.0, 2.0], [3.0]] * 20, {}, "X is ragged"),
    "3-D array": (np.zeros((2, 40, 3)), {}, r"X is a 3-D array of shape \(2, 40, 3\)"),
    "3-D view": ([np.zeros((40, 3, 2)), GOOD[1]], {}, r"X: view 0 must be 2-D .*3-D array"),
    "1-D view": ([np.zeros(40), GOOD[1]], {}, "X: view 0: Expected 2D array, got 1D array"),
    "sparse view": ([sparse.csr_matrix(GOOD[0]), GOOD[1]], {}, "X: view 0: Sparse data was passed"),
    "complex view": ([GOOD[0] + 1j, GOOD[1]], {}, "X: view 0: Complex data not supported"),
    "no features": ([GOOD[0], np.zeros((40, 0))], {}, r"X: view 1: Found array with 0 feature\(s\)"),
    "no samples": ([np.zeros((0, 3)), np.zeros((0, 2))], {}, r"X: view 0: Found array with 0 sample\(s\)"),
    "view_dims do not add up": (
        np.hstack(GOOD),
        {"view_dims": (2, 2)},
        r"X has 5 features, but view_dims=\[2, 2\] add up to 4",
    ),
    "view_dims contradict the list": (
        GOOD,
        {"view_dims": (2, 3)},
        r"views have widths \[3, 2\], view_dims says \[2, 3\]",
    ),
    "bad view_dims": (
        np.hstack(GOOD),
        {"view_dims": (5, 0)},
        "view_dims must be a non-empty sequence of positive integers",
    ),
    "n_neighbors >= batch size": (
        GOOD,
        {"n_neighbors": 10, "batch_size": 8},
        r"n_neighbors=10 needs batches of more than 10 samples.*batch_size=8",
    ),
    "n_neighbors >= training rows": (
        [v[:12] for v in GOOD],
        {"n_neighbors": 11},
        r"n_neighbors=11 .*training rows=11\) = 11 \(X has n_samples=12",
    ),
    "n_components > batch": (
        GOOD,
        {"n_components": 20, "batch_size": 16},
        "n_components=20 is larger than the batch of m=16 samples",
    ),
    "n_clusters > samples": (
        [v[:20] for v in GOOD],
        {"n_clusters": 30, "n_components": 2},
        "n_clusters=30 is larger than n_samples=20",
    ),
    "every view constant": (
        [np.ones((40, 3)), np.zeros((40, 2))],
        {},
        "X: every view is constant on the training rows",
    ),
    "bad validation_fraction": (GOOD, {"validation_fraction": 1.5}, r"validation_fraction must be in \[0, 1\)"),
    "bad n_clusters": (GOOD, {"n_clusters": 0}, "n_clusters must be an integer >= 1"),
    "bad preprocess": (GOOD, {"preprocess": "zscore"}, "data.preprocess must be one of auto, standard, minmax, none"),
    "bad override": (GOOD, {"config_overrides": ["train.epochs"]}, "--set expects section.field=value"),
}


@pytest.mark.parametrize("name", list(FIT_CASES))
def test_fit_rejects_malformed_input_naming_the_view_and_problem(name):
    xs, params, match = FIT_CASES[name]
    with pytest.raises(ValueError, match=match):
        SpecRaGE(**{**TINY, **params}).fit(xs)


def test_non_numeric_objects_are_also_a_type_error():
    with pytest.raises(TypeError):  # scikit-learn's convention; still a ValueError (above)
        SpecRaGE(**TINY).fit([np.array([[{"a": 1}, 2.0]] * 40, dtype=object)])


@pytest.fixture(scope="module")
def fitted():
    return SpecRaGE(**TINY).fit(GOOD)


def all_nan_row(views: list[np.ndarray], row: int) -> list[np.ndarray]:
    out = [v.copy() for v in views]
    for v in out:
        v[row] = np.nan
    return out


TRANSFORM_CASES = {
    "more views": (GOOD + [GOOD[1]], "X has 3 views, but SpecRaGE was fitted on 2 views"),
    "fewer views": (GOOD[:1], "X has 1 views, but SpecRaGE was fitted on 2 views"),
    "other view width": (
        [GOOD[0], np.zeros((40, 4))],
        "X: view 1 has 4 features, but SpecRaGE is expecting 2 features as input for view 1",
    ),
    "other stacked width": (np.zeros((40, 6)), "X has 6 features, but SpecRaGE is expecting 5 features as input"),
    "partial NaN row": (
        with_value(GOOD, 0, 4, np.nan),
        r"X: view 0 holds 1 NaN or infinite values \(first bad rows: \[4\]\).*missing view",
    ),
    "Inf": (with_value(GOOD, 1, 9, -np.inf), r"X: view 1 holds 1 NaN or infinite values \(first bad rows: \[9\]\)"),
    "every view missing": (all_nan_row(GOOD, 3), "sample 3 has every view missing"),
    "strings": ([GOOD[0].astype(str), GOOD[1]], "X: view 0 is not numeric"),
    "1-D sample": (np.zeros(5), "(?s)X: Expected 2D array, got 1D array instead.*Reshape your data"),
}


@pytest.mark.parametrize("method", ["transform", "predict", "view_weights"])
@pytest.mark.parametrize("name", list(TRANSFORM_CASES))
def test_inference_rejects_malformed_input_naming_the_view_and_problem(fitted, name, method):
    xs, match = TRANSFORM_CASES[name]
    with pytest.raises(ValueError, match=match):
        getattr(fitted, method)(xs)


def test_score_rejects_partial_nan_rows_and_tiny_inputs(fitted):
    partial = GOOD[1].copy()
    partial[0, 0] = np.nan  # one NaN feature, not a missing view
    with pytest.raises(ValueError, match="X: view 1"):
        fitted.score([GOOD[0], partial])
    with pytest.raises(ValueError, match="score needs more than n_neighbors=5 samples"):
        fitted.score([v[:5] for v in GOOD])


def test_unfitted_estimator_raises_not_fitted():
    for method in ("transform", "predict", "view_weights", "score", "save"):
        with pytest.raises(NotFittedError):
            getattr(SpecRaGE(**TINY), method)(GOOD if method != "save" else "unused")


def test_a_constant_view_trains_without_nan():
    views = [GOOD[0], np.full((40, 2), 3.0)]
    est = SpecRaGE(**TINY)
    with pytest.warns(UserWarning, match="view 1 is constant on the training rows"):
        y = est.fit_transform(views)
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(est.view_weights(views)))
    assert np.isfinite(est.score(views))
    assert np.all(np.isfinite(est.state_.view_scales))


@pytest.mark.parametrize("scale_mode", ["global", "batch"])
def test_duplicated_samples_train_without_nan(scale_mode):
    base = two_views(10)
    views = [np.repeat(v, 4, axis=0) for v in base]  # every sample four times: many zero distances
    est = SpecRaGE(**{**TINY, "scale_mode": scale_mode})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no invalid-value / divide-by-zero warnings
        y = est.fit_transform(views)
    assert np.all(np.isfinite(y))
    np.testing.assert_array_equal(y[0], y[1])  # duplicates embed identically
