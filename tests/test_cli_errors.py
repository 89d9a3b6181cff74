"""What a careless user meets at the CLI: each expected failure (bad data, bad settings) ends
with one line on stderr naming the problem, exit code 2 and no traceback; --debug shows it.

Each case runs ``specrage_jax.cli.main`` in this process (an exception escaping it fails the
test); a few run ``python -m specrage_jax.cli`` as a user would, for the exit code and stderr of
the real command (each such process spends seconds importing JAX).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io


def _write_cases(folder: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (specrage arguments, a fragment the one line must hold)."""
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    np.savez(folder / "mismatch.npz", view_0=rng.random((40, 3)), view_1=rng.random((39, 3)), labels=labels)
    with_nan = rng.random((40, 3))
    with_nan[3, 1] = np.nan
    np.savez(folder / "nan.npz", view_0=with_nan, view_1=rng.random((40, 3)), labels=labels)
    np.savez(folder / "one.npz", view_0=rng.random((1, 3)), view_1=rng.random((1, 3)), labels=np.zeros(1))
    scipy.io.savemat(folder / "noviews.mat", {"something": rng.random((40, 3)), "Y": labels})
    good = folder / "good.npz"
    np.savez(good, view_0=rng.random((40, 3)), view_1=rng.random((40, 3)), labels=labels)
    np.savez(folder / "emptyview.npz", view_0=rng.random((40, 3)), view_1=np.zeros((40, 0)), labels=labels)
    np.savez(folder / "thirty.npz", view_0=rng.random((30, 3)), view_1=rng.random((30, 3)), labels=np.arange(30) % 2)
    np.savez(
        folder / "manyclasses.npz", view_0=rng.random((40, 3)), view_1=rng.random((40, 3)), labels=np.arange(40) % 12
    )
    (folder / "notarun").mkdir(exist_ok=True)
    return {
        "missing file": ([f"file:{folder / 'absent.npz'}"], "no such file"),
        "different sample counts": ([f"file:{folder / 'mismatch.npz'}"], "view_1"),
        "NaN features": ([f"file:{folder / 'nan.npz'}"], "view 0"),
        "one sample": ([f"file:{folder / 'one.npz'}"], "1 samples"),
        ".mat without views": ([f"file:{folder / 'noviews.mat'}"], "no views"),
        "unknown --set field": ([f"file:{good}", "--set", "model.no_such_field=1"], "no_such_field"),
        "n_components above the batch": (
            [f"file:{good}", "--set", "model.n_components=500"],
            "n_components=500 is larger than the batch",
        ),
        "empty view": ([f"file:{folder / 'emptyview.npz'}"], "view 1"),
        "n_neighbors above the batch": (
            [f"file:{folder / 'thirty.npz'}", "--set", "graph.n_neighbors=30"],
            "lower n_neighbors (graph.n_neighbors)",
        ),
        "more clusters than test samples": ([f"file:{folder / 'manyclasses.npz'}"], "fewer than the 12 clusters"),
        "unknown dataset": (["nosuchdata"], "unknown dataset"),
        "resume without a run": (["--resume", str(folder / "notarun")], "notarun"),
    }


