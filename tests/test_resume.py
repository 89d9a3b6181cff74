"""`specrage train` killed with SIGKILL and continued with `--resume` ends exactly where the
uninterrupted run ends: same metrics, same history, bitwise the same model (one CPU, same code)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from specrage_jax.cli import main
from specrage_jax.training.checkpoint import load_model

EPOCHS = 12
# Small nets keep the three runs short; 12 epochs leave ~10 to run after the 2nd checkpoint appears.
COMMON = [
    "--dataset",
    "digits",
    "--seed",
    "0",
    "--epochs",
    str(EPOCHS),
    "--quiet",
    "--no-figure",
    "--checkpoint-every",
    "1",
    "--set",
    "model.view_hidden=256,256",
    "--set",
    "eval.kmeans_n_init=3",
]
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def env_with_compile_cache(cache: Path) -> dict[str, str]:
    """The three runs share a persistent compilation cache (every compile, however quick): the same
    programs, compiled once, so the later runs start in seconds."""
    return {
        **ENV,
        "JAX_COMPILATION_CACHE_DIR": str(cache),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "specrage_jax.cli", "train", *args]


def wait_for(path: Path, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.is_dir():
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended (rc {proc.returncode}) before {path} appeared:\n{proc.stderr.read()[-3000:]}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def newest_epoch(ckpt_dir: Path) -> int:
    return max(int(p.name.split("_")[1]) for p in ckpt_dir.glob("epoch_*") if p.name.split("_")[1].isdigit())


def without_timings(metrics: dict) -> dict:
    training = {**metrics["training"], "epochs": [{**r, "seconds": 0.0} for r in metrics["training"]["epochs"]]}
    training.pop("resumed_from_epoch")
    return {"test": metrics["test"], "training": training, "n_samples": metrics["n_samples"]}


@pytest.mark.slow  # a killed and a resumed CLI run: ~25 s; the default suite is at its time budget
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, capsys):
    interrupted, uninterrupted = tmp_path / "d1", tmp_path / "d2"
    env = env_with_compile_cache(tmp_path / "jax-cache")
    proc = subprocess.Popen(
        cli(*COMMON, "--out", str(interrupted)), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    wait_for(interrupted / "checkpoints" / "epoch_2", proc, timeout=300)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert not (interrupted / "metrics.json").exists(), "the run finished before it was killed"
    killed_at = newest_epoch(interrupted / "checkpoints")
    assert 2 <= killed_at < EPOCHS

    # a fresh run may not overwrite the checkpoints of an interrupted one
    assert main(["train", *COMMON, "--out", str(interrupted)]) == 2
    assert "holds the checkpoints of an interrupted run" in capsys.readouterr().err
    # nor may a resume change what the run was started with
    assert main(["train", "--resume", str(interrupted), "--seed", "1"]) == 2
    assert "--seed 1 (recorded: 0)" in capsys.readouterr().err
    assert main(["train", "--resume", str(interrupted), "--set", "train.learning_rate=0.01"]) == 2
    assert "train.learning_rate: 0.001 -> 0.01" in capsys.readouterr().err

    # damage the newest checkpoint: resume falls back to the one before, and says so
    newest = interrupted / "checkpoints" / f"epoch_{killed_at}" / "arrays"
    biggest = max((p for p in newest.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    os.truncate(biggest, biggest.stat().st_size // 2)
    resumed = subprocess.run(
        cli("--resume", str(interrupted), "--quiet", "--no-figure"),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (
        f"skipped damaged training checkpoints: checkpoint {interrupted.absolute()}/checkpoints/epoch_{killed_at} "
        f"is corrupted" in resumed.stderr
    )
    assert f"resumed from the checkpoint after epoch {killed_at - 1}" in resumed.stdout

    full = subprocess.run(
        cli(*COMMON, "--out", str(uninterrupted)), env=env, capture_output=True, text=True, timeout=600
    )
    assert full.returncode == 0, full.stderr[-3000:]

    a = json.loads((interrupted / "metrics.json").read_text())
    b = json.loads((uninterrupted / "metrics.json").read_text())
    assert a["training"]["resumed_from_epoch"] == killed_at - 1 and b["training"]["resumed_from_epoch"] is None
    assert len(b["training"]["epochs"]) == EPOCHS
    assert without_timings(a) == without_timings(b)  # k-means ACC/NMI/ARI, SVM metrics, losses: exactly equal
    assert b["test"]["kmeans"]["acc"] > 0.5
    model_a, model_b = load_model(interrupted / "model"), load_model(uninterrupted / "model")
    for x, y in zip(jax.tree.leaves(model_a.state.params), jax.tree.leaves(model_b.state.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(model_a.state.r_inv), np.asarray(model_b.state.r_inv))
    assert json.loads((interrupted / "checkpoints" / "run.json").read_text())["status"] == "complete"
