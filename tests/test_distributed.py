"""Training over several processes on JAX's distributed runtime (CPU, Gloo collectives): the same
seed and global batch give the same model whether one process trains or two share each batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specrage_jax.cli.launch import free_port
from specrage_jax.training.distributed import ProcessGroup, group_from
from tests.simulated_devices import ROOT, simulated_devices_env


def run_group(out: Path, processes: int, devices_per_process: int, epochs: int = 2) -> dict[str, np.ndarray]:
    """Runs tests/mp_workers/fit_worker.py in ``processes`` processes; returns process 0's arrays."""
    coordinator = f"localhost:{free_port()}"
    env = simulated_devices_env(devices_per_process)
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mp_workers.fit_worker",
                coordinator,
                str(processes),
                str(i),
                str(out),
                str(epochs),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(processes)
    ]
    logs = [w.communicate(timeout=300)[0] for w in workers]
    for i, (w, log) in enumerate(zip(workers, logs)):
        assert w.returncode == 0, f"process {i} failed:\n{log[-3000:]}"
    with np.load(out) as arrays:
        return dict(arrays)


def compare(
    shared: dict[str, np.ndarray], single: dict[str, np.ndarray], tolerance: float, *, of_scale: bool = False
) -> None:
    """Every array within ``tolerance``, or with ``of_scale`` within ``tolerance`` times its own
    largest entry (R^-1 has entries near 70 here, where float32 itself resolves ~1e-5)."""
    assert shared.keys() == single.keys()
    for key in single:
        scale = max(1.0, float(np.abs(single[key]).max())) if of_scale else 1.0
        np.testing.assert_allclose(shared[key], single[key], atol=tolerance * scale, rtol=0, err_msg=key)
    assert not np.allclose(single["r_inv"], np.eye(single["r_inv"].shape[0]))  # trained, not the initial R^-1


@pytest.mark.slow  # ~30-45 s; the launch test below runs the same path end to end by default
def test_two_processes_sharing_each_batch_train_the_single_process_model(tmp_path):
    """2 processes x 1 CPU device against 1 process x 2 (forced) devices: the compiled step splits
    each global batch the same way, so only the process boundary differs; 2 epochs (12 steps)."""
    single = run_group(tmp_path / "single.npz", processes=1, devices_per_process=2)
    out = tmp_path / "model.npz"
    shared = run_group(out, processes=2, devices_per_process=1)
    record = json.loads(Path(str(out) + ".json").read_text())
    assert record["processes"] == 2 and record["devices"] == 2
    compare(shared, single, 1e-5)


@pytest.mark.slow  # ~35 s: two more process groups; the 2 x 1 case above runs by default
def test_two_processes_of_two_devices_train_the_single_process_model(tmp_path):
    """2 processes x 2 devices against 1 process x 4 devices, one epoch (6 steps). The cross-process
    all-reduce sums in another order than the in-process one, and Adam's normalized step turns that
    rounding into up to ~2e-5 on a parameter whose gradient is ~0 after the first steps (measured:
    1.8e-5 on one of 4096 entries, everything else below 1e-6; BUILD_NOTES "Multi-process")."""
    single = run_group(tmp_path / "single.npz", processes=1, devices_per_process=4, epochs=1)
    out = tmp_path / "model.npz"
    shared = run_group(out, processes=2, devices_per_process=2, epochs=1)
    record = json.loads(Path(str(out) + ".json").read_text())
    assert record["processes"] == 2 and record["devices"] == 4
    losses = [
        json.loads(Path(str(p) + ".json").read_text())["history"]["epochs"][0]["train_loss"]
        for p in (tmp_path / "single.npz", out)
    ]
    assert abs(losses[0] - losses[1]) < 1e-6 * abs(losses[0])
    compare(shared, single, 5e-5, of_scale=True)