def _specrage(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return _cli(_train_args(args, cwd), cwd)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specrage_jax.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def _in_process(args: list[str], cwd: Path, monkeypatch) -> subprocess.CompletedProcess:
    """``main(args)`` run in ``cwd`` in this process, as a finished command: its return (or
    argparse's exit) code and what it wrote to stderr."""
    from specrage_jax.cli import main

    monkeypatch.chdir(cwd)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exit_:
            code = exit_.code
    return subprocess.CompletedProcess(["specrage", *args], code, "", err.getvalue())


def _train_args(args: list[str], cwd: Path) -> list[str]:
    if args[0] == "--resume":
        return ["train", *args, "--quiet"]
    return ["train", "--dataset", *args, "--quiet", "--no-figure", "--out", str(cwd / "run")]


def assert_one_line(done: subprocess.CompletedProcess, fragment: str) -> None:
    lines = [
        line
        for line in done.stderr.splitlines()
        if line.strip() and not line.startswith("specrage: warning: ") and "Warning" not in line
    ]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and lines[0].startswith("specrage: ") and fragment in lines[0], done.stderr


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    return folder, _write_cases(folder)


TRAIN_CASES = [
    "missing file",
    "different sample counts",
    "NaN features",
    "one sample",
    ".mat without views",
    "unknown --set field",
    "n_components above the batch",
    "empty view",
    "n_neighbors above the batch",
    "more clusters than test samples",
    "unknown dataset",
    "resume without a run",
]


@pytest.mark.parametrize("name", TRAIN_CASES)
def test_expected_failures_end_with_one_line_and_exit_2(cases, name, monkeypatch):
    folder, table = cases
    args, fragment = table[name]
    done = _in_process(_train_args(args, folder), folder, monkeypatch)
    assert_one_line(done, fragment)
    assert not (folder / "run" / "metrics.json").exists()  # refused before training, nothing written


def test_the_command_ends_with_one_line_and_exit_2(cases):
    folder, table = cases
    args, fragment = table["NaN features"]
    assert_one_line(_specrage(args, folder), fragment)
    assert not (folder / "run" / "metrics.json").exists()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A model saved by the estimator (2 views of widths 3 and 3), for the embed cases."""
    from specrage_jax import SpecRaGE

    folder = tmp_path_factory.mktemp("embed")
    rng = np.random.default_rng(1)
    tiny = SpecRaGE(n_clusters=2, random_state=0, max_epochs=1, view_hidden=(16,), weighting_hidden=(8,))
    tiny.fit([rng.random((60, 3)), rng.random((60, 3))]).save(folder / "model")
    partial = rng.random((10, 3))
    partial[2, 0] = np.nan
    np.savez(folder / "partial.npz", view_0=partial, view_1=rng.random((10, 3)))
    np.savez(folder / "three.npz", view_0=rng.random((10, 3)), view_1=rng.random((10, 3)), view_2=rng.random((10, 3)))
    np.savez(folder / "wide.npz", view_0=rng.random((10, 3)), view_1=rng.random((10, 5)))
    np.savez(folder / "ok.npz", view_0=rng.random((10, 3)), view_1=rng.random((10, 3)))
    np.save(folder / "badmask.npy", np.ones((10, 3), bool))
    return folder


EMBED_CASES = {
    "no model": (["--checkpoint", "nowhere", "--input", "ok.npz"], "no checkpoint at"),
    "missing input": (["--checkpoint", "model", "--input", "absent.npz"], "no such input file"),
    "view count": (["--checkpoint", "model", "--input", "three.npz"], "3 views, the model was trained on 2"),
    "view width": (["--checkpoint", "model", "--input", "wide.npz"], "view 1 has shape (10, 5)"),
    "partial NaN row": (["--checkpoint", "model", "--input", "partial.npz"], "view 0 holds 1 NaN"),
    "mask shape": (["--checkpoint", "model", "--input", "ok.npz", "--mask", "badmask.npy"], "(10, 2)"),
}


@pytest.mark.parametrize("name", list(EMBED_CASES))
def test_embed_failures_end_with_one_line_and_exit_2(model_dir, name, monkeypatch):
    args, fragment = EMBED_CASES[name]
    done = _in_process(["embed", *args, "--output", "y.npy"], model_dir, monkeypatch)
    assert_one_line(done, fragment)
    assert not (model_dir / "y.npy").exists()


def test_the_embed_command_ends_with_one_line_and_exit_2(model_dir):
    args, fragment = EMBED_CASES["view width"]
    assert_one_line(_cli(["embed", *args, "--output", "y.npy"], model_dir), fragment)
    assert not (model_dir / "y.npy").exists()


def test_epoch_bounds_must_be_positive(cases, monkeypatch):
    folder, _ = cases
    done = _in_process(["train", "--dataset", "blobs", "--epochs", "0"], folder, monkeypatch)
    assert done.returncode == 2 and "must be an integer >= 1" in done.stderr and "Traceback" not in done.stderr


def test_debug_shows_the_traceback(cases):
    folder, table = cases
    args, _ = table["NaN features"]
    done = _specrage([*args, "--debug"], folder)
    assert done.returncode != 0 and "Traceback" in done.stderr
