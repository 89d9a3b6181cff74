"""experiments/cca_baselines.py on small synthetic sets (no data files)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import fractional_matrix_power

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import cca_baselines as cb


def shared_latent_views(rng: np.random.Generator, n_per_class: int = 50) -> tuple[list[np.ndarray], np.ndarray]:
    """Two views that are different random linear maps (to 20 and 15 features) of the same 2-D
    latent of three clusters, each with its own noise."""
    labels = np.repeat(np.arange(3), n_per_class)
    centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    latent = centres[labels] + rng.normal(0, 0.7, (labels.size, 2))
    views = [latent @ rng.normal(size=(2, d)) + rng.normal(0, 0.3, (labels.size, d)) for d in (20, 15)]
    return views, labels


def test_both_methods_recover_the_clusters_of_a_shared_latent():
    views, labels = shared_latent_views(np.random.default_rng(0))
    entry = cb.cca_baselines(views, labels, 3, seeds=(0,), shrinkage=(0.1,))
    assert set(entry["baselines"]) == {"mcca/c0.1", "mcca/c0.1/unit", "gcca/c0.1", "gcca/c0.1/unit"}
    assert entry["baselines"]["mcca/c0.1"]["ACC"] >= 0.95
    assert entry["baselines"]["gcca/c0.1"]["ACC"] >= 0.95
    assert entry["dims"] == [20, 15] and entry["reduced_dims"] == [20, 15]
    assert entry["cca_best"]["ACC"] >= 0.95 and entry["cca_best"]["settings"] == 4
    # the shared 2-D latent shows as two correlations near 1; the third direction is noise
    spectrum = entry["baselines"]["mcca/c0.1"]["spectrum"]
    assert spectrum[1] > 0.8 and spectrum[2] < 0.6


def test_pure_noise_views_give_near_chance():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(3), 50)
    views = [rng.normal(size=(150, 20)), rng.normal(size=(150, 15))]
    entry = cb.cca_baselines(views, labels, 3, seeds=(0, 1), shrinkage=(0.1, 0.9))
    assert all(numbers["ACC"] < 0.55 for numbers in entry["baselines"].values())


def test_identical_views_have_canonical_correlation_one():
    x = np.random.default_rng(2).normal(size=(80, 6))
    _, correlations = cb.mcca([x, x], 3, 1e-6)
    np.testing.assert_allclose(correlations, 1.0, atol=1e-4)
    _, values = cb.gcca([x, x, x], 3, 1e-6)  # sum of three equal projections: eigenvalue 3
    np.testing.assert_allclose(values, 3.0, atol=1e-4)


def test_two_view_mcca_is_classical_cca():
    """On two views (no shrinkage) the SUMCOR eigenvalues are the singular values of
    C11^-1/2 C12 C22^-1/2, the canonical correlations."""
    rng = np.random.default_rng(3)
    shared = rng.normal(size=(200, 2))
    a = np.hstack([shared, rng.normal(size=(200, 3))]) @ rng.normal(size=(5, 5))
    b = np.hstack([shared + 0.5 * rng.normal(size=(200, 2)), rng.normal(size=(200, 2))])
    a, b = cb.centered(a), cb.centered(b)
    c11, c22, c12 = a.T @ a, b.T @ b, a.T @ b
    expected = np.linalg.svd(fractional_matrix_power(c11, -0.5) @ c12 @ fractional_matrix_power(c22, -0.5))[1]
    _, correlations = cb.mcca([a, b], 3, 0.0)
    np.testing.assert_allclose(correlations, expected[:3], atol=1e-8)


def test_reduction_caps_wide_views_and_names_the_settings():
    rng = np.random.default_rng(4)
    wide = rng.normal(size=(40, 300))
    assert cb.reduce_view(wide).shape == (40, 39)
    sparse = (rng.random((40, 500)) < 0.02).astype(float)
    assert cb.reduce_view(sparse).shape[1] <= 39
    assert len(cb.setting_names()) == 16 and "gcca/c0.3/unit" in cb.setting_names()
    with pytest.raises(ValueError, match="two views"):
        cb.mcca([wide], 2, 0.1)


def test_the_baseline_scripts_choose_sets_by_name_and_refuse_unknown_ones():
    nb = cb.nb
    parser = argparse.ArgumentParser()
    nb.add_set_arguments(parser, data_dir_required=False)
    every = parser.parse_args(["--datasets", "all", "--variants", "translations6"])
    assert nb.chosen_sets(every) == [("suite", nb.known_sets("suite")), ("variants", ["translations6"])]
    with pytest.raises(SystemExit, match=r"unknown variants names \['translations7'\]; known: .*translations6"):
        nb.chosen_sets(parser.parse_args(["--variants", "translations7"]))
