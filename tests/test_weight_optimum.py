"""experiments/weight_optimum.py: the per-sample weights the fusion-only loss asks for, on cases
whose answer is known."""

from __future__ import annotations

import numpy as np

from tests.experiment_scripts import load_experiment


def load_script():
    return load_experiment("weight_optimum")


def test_the_projection_lands_on_the_simplex_and_keeps_points_already_there():
    project = load_script().simplex_projection
    rng = np.random.default_rng(0)
    projected = project(rng.normal(size=(50, 4)) * 3)
    assert np.all(projected >= 0) and np.allclose(projected.sum(axis=1), 1.0)
    inside = rng.dirichlet(np.ones(3), size=20)
    np.testing.assert_allclose(project(inside), inside, atol=1e-12)
    np.testing.assert_allclose(project(np.array([[2.0, 0.0], [0.3, 0.3]])), [[1.0, 0.0], [0.5, 0.5]])


def test_two_views_give_the_target_projected_onto_the_segment_between_their_points():
    script = load_script()
    rng = np.random.default_rng(1)
    points = rng.normal(size=(2, 30, 5))
    targets = rng.normal(size=(30, 5))
    a, b = points
    closed = np.clip(np.sum((targets - b) * (a - b), 1) / np.sum((a - b) ** 2, 1), 0, 1)
    found = script.nearest_combination(points, targets, np.full((30, 2), 0.5))
    np.testing.assert_allclose(found[:, 0], closed, atol=1e-6)


def test_a_target_that_is_a_mix_of_three_views_is_found_as_that_mix():
    script = load_script()
    rng = np.random.default_rng(2)
    points = rng.normal(size=(3, 10, 6))  # 3 points in 6 dimensions: the mix is unique
    mix = rng.dirichlet(np.ones(3), size=10)
    targets = np.einsum("iv,vik->ik", mix, points)
    np.testing.assert_allclose(script.nearest_combination(points, targets, np.full((10, 3), 1 / 3)), mix, atol=1e-4)


def test_the_target_is_the_degree_weighted_mean_of_the_neighbours_over_all_views():
    targets, degrees = load_script().neighbour_targets(
        np.array([[0, 1, 3], [1, 0, 0], [3, 0, 0]], float),  # two views' graphs, summed
        np.array([[0.0], [4.0], [8.0]]),
    )
    np.testing.assert_allclose(degrees, [4.0, 1.0, 3.0])
    np.testing.assert_allclose(targets[:, 0], [(1 * 4 + 3 * 8) / 4, 0.0, 0.0])
