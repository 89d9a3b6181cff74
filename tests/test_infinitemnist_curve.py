"""experiments/infinitemnist_curve.py without training: the command it runs, how it merges runs
into the results file, and the figure it draws; and (slow) experiments/gpu_pipeline.sh end to end
at a small size on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.experiment_scripts import load_experiment

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "infinitemnist_curve.py"


def load_script():
    return load_experiment("infinitemnist_curve")


def record(n: int, seed: int, kind: str, acc: float) -> dict:
    return {"n": n, "seed": seed, "device_kind": kind, "kmeans_acc": acc}


def test_the_command_is_one_cli_run_of_the_size_with_every_setting(tmp_path):
    command = load_script().train_command(20000, 3, "DATA", tmp_path / "r", ["train.epochs=5", "graph.n_neighbors=10"])
    assert command[1:4] == ["-m", "specrage_jax.cli", "train"]
    assert "--dataset=infinitemnist:20000" in command and "--seed=3" in command
    assert command[-2:] == ["--set=train.epochs=5", "--set=graph.n_neighbors=10"]


def test_a_rerun_replaces_its_own_row_and_keeps_the_other_devices():
    module = load_script()
    previous = [record(20000, 0, "cpu", 0.87), record(1000000, 0, "gpu", 0.99)]
    runs = module.merged(previous, [record(20000, 0, "cpu", 0.90), record(100000, 0, "cpu", 0.95)])
    assert [(r["device_kind"], r["n"], r["kmeans_acc"]) for r in runs] == [
        ("cpu", 20000, 0.90),
        ("cpu", 100000, 0.95),
        ("gpu", 1000000, 0.99),
    ]


def test_the_figure_is_written(tmp_path):
    path = tmp_path / "curve.png"
    load_script().plot(
        [record(20000, 0, "cpu", 0.9), record(20000, 1, "cpu", 0.8), record(10**6, 0, "gpu", 0.99)], path
    )
    assert path.stat().st_size > 1000 and path.read_bytes()[:4] == b"\x89PNG"


MNIST = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.mark.slow  # the whole pipeline at 1,000 samples (~30 s); the prepared GPU run, as the device runs it
@pytest.mark.skipif(not (MNIST / "mnist").is_dir(), reason="needs ../shared/datasets/mnist")
def test_the_prepared_gpu_run_works_end_to_end_at_a_small_size(tmp_path):
    script = SCRIPT.parent / "gpu_pipeline.sh"
    env = {**os.environ, "OUT": str(tmp_path), "SIZES": "1000", "SEEDS": "0", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(script), str(MNIST)], cwd=SCRIPT.parents[1], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs = json.loads((tmp_path / "infinitemnist_curve.json").read_text())["runs"]
    mine = [r for r in runs if r["n"] == 1000]
    assert len(mine) == 1 and 0.0 < mine[0]["kmeans_acc"] <= 1.0 and mine[0]["wall_seconds"] > 0
    assert {r["n"] for r in runs} >= {1000, 20000, 100000}  # the committed CPU points are kept
    assert (tmp_path / "infinitemnist_curve.png").stat().st_size > 0
