"""Determinism: the same random_state gives bitwise the same embedding and labels in two separate
processes on the same CPU (same visible core count; see BUILD_NOTES.md for why the core count
matters to XLA's reductions)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from specrage_jax import SpecRaGE
    from specrage_jax.data import load_dataset

    data = load_dataset("digits", seed=0)
    est = SpecRaGE(n_clusters=10, n_neighbors=10, batch_size=256, max_epochs=2, view_hidden=(64, 64),
                   weighting_hidden=(16,), random_state=0).fit(list(data.views))
    np.save(sys.argv[1], est.transform(list(data.views)))
    np.save(sys.argv[2], est.labels_)
""")


@pytest.mark.slow  # two processes: ~13 s; the default suite is at its time budget
def test_same_seed_gives_identical_embeddings_in_two_processes(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    runs = []
    for name, hash_seed in (("a", "1"), ("b", "2")):  # a different hash seed: no set/dict-order dependence
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OPENBLAS_NUM_THREADS": "1"}
        outputs = (tmp_path / f"{name}_embedding.npy", tmp_path / f"{name}_labels.npy")
        runs.append(
            (
                subprocess.Popen(
                    [sys.executable, str(script), *map(str, outputs)],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
                outputs,
            )
        )
    for process, _ in runs:
        log, _ = process.communicate(timeout=600)
        assert process.returncode == 0, log[-3000:]
    (emb_a, lab_a), (emb_b, lab_b) = [tuple(np.load(path) for path in outputs) for _, outputs in runs]
    assert emb_a.shape == (1797, 10) and np.all(np.isfinite(emb_a))
    np.testing.assert_array_equal(emb_a, emb_b)
    np.testing.assert_array_equal(lab_a, lab_b)
