"""SIGTERM during `specrage train` (one process, and two under `specrage launch`): training stops
after the step in progress, writes a checkpoint, prints one line saying how to resume and exits
75; `--resume` then ends bitwise where the uninterrupted run ends."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from specrage_jax.training import preemption
from specrage_jax.training.checkpoint import read_model
from specrage_jax.training.preemption import PREEMPTED_EXIT_CODE
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train
from tests.simulated_devices import simulated_devices_env

# 40 steps an epoch: a signal after the first checkpoint lands within the second epoch
ARGS = ["--dataset", "blobs", "--epochs", "3", "--seed", "0", "--quiet", "--no-figure", "--checkpoint-every", "1",
        "--set", "model.view_hidden=32,32", "--set", "train.batch_size=64", "--set", "train.steps_per_epoch=40",
        "--set", "eval.kmeans_n_init=1"]  # fmt: skip
LINE = re.compile(
    r"specrage: preempted: training stopped by SIGTERM at step (\d+), .*; checkpoint written to (\S+); "
    r"resume with: (.+)$",
    re.M,
)


def env_for(tmp: Path, devices: int = 1) -> dict[str, str]:
    """One CPU device per process, a compilation cache shared by the runs of a test."""
    return {
        **simulated_devices_env(devices),
        "OPENBLAS_NUM_THREADS": "1",
        "JAX_COMPILATION_CACHE_DIR": str(tmp / "jax-cache"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


def specrage(*args: str) -> list[str]:
    return [sys.executable, "-m", "specrage_jax.cli", *args]


def signal_after_first_checkpoint(proc: subprocess.Popen, run: Path, pid: int) -> None:
    """SIGTERM to ``pid`` once ``run``'s checkpoint after epoch 1 is committed."""
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "epoch_1" / "commit_success.txt").exists():
        assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint after epoch 1"
        time.sleep(0.02)
    os.kill(pid, signal.SIGTERM)


