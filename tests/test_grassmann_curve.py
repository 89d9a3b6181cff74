"""experiments/grassmann_curve.py on a tiny configuration: the JSON it writes."""

from __future__ import annotations

import json

import pytest

from tests.experiment_scripts import load_experiment


def matched_initial(result: dict) -> float:
    return result["density_matched"]["initial_grassmann_sq"]


@pytest.mark.slow  # runs the figure script end to end
def test_grassmann_curve_script_writes_a_falling_curve(tmp_path):
    module = load_experiment("grassmann_curve")
    out = tmp_path / "g.json"
    module.main(
        [
            "--dataset",
            "blobs",
            "--set",
            "train.epochs=4",
            "--set",
            "model.view_hidden=64,64",
            "--max-reference",
            "200",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    k = result["k"]
    assert result["epochs"] == [0, 1, 2, 3] and result["reference_rows"] == 200
    assert all(0.0 <= g <= k for g in result["grassmann_sq"])
    assert result["grassmann_sq"][-1] < result["grassmann_sq"][0]
    assert 0.0 <= result["initial_grassmann_sq"] <= k and 0.0 <= matched_initial(result) <= k
    assert len(result["final_quadratic_forms"]) == 2
    matched = result["density_matched"]
    # 200 reference rows, 1024-row batches capped at the 2160 training rows: l 30 -> round(30 * 200 / 1024)
    assert matched["n_neighbors"] == 6 and matched["scale_neighbor"] == 3
    assert len(matched["grassmann_sq"]) == 4 and all(0.0 <= g <= k for g in matched["grassmann_sq"])
    assert len(result["mean_view_weights"]) == 4
    assert (tmp_path / "g.png").stat().st_size > 1000


def test_density_matched_graph_scales_l_and_the_sigma_neighbour():
    from specrage_jax.config import GraphConfig
    from specrage_jax.evaluation.monitor import density_matched_graph

    graph = density_matched_graph(GraphConfig(n_neighbors=100), 200, 1024)
    assert (graph.n_neighbors, graph.sigma_neighbor) == (20, 20)
    tiny = density_matched_graph(GraphConfig(n_neighbors=3, scale_neighbor=2), 10, 1024)
    assert (tiny.n_neighbors, tiny.sigma_neighbor) == (1, 1)
    assert density_matched_graph(GraphConfig(n_neighbors=3000), 5000, 1024).n_neighbors == 4999
