"""SHA-256 fingerprints of embeddings from fixed-seed runs, to show that a change of layout (moved
modules, one training path) did not change what the library computes.

Runs, each seeded and short (about a minute in all on a 2-core CPU):

* ``estimator``: the default ``SpecRaGE(n_clusters=10, random_state=0, max_epochs=3)`` fitted on
  digits (whole-set training, data-aware defaults), its ``transform`` of every row;
* ``cli``: ``specrage train --dataset digits --epochs 2 --seed 0`` (the preset: mini-batches,
  plateau schedule), then ``specrage embed`` of the first 200 rows with the run's model;
* ``cli-pretraining``: ``specrage train --dataset blobs`` with one epoch of autoencoders and of
  Siamese nets before two SpecRaGE epochs, then ``specrage embed``.

Prints one JSON object {run: sha256 of the float32 embedding bytes}. Uses only the public API and
``python -m specrage_jax.cli``, so the same script runs against an older tree:

    PYTHONPATH=/path/to/old/tree python experiments/embedding_fingerprint.py
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def sha256(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float32).tobytes()).hexdigest()


def cli(*args: str, cwd: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "specrage_jax.cli", *args],
        check=True,
        cwd=cwd,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
    )


def cli_fingerprint(folder: Path, dataset: str, rows: list[np.ndarray], *extra: str) -> str:
    """sha256 of ``specrage embed`` on ``rows`` with the model of a short seeded run."""
    out = folder / dataset
    cli(
        "train",
        "--dataset",
        dataset,
        "--seed",
        "0",
        "--out",
        str(out),
        "--quiet",
        "--no-figure",
        "--set",
        "checkpoint.every_epochs=0",
        *extra,
        cwd=folder,
    )
    np.savez(folder / "rows.npz", **{f"view_{v}": x for v, x in enumerate(rows)})
    cli(
        "embed",
        "--checkpoint",
        str(out),
        "--input",
        str(folder / "rows.npz"),
        "--output",
        str(folder / "y.npy"),
        cwd=folder,
    )
    return sha256(np.load(folder / "y.npy"))


def main() -> None:
    from specrage_jax import SpecRaGE
    from specrage_jax.data import load_dataset

    digits = load_dataset("digits", seed=0)
    blobs = load_dataset("blobs", seed=0)
    estimator = SpecRaGE(n_clusters=10, random_state=0, max_epochs=3).fit(list(digits.views))
    prints = {"estimator": sha256(estimator.transform(list(digits.views)))}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        prints["cli"] = cli_fingerprint(folder, "digits", [v[:200] for v in digits.views], "--epochs", "2")
        prints["cli-pretraining"] = cli_fingerprint(
            folder,
            "blobs",
            [v[:200] for v in blobs.views],
            "--epochs",
            "2",
            "--set",
            "autoencoder.enabled=true",
            "--set",
            "autoencoder.epochs=1",
            "--set",
            "autoencoder.embedding_dim=4",
            "--set",
            "siamese.enabled=true",
            "--set",
            "siamese.epochs=1",
        )
    print(json.dumps(prints, indent=1))


if __name__ == "__main__":
    main()