def outputs(run: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(test metrics and history without timings, the saved model's parameters and R^-1)."""
    metrics = json.loads((run / "metrics.json").read_text())
    training = {k: v for k, v in metrics["training"].items() if not k.startswith("resumed_from")}
    training["epochs"] = [{**r, "seconds": 0.0} for r in training["epochs"]]
    state = read_model(run / "model").state
    arrays = {"r_inv": np.asarray(state.r_inv)} | {
        f"param_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(state.params))
    }
    return {"test": metrics["test"], "training": training}, arrays


def assert_same_run(a: Path, b: Path) -> None:
    (metrics_a, arrays_a), (metrics_b, arrays_b) = outputs(a), outputs(b)
    assert metrics_a == metrics_b  # k-means, SVM, every loss and view weight: exactly equal
    for key, value in arrays_b.items():
        np.testing.assert_array_equal(arrays_a[key], value, err_msg=key)


@pytest.mark.slow  # three CLI runs: ~60 s alone on 2 loaded cores; the train_loop test below runs by default
def test_sigterm_stops_at_a_step_writes_a_checkpoint_and_resume_ends_as_uninterrupted(tmp_path):
    run, full = tmp_path / "run", tmp_path / "full"
    env = env_for(tmp_path)
    proc = subprocess.Popen(specrage("train", *ARGS, "--out", str(run)), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    signal_after_first_checkpoint(proc, run, proc.pid)
    sent = time.monotonic()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED_EXIT_CODE, stderr[-3000:]
    assert time.monotonic() - sent < 20
    found = LINE.findall(stderr)
    assert len(found) == 1 and stderr.count("specrage: preempted") == 1, stderr[-3000:]
    step, checkpoint, command = found[0]
    assert command == f"specrage train --resume {run}"
    assert 40 < int(step) < 120  # after the first epoch's checkpoint, before the end
    record = json.loads((Path(checkpoint) / "specrage" / "metadata").read_text())
    assert record["history"]["steps"] + record.get("partial_epoch", {}).get("steps_done", 0) == int(step)
    assert json.loads((run / "checkpoints" / "run.json").read_text())["status"] == "preempted"
    assert not (run / "metrics.json").exists()

    resumed = subprocess.run(specrage("train", "--resume", str(run), "--quiet", "--no-figure"), env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from the checkpoint after epoch" in resumed.stdout
    uninterrupted = subprocess.run(specrage("train", *ARGS, "--out", str(full)), env=env, capture_output=True,
                                   text=True, timeout=600)  # fmt: skip
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert_same_run(run, full)


@pytest.mark.slow  # two launched groups and a resume: ~4-6 min on 2 loaded cores
def test_sigterm_to_the_launcher_stops_both_processes_at_one_step(tmp_path):
    """The launcher passes SIGTERM on; both processes stop after the same step (JAX's preemption
    service), one checkpoint, exit 75; `launch --local 2 -- train --resume` ends as the
    uninterrupted two-process run, bitwise."""
    run, full = tmp_path / "run", tmp_path / "full"
    env = env_for(tmp_path)
    launcher = subprocess.Popen(specrage("launch", "--local", "2", "--", "train", *ARGS, "--out", str(run)),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    signal_after_first_checkpoint(launcher, run, launcher.pid)
    stdout, stderr = launcher.communicate(timeout=180)
    assert launcher.returncode == PREEMPTED_EXIT_CODE, stdout[-3000:] + stderr[-3000:]
    found = LINE.findall(stdout)
    assert len(found) == 1 and "[0] specrage: preempted" in stdout, stdout[-3000:]
    step, checkpoint, command = found[0]
    assert command == f"specrage launch --local 2 -- train --resume {run}"
    assert (Path(checkpoint) / "specrage_files.json").is_file() or Path(checkpoint).is_dir()

    resumed = subprocess.run(specrage("launch", "--local", "2", "--", "train", "--resume", str(run), "--quiet"),
                             env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    uninterrupted = subprocess.run(specrage("launch", "--local", "2", "--", "train", *ARGS, "--out", str(full)),
                                   env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert uninterrupted.returncode == 0, uninterrupted.stdout[-3000:]
    assert_same_run(run, full)


def test_the_watch_restores_the_handlers_and_a_second_signal_interrupts():
    # Python's own SIGINT handler as the one the watch replaces: a process started in the
    # background by a non-interactive shell (`make test &`) inherits SIGINT ignored, and then the
    # second signal, handed back to that handler, rightly does nothing
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _watch_restores_the_handlers_and_a_second_signal_interrupts()
    finally:
        signal.signal(signal.SIGINT, previous_sigint)


def _watch_restores_the_handlers_and_a_second_signal_interrupts() -> None:
    before = {s: signal.getsignal(s) for s in preemption.SIGNALS}
    with preemption.watch() as watch:
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
        with preemption.watch() as inner:
            assert inner is watch  # nested watches share the outer one
        assert not watch.requested()
        signal.raise_signal(signal.SIGINT)
        assert watch.requested() and watch.name() == "SIGINT"
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # the second one: at once, as without the watch
    assert {s: signal.getsignal(s) for s in preemption.SIGNALS} == before
    with preemption.watch(enabled=False) as off:
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT] and not off.requested()


def test_train_loop_stops_within_an_epoch_and_resumes_bitwise(tmp_path):
    """A SIGTERM raised after epoch 1 stops train_loop after the next step: a checkpoint within
    epoch 2, Preempted; resuming from it gives the uninterrupted state and history, bitwise."""
    from specrage_jax import OrthoConfig, create_state
    from specrage_jax.data import load_dataset
    from specrage_jax.training.checkpoint import TrainingCheckpointer
    from specrage_jax.training.loop import train_loop

    views = [np.asarray(v[:400], np.float32) for v in load_dataset("blobs").views]
    train, val = [v[:320] for v in views], [v[320:] for v in views]
    config = fixed_train(epochs=3, batch_size=64, steps_per_epoch=6, progress=False)

    def fresh():
        model, graph = fixed_model(n_components=3, view_hidden=(16,)), fixed_graph(n_neighbors=5, scale_mode="batch")
        return create_state([v.shape[1] for v in views], model, graph, OrthoConfig(), learning_rate=1e-3, seed=0)

    def preempt_after_first(state, record):
        if record.epoch == 0:
            signal.raise_signal(signal.SIGTERM)

    with TrainingCheckpointer(tmp_path / "ckpt", keep=2) as ckpt:
        with pytest.raises(preemption.Preempted) as stopped:
            train_loop(fresh(), train, val, config, seed=0, checkpointer=ckpt, on_epoch_end=preempt_after_first)
    assert stopped.value.progress.epochs_done == 1 and stopped.value.progress.steps_done == 1
    assert stopped.value.checkpoint == tmp_path / "ckpt" / "within_epoch" / "step_7"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored
    with TrainingCheckpointer(tmp_path / "ckpt", keep=2) as ckpt:
        latest = ckpt.restore_latest(fresh())
        assert latest is not None and latest.progress.steps_done == 1
        resumed, history = train_loop(latest.state, train, val, config, seed=0, checkpointer=ckpt,
                                      resume=latest.progress)  # fmt: skip
    expected, expected_history = train_loop(fresh(), train, val, config, seed=0)
    strip = [{**r.__dict__, "seconds": 0} for r in history.epochs]
    assert strip == [{**r.__dict__, "seconds": 0} for r in expected_history.epochs]
    for a, b in zip(jax.tree.leaves(resumed.params), jax.tree.leaves(expected.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(resumed.r_inv), np.asarray(expected.r_inv))


# The InfiniteMNIST pipeline streamed from disk with every stage small: 40 SpecRaGE steps an epoch
PIPELINE_ARGS = ["--dataset", "infinitemnist:1500", "--stream", "on", "--epochs", "3", "--seed", "0", "--quiet",
                 "--no-figure", "--checkpoint-every", "1", "--set", "model.view_hidden=32,32",
                 "--set", "train.batch_size=128", "--set", "train.steps_per_epoch=40",
                 "--set", "autoencoder.hidden=32,32", "--set", "autoencoder.epochs=2",
                 "--set", "autoencoder.steps_per_epoch=10", "--set", "siamese.hidden=32",
                 "--set", "siamese.epochs=1", "--set", "siamese.steps_per_epoch=10",
                 "--set", "eval.kmeans_n_init=1"]  # fmt: skip


@pytest.mark.slow  # three runs of the streamed InfiniteMNIST pipeline (~1-2 min on 2 cores)
def test_sigterm_in_the_specrage_stage_of_a_streamed_infinitemnist_run_resumes_to_the_same_metrics(tmp_path):
    from tests.test_streaming import fake_mnist

    data = str(fake_mnist(tmp_path / "data", n_train=600, n_test=200))
    run, full = tmp_path / "run", tmp_path / "full"
    env = env_for(tmp_path)
    args = [*PIPELINE_ARGS, "--data-dir", data]
    proc = subprocess.Popen(specrage("train", *args, "--out", str(run)), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    signal_after_first_checkpoint(proc, run, proc.pid)  # pre-training done: in SpecRaGE's second epoch
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == PREEMPTED_EXIT_CODE, stderr[-3000:]
    found = LINE.findall(stderr)
    assert len(found) == 1 and 40 < int(found[0][0]) < 120, stderr[-3000:]  # within SpecRaGE's second epoch
    resumed = subprocess.run(specrage("train", "--resume", str(run), "--quiet", "--no-figure"), env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from the checkpoint after epoch" in resumed.stdout
    uninterrupted = subprocess.run(specrage("train", *args, "--out", str(full)), env=env, capture_output=True,
                                   text=True, timeout=600)  # fmt: skip
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    assert json.loads((run / "metrics.json").read_text())["stream"]["storage_dtype"] == "float32"
    assert_same_run(run, full)  # test k-means and SVM metrics, losses, weights and R^-1: exactly equal
