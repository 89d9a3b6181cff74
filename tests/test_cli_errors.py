"""What a careless user meets at the CLI: each expected failure (bad data, bad settings) ends
with one line on stderr naming the problem, exit code 2 and no traceback; --debug shows it."""

from __future__ import annotations

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
    return {
        "missing file": ([f"file:{folder / 'absent.npz'}"], "no such file"),
        "different sample counts": ([f"file:{folder / 'mismatch.npz'}"], "view_1"),
        "NaN features": ([f"file:{folder / 'nan.npz'}"], "view 0"),
        "one sample": ([f"file:{folder / 'one.npz'}"], "1 samples"),
        ".mat without views": ([f"file:{folder / 'noviews.mat'}"], "no views"),
        "unknown --set field": ([f"file:{good}", "--set", "model.no_such_field=1"], "no_such_field"),
        "n_components above the batch": ([f"file:{good}", "--set", "model.n_components=500"],
                                         "n_components=500 is larger than the batch"),
    }


def _specrage(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specrage_jax.cli", "train", "--dataset", *args, "--quiet",
                           "--no-figure", "--out", str(cwd / "run")], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    return folder, _write_cases(folder)


@pytest.mark.parametrize("name", ["missing file", "different sample counts", "NaN features", "one sample",
                                  ".mat without views", "unknown --set field", "n_components above the batch"])
def test_expected_failures_end_with_one_line_and_exit_2(cases, name):
    folder, table = cases
    args, fragment = table[name]
    done = _specrage(args, folder)
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Warning" not in line]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and lines[0].startswith("specrage: ") and fragment in lines[0], done.stderr
    assert not (folder / "run" / "metrics.json").exists()  # refused before training, nothing written


def test_debug_shows_the_traceback(cases):
    folder, table = cases
    args, _ = table["NaN features"]
    done = _specrage([*args, "--debug"], folder)
    assert done.returncode != 0 and "Traceback" in done.stderr