def test_a_process_group_comes_from_flags_or_the_environment():
    assert group_from(None, None, None, environ={}) is None
    env = {"SPECRAGE_COORDINATOR": "node0:1234", "SPECRAGE_NUM_PROCESSES": "4", "SPECRAGE_PROCESS_ID": "3"}
    assert group_from(None, None, None, environ=env) == ProcessGroup("node0:1234", 4, 3)
    assert group_from("h:1", 2, 0, environ=env) == ProcessGroup("h:1", 2, 0)  # flags win
    with pytest.raises(ValueError, match="missing --num-processes, --process-id"):
        group_from("h:1", None, None, environ={})
    assert group_from("auto", None, None, environ={}) == ProcessGroup("auto")  # JAX detects the rest
    assert group_from(None, None, None, environ={"SPECRAGE_COORDINATOR": "auto"}) == ProcessGroup("auto")
    with pytest.raises(ValueError, match="HOST:PORT or 'auto'"):
        ProcessGroup("nohost", 2, 0)
    with pytest.raises(ValueError, match="needs the number of processes"):
        ProcessGroup("h:1")
    with pytest.raises(ValueError, match="outside 0..1"):
        ProcessGroup("h:1", 2, 2)


# two components more than digits' 10 classes: the output map is fitted over the processes too
ARGS = ["--dataset", "digits", "--epochs", "3", "--seed", "0", "--set", "train.batch_size=256", "--set",
        "model.n_components=12", "--no-figure", "--quiet", "--checkpoint-every", "1"]  # fmt: skip


