"""Seeded contamination: ADBench global anomalies and Gaussian noise."""

from __future__ import annotations

import numpy as np
import pytest

from specrage_jax.data.contamination import (
    global_anomalies,
    inject_noise,
    inject_outliers,
)


def two_views(n: int = 400, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(2.0, 3.0, (n, 6)).astype(np.float32), rng.uniform(-1.0, 5.0, (n, 4)).astype(np.float32)]


def test_outliers_replace_exactly_the_masked_rows_of_one_view_and_copy_the_input():
    views = two_views()
    before = [v.copy() for v in views]
    out = inject_outliers(views, 0.25, seed=1, view=1)
    assert out.mask.shape == (400, 2) and out.mask.dtype == bool
    assert out.mask[:, 1].sum() == 100 and not out.mask[:, 0].any()
    np.testing.assert_array_equal(out.views[0], views[0])
    rows = out.mask[:, 1]
    np.testing.assert_array_equal(out.views[1][~rows], views[1][~rows])
    assert np.all(np.any(out.views[1][rows] != views[1][rows], axis=1))
    for a, b in zip(views, before):
        np.testing.assert_array_equal(a, b)  # inputs untouched


def test_global_anomalies_lie_in_the_alpha_scaled_feature_range():
    x = np.array([[-2.0, 1.0], [4.0, 3.0], [0.0, 2.0]], np.float32)
    rows = global_anomalies(x, 5000, alpha=1.1, rng=np.random.default_rng(0))
    assert rows.shape == (5000, 2)
    np.testing.assert_array_less([-2.2 - 1e-6, 1.1 - 1e-6], rows.min(axis=0))
    np.testing.assert_array_less(rows.max(axis=0), [4.4 + 1e-6, 3.3 + 1e-6])
    assert rows[:, 0].min() < -2.0 and rows[:, 0].max() > 4.0  # reaches beyond the clean range


def test_outliers_in_every_view_draw_independent_samples_and_are_seeded():
    views = two_views()
    a = inject_outliers(views, 0.2, seed=3, view=None)
    assert (a.mask.sum(axis=0) == 80).all()
    assert not np.array_equal(a.mask[:, 0], a.mask[:, 1])
    b = inject_outliers(views, 0.2, seed=3, view=None)
    np.testing.assert_array_equal(a.mask, b.mask)
    for x, y in zip(a.views, b.views):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.mask, inject_outliers(views, 0.2, seed=4, view=None).mask)


def test_noise_hits_one_view_per_chosen_sample_with_the_feature_scaled_sigma():
    views = two_views(n=20000)
    out = inject_noise(views, 0.4, seed=0, sigma=1.2)
    assert out.mask.sum() == 8000 and out.mask.sum(axis=1).max() == 1
    assert 0.4 < out.mask[:, 0].mean() / 0.4 < 0.6  # views chosen uniformly
    for v in range(2):
        hit = out.mask[:, v]
        np.testing.assert_array_equal(out.views[v][~hit], views[v][~hit])
        ratio = (out.views[v][hit] - views[v][hit]).std(axis=0) / views[v].std(axis=0)
        np.testing.assert_allclose(ratio, 1.2, rtol=0.05)


def test_bad_arguments_are_named():
    views = two_views(n=10)
    with pytest.raises(ValueError, match="fraction must be in"):
        inject_outliers(views, 1.5, seed=0)
    with pytest.raises(ValueError, match="view 2 does not exist: the data has 2 views"):
        inject_outliers(views, 0.1, seed=0, view=2)
    with pytest.raises(ValueError, match="sigma must be"):
        inject_noise(views, 0.1, seed=0, sigma=-1.0)
    assert not inject_noise(views, 0.0, seed=0).mask.any()
