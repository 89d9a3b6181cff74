"""Tests for specrage_jax.data: datasets, splits, scalers and the MultiViewData record."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from specrage_jax.data import (
    MultiViewData,
    apply_view_scalers,
    dataset_names,
    fit_view_scalers,
    load_dataset,
    make_blobs_views,
    make_digits_views,
    split_indices,
)


@pytest.fixture(scope="module")
def digits() -> MultiViewData:
    return make_digits_views(noise_std=0.2, seed=0)


def pairwise_distances(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return np.sqrt(np.maximum(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1), 0.0))


# --- blobs -------------------------------------------------------------------------------------


def test_blobs_shapes_and_names():
    data = make_blobs_views(n_samples=600, n_centers=4, seed=1)
    assert data.name == "blobs"
    assert data.view_names == ("original", "rotated")
    assert data.view_dims == (2, 2)
    assert data.n_samples == 600 and data.n_views == 2 and data.n_classes == 4
    assert data.views[0].dtype == np.float32 and data.labels.dtype == np.int64
    assert np.array_equal(np.bincount(data.labels), [150, 150, 150, 150])


def test_blobs_second_view_is_an_exact_rotation_of_the_first():
    data = make_blobs_views(n_samples=500, seed=3)
    original, rotated = (view.astype(np.float64) for view in data.views)
    # rotated ≈ original @ M; recover M by least squares.
    matrix, *_ = np.linalg.lstsq(original, rotated, rcond=None)
    np.testing.assert_allclose(original @ matrix, rotated, atol=1e-4)
    np.testing.assert_allclose(matrix.T @ matrix, np.eye(2), atol=1e-5)
    assert np.linalg.det(matrix) == pytest.approx(1.0, abs=1e-5)
    assert not np.allclose(matrix, np.eye(2), atol=1e-2), "the rotation should not be the identity"
    np.testing.assert_allclose(pairwise_distances(rotated[:200]), pairwise_distances(original[:200]), atol=1e-4)


def test_blobs_are_seeded_and_well_separated():
    a, b, c = make_blobs_views(seed=0), make_blobs_views(seed=0), make_blobs_views(seed=1)
    assert all(np.array_equal(x, y) for x, y in zip(a.views, b.views))
    assert not np.allclose(a.views[1], c.views[1])
    centers = np.stack([a.views[0][a.labels == k].mean(0) for k in range(a.n_classes)])
    gaps = pairwise_distances(centers)[~np.eye(a.n_classes, dtype=bool)]
    assert gaps.min() > 8 * 0.5, "centers should sit many cluster widths apart"


# --- digits ------------------------------------------------------------------------------------


def test_digits_first_view_is_the_scaled_image(digits):
    raw = load_digits()
    assert digits.name == "digits" and digits.view_names == ("image", "same_class_noisy")
    assert digits.view_dims == (64, 64) and digits.n_classes == 10
    np.testing.assert_allclose(digits.views[0], raw.data / 16.0, atol=1e-7)
    assert np.array_equal(digits.labels, raw.target)
    assert digits.views[0].min() == 0.0 and digits.views[0].max() == 1.0


def test_digits_second_view_is_another_same_class_image_plus_noise(digits):
    images, noisy = (view.astype(np.float64) for view in digits.views)
    squared = (noisy**2).sum(1)[:, None] - 2 * noisy @ images.T + (images**2).sum(1)[None, :]
    partner = squared.argmin(axis=1)
    assert np.array_equal(digits.labels[partner], digits.labels)
    # A few digits images are exact duplicates, so allow a handful of rows to match themselves.
    assert np.mean(partner != np.arange(digits.n_samples)) > 0.95
    residual = noisy - images[partner]
    assert residual.std() == pytest.approx(0.2, rel=0.03)
    assert abs(residual.mean()) < 0.01


def test_digits_without_noise_pairs_each_image_with_a_different_same_class_sample():
    data = make_digits_views(noise_std=0.0, seed=5)
    images, partner_images = data.views
    for i in range(0, data.n_samples, 7):
        same = np.flatnonzero((images == partner_images[i]).all(axis=1))
        assert np.all(data.labels[same] == data.labels[i])
        assert np.any(same != i), f"row {i}: the partner should be another sample"


def test_digits_partner_choice_depends_on_the_seed():
    a, b = make_digits_views(noise_std=0.0, seed=0), make_digits_views(noise_std=0.0, seed=1)
    assert np.array_equal(a.views[0], b.views[0])
    assert not np.array_equal(a.views[1], b.views[1])


# --- splits ------------------------------------------------------------------------------------


def assert_is_partition(split, n):
    parts = [split.train, split.val, split.test]
    joined = np.concatenate(parts)
    assert joined.size == n and np.array_equal(np.sort(joined), np.arange(n)), "splits must cover every sample once"


def test_split_is_a_disjoint_cover_with_paper_sizes(digits):
    split = split_indices(digits.labels, seed=0)
    n = digits.n_samples
    assert_is_partition(split, n)
    n_test = int(np.ceil(0.2 * n))
    assert split.test.size == n_test
    # val_fraction is a fraction of the training part, not of all samples.
    assert split.val.size == int(np.ceil(0.1 * (n - n_test)))
    assert split.train.size == n - n_test - split.val.size


def test_split_is_stratified(digits):
    split = split_indices(digits.labels, seed=4)
    counts = np.bincount(digits.labels)
    test_counts = np.bincount(digits.labels[split.test], minlength=10)
    assert np.all(np.abs(test_counts - 0.2 * counts) <= 1)
    train_part = counts - test_counts
    val_counts = np.bincount(digits.labels[split.val], minlength=10)
    assert np.all(np.abs(val_counts - 0.1 * train_part) <= 1)


def test_split_is_seeded(digits):
    a, b, c = (split_indices(digits.labels, seed=s) for s in (7, 7, 8))
    for name in ("train", "val", "test"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.test, c.test)
    assert not np.array_equal(a.val, c.val)


def test_split_falls_back_when_a_class_is_too_small():
    labels = np.array([0] * 20 + [1] * 20 + [2])  # class 2 has a single sample
    with pytest.warns(UserWarning, match="not stratified"):
        split = split_indices(labels, seed=0)
    assert_is_partition(split, labels.size)
    assert split.val.size >= 1


def test_split_gives_a_validation_sample_even_for_a_tiny_fraction():
    labels = np.repeat(np.arange(3), 4)
    with pytest.warns(UserWarning):
        split = split_indices(labels, seed=0, val_fraction=0.01)
    assert_is_partition(split, labels.size)
    assert split.val.size == 1


def test_split_without_validation():
    labels = np.repeat(np.arange(4), 10)
    split = split_indices(labels, seed=0, val_fraction=0.0)
    assert split.val.size == 0
    assert_is_partition(split, labels.size)


@pytest.mark.parametrize("kwargs", [{"test_fraction": 0.0}, {"test_fraction": 1.0}, {"val_fraction": 1.0}])
def test_split_rejects_bad_fractions(kwargs):
    with pytest.raises(ValueError, match="fraction"):
        split_indices(np.repeat(np.arange(2), 10), seed=0, **kwargs)


# --- scalers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_split(digits):
    return split_indices(digits.labels, seed=0)


def test_standard_scaler_is_fitted_on_train_only(digits, digits_split):
    train = digits.subset(digits_split.train)
    test = digits.subset(digits_split.test)
    scalers = fit_view_scalers(train.views, "standard")
    scaled_train = apply_view_scalers(scalers, train.views)
    scaled_test = apply_view_scalers(scalers, test.views)
    for raw, scaled in zip(train.views, scaled_train):
        varying = raw.std(0) > 1e-6
        assert varying.sum() > 40
        np.testing.assert_allclose(scaled.mean(0), 0.0, atol=1e-4)
        np.testing.assert_allclose(scaled.std(0)[varying], 1.0, atol=1e-3)
    # The offset is the training mean, so the test split is not exactly centered.
    np.testing.assert_allclose(scalers[0].offset, train.views[0].mean(0), atol=1e-6)
    assert np.abs(scaled_test[1].mean(0)).max() > 1e-3
    assert all(s.dtype == np.float32 for s in scaled_train + scaled_test)


def test_minmax_scaler_maps_train_to_unit_range(digits, digits_split):
    train = digits.subset(digits_split.train)
    (scaled,) = apply_view_scalers(fit_view_scalers(train.views[1:], "minmax"), train.views[1:])
    np.testing.assert_allclose(scaled.min(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(scaled.max(0), 1.0, atol=1e-6)


@pytest.mark.parametrize("kind", ["standard", "minmax"])
def test_constant_feature_gives_no_nan(kind):
    x = np.column_stack([np.full(50, 3.7), np.linspace(-1, 1, 50)]).astype(np.float32)
    (scaler,) = fit_view_scalers([x], kind)
    scaled = scaler.transform(x)
    assert np.all(np.isfinite(scaled))
    np.testing.assert_allclose(scaled[:, 0], 0.0, atol=1e-6)
    assert scaler.scale[0] == 1.0


def test_none_scaler_is_the_identity(digits):
    scaled = apply_view_scalers(fit_view_scalers(digits.views, "none"), digits.views)
    assert all(np.array_equal(a, b) for a, b in zip(scaled, digits.views))


def test_unknown_scaler_kind_lists_the_allowed_kinds(digits):
    with pytest.raises(ValueError, match="standard.*minmax.*none"):
        fit_view_scalers(digits.views, "robust")


def test_apply_scalers_rejects_a_view_of_the_wrong_width(digits):
    scalers = fit_view_scalers(digits.views, "standard")
    with pytest.raises(ValueError, match="view 1 has 3 features"):
        apply_view_scalers(scalers, [digits.views[0], np.zeros((digits.n_samples, 3))])


# --- MultiViewData -----------------------------------------------------------------------------


def small_views(n=6):
    rng = np.random.default_rng(0)
    return [rng.normal(size=(n, 3)), rng.normal(size=(n, 2))]


def test_multiview_data_rejects_a_nan_view_naming_it():
    views = small_views()
    views[1][2, 0] = np.nan
    with pytest.raises(ValueError, match="view 1 holds 1 NaN"):
        MultiViewData(views=tuple(views), labels=np.zeros(6), name="toy", view_names=("a", "b"))


def test_multiview_data_rejects_mismatched_rows_naming_the_views():
    views = small_views()
    views[1] = views[1][:4]
    with pytest.raises(ValueError, match=r"disagree on the number of samples.*view 1: \(4, 2\)"):
        MultiViewData(views=tuple(views), labels=np.zeros(6), name="toy", view_names=("a", "b"))


@pytest.mark.parametrize(
    "labels, message",
    [(np.zeros(5), "5 labels for 6 samples"), (np.array([0, 1, 2, -1, 0, 1]), "0..K-1"), (np.full(6, 0.5), "0..K-1")],
)
def test_multiview_data_rejects_bad_labels(labels, message):
    with pytest.raises(ValueError, match=message):
        MultiViewData(views=tuple(small_views()), labels=labels, name="toy", view_names=("a", "b"))


def test_multiview_data_rejects_wrong_number_of_view_names():
    with pytest.raises(ValueError, match="1 view names for 2 views"):
        MultiViewData(views=tuple(small_views()), labels=np.zeros(6), name="toy", view_names=("a",))


def test_subset_and_with_views_keep_rows_aligned():
    views = small_views()
    data = MultiViewData(views=tuple(views), labels=np.array([0, 1, 2, 0, 1, 2]), name="toy", view_names=("a", "b"))
    part = data.subset(np.array([4, 1]))
    assert np.array_equal(part.labels, [1, 1])
    np.testing.assert_allclose(part.views[1], views[1][[4, 1]].astype(np.float32))
    assert part.name == "toy" and part.view_names == ("a", "b")
    masked = data.subset(data.labels == 2)
    assert np.array_equal(masked.labels, [2, 2])
    doubled = data.with_views([2 * v for v in data.views])
    np.testing.assert_allclose(doubled.views[0], 2 * data.views[0])
    assert np.array_equal(doubled.labels, data.labels) and doubled.view_names == ("a", "b")
    with pytest.raises(ValueError, match="out of range"):
        data.subset(np.array([6]))


# --- registry ----------------------------------------------------------------------------------


def test_load_dataset_builds_known_names():
    assert dataset_names() == ("blobs", "digits", "handwritten", "bdgp", "noisymnist", "infinitemnist")
    data = load_dataset("blobs", seed=2)
    assert data.name == "blobs"
    assert np.array_equal(data.views[1], make_blobs_views(seed=2).views[1])


def test_load_dataset_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="unknown dataset 'mnist'.*blobs, digits"):
        load_dataset("mnist")


@pytest.mark.parametrize("kind, base", [("l2", "none"), ("standard_l2", "standard")])
def test_row_normalizing_scalers_give_unit_rows_after_the_feature_scaling(digits, kind, base):
    x = digits.views[0][:200]
    (scaler,) = fit_view_scalers([x], kind)
    (plain,) = fit_view_scalers([x], base)
    scaled = scaler.transform(x)
    np.testing.assert_allclose(np.linalg.norm(scaled, axis=1), 1.0, atol=1e-5)
    expected = plain.transform(x)
    np.testing.assert_allclose(scaled, expected / np.linalg.norm(expected, axis=1, keepdims=True), atol=1e-6)


def test_row_normalization_keeps_zero_rows_zero_and_nan_rows_nan():
    x = np.array([[0.0, 0.0], [3.0, 4.0], [np.nan, np.nan]])
    (scaler,) = fit_view_scalers([x[:2]], "l2")
    out = scaler.transform(x)
    np.testing.assert_array_equal(out[0], [0.0, 0.0])
    np.testing.assert_allclose(out[1], [0.6, 0.8], atol=1e-7)
    assert np.all(np.isnan(out[2]))