def specrage(*args: str, cwd: Path, devices: int, timeout: float = 600) -> subprocess.CompletedProcess:
    """The CLI in a subprocess with ``devices`` forced CPU devices per process."""
    env = simulated_devices_env(devices)
    return subprocess.run([sys.executable, "-m", "specrage_jax.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def model_arrays(run: Path) -> dict[str, np.ndarray]:
    """The saved model's parameters and R^-1 (as the fit_worker writes them)."""
    import jax

    from specrage_jax.training.checkpoint import read_model

    state = read_model(run / "model").state
    return {"r_inv": np.asarray(state.r_inv), "output_map": np.asarray(state.output_map)} | {
        f"param_{i}": np.asarray(a) for i, a in enumerate(jax.tree.leaves(state.params))
    }


@pytest.fixture(scope="module")
def launched_run(tmp_path_factory) -> Path:
    """`specrage launch --local 2 -- train` on digits, 3 epochs, a checkpoint after each (one CPU
    device per process)."""
    where = tmp_path_factory.mktemp("launched")
    done = specrage("launch", "--local", "2", "--", "train", *ARGS, "--out", str(where / "run"), cwd=where, devices=1)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[0] k-means ACC" in done.stdout and "[1] k-means ACC" not in done.stdout
    return where / "run"


@pytest.mark.slow  # two launched processes and a one-process run: ~65 s; the default suite is at its time budget
def test_specrage_launch_trains_over_two_processes_as_one_process_over_two_devices(launched_run, tmp_path):
    """Two processes (one CPU device each) against one process with two forced devices: the same
    test metrics, losses to 1e-6, saved parameters and R^-1 to 1e-5; one checkpoint per epoch and
    one model, written once."""
    single = specrage("train", *ARGS, "--out", str(tmp_path / "one"), cwd=tmp_path, devices=2)
    assert single.returncode == 0, single.stderr[-3000:]
    two = json.loads((launched_run / "metrics.json").read_text())
    one = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert two["test"]["kmeans"] == one["test"]["kmeans"] and two["test"]["svm"] == one["test"]["svm"]
    for a, b in zip(two["training"]["epochs"], one["training"]["epochs"], strict=True):
        assert abs(a["train_loss"] - b["train_loss"]) <= 1e-6 * abs(b["train_loss"])
    launched = model_arrays(launched_run)
    compare(launched, model_arrays(tmp_path / "one"), 1e-5)
    assert not np.allclose(launched["output_map"], np.eye(12))  # c > k: a fitted map, not the identity
    checkpoints = launched_run / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("epoch_*")) == ["epoch_1", "epoch_2", "epoch_3"]
    assert all((p / "specrage_files.json").is_file() for p in checkpoints.glob("epoch_*"))
    record = json.loads((checkpoints / "run.json").read_text())
    assert record["status"] == "complete" and record["processes"] == 2
    assert not list(launched_run.rglob("*.saving")) and not list(launched_run.rglob("*tmp*"))


@pytest.mark.slow  # ~90 s: a run killed, then resumed by two processes and by one
def test_a_killed_process_stops_the_run_and_resume_gives_the_uninterrupted_result(launched_run, tmp_path):
    """One of two processes killed after the first checkpoint: the launcher stops the other (which
    would wait in a collective) and exits non-zero within 60 s, naming the lost process.
    `launch --local 2 -- train --resume` then ends with the uninterrupted run's metrics and model,
    bitwise; a resume by one process over two devices continues as well (a different process count
    continues: the state is replicated and the batches come from (seed, epoch))."""
    import re
    import shutil
    import signal
    import time

    run = tmp_path / "run"
    env = simulated_devices_env(1)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "specrage_jax.cli", "launch", "--local", "2", "--", "train", *ARGS, "--out", str(run)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    pids: dict[int, int] = {}
    assert launcher.stdout is not None
    for line in launcher.stdout:
        found = re.match(r"specrage launch: process (\d) of 2 is pid (\d+)", line)
        if found:
            pids[int(found.group(1))] = int(found.group(2))
        if len(pids) == 2:
            break
    deadline = time.monotonic() + 300
    while not (run / "checkpoints" / "epoch_1").is_dir():  # committed after epoch 1, during epoch 2
        assert time.monotonic() < deadline and launcher.poll() is None, "no checkpoint after epoch 1"
        time.sleep(0.05)
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode != 0 and time.monotonic() - start < 60
    assert "process 1 exited with code -9" in stderr
    assert not (run / "metrics.json").exists()
    shutil.copytree(run, tmp_path / "run_one")

    resumed = specrage("launch", "--local", "2", "--", "train", "--resume", str(run), "--quiet", cwd=tmp_path,
                       devices=1)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "[0] resumed from the checkpoint after epoch" in resumed.stdout
    expected = json.loads((launched_run / "metrics.json").read_text())
    got = json.loads((run / "metrics.json").read_text())
    assert got["test"] == expected["test"]
    assert [e["train_loss"] for e in got["training"]["epochs"]] == [
        e["train_loss"] for e in expected["training"]["epochs"]
    ]
    for key, value in model_arrays(launched_run).items():
        np.testing.assert_array_equal(model_arrays(run)[key], value, err_msg=key)

    one = specrage("train", "--resume", str(tmp_path / "run_one"), "--quiet", cwd=tmp_path, devices=2)
    assert one.returncode == 0, one.stderr[-3000:]
    got = json.loads((tmp_path / "run_one" / "metrics.json").read_text())
    assert got["test"]["kmeans"] == expected["test"]["kmeans"]
    compare(model_arrays(tmp_path / "run_one"), model_arrays(launched_run), 1e-5)


def slurm_port_and_job() -> tuple[int, int]:
    """A Slurm job id whose coordinator port (JAX: 61440 + job id mod 4096) is free here."""
    import random

    for _ in range(100):
        job = random.randrange(10_000, 1_000_000)
        port = 65535 - 2**12 + 1 + job % 2**12
        with socket.socket() as s:
            try:
                s.bind(("localhost", port))
            except OSError:
                continue
        return port, job
    raise RuntimeError("no free port in the Slurm range")


@pytest.mark.slow  # ~30 s: a two-process run
def test_coordinator_auto_takes_the_group_from_slurm(tmp_path):
    """`specrage train --coordinator auto` in two processes that see the variables `srun` sets
    (SLURM_JOB_ID, SLURM_STEP_NODELIST, SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID): JAX finds the
    group itself, the run trains over both and process 0 writes the outputs."""
    _, job = slurm_port_and_job()
    base = simulated_devices_env(1, SLURM_JOB_ID=str(job), SLURM_STEP_NODELIST="localhost", SLURM_NTASKS="2")
    args = ["--dataset", "digits", "--epochs", "1", "--set", "train.batch_size=256", "--no-figure", "--quiet",
            "--coordinator", "auto", "--out", str(tmp_path / "run")]  # fmt: skip
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "specrage_jax.cli", "train", *args],
            cwd=tmp_path,
            env={**base, "SLURM_PROCID": str(i), "SLURM_LOCALID": "0"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    logs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    assert "k-means ACC" in logs[0] and "k-means ACC" not in logs[1]
    record = json.loads((tmp_path / "run" / "checkpoints" / "run.json").read_text())
    assert record["processes"] == 2
