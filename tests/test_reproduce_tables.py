"""experiments/reproduce_tables.py: the clustering variants it records per seed, and the tables
it writes with a labelled variant run beside the preset's."""

from __future__ import annotations

import json

import pytest

from tests.experiment_scripts import load_experiment

TINY = [
    "model.view_hidden=32,32",
    "model.weighting_hidden=16",
    "train.batch_size=256",
    "train.epochs=2",
    "train.steps_per_epoch=5",
]


@pytest.fixture(scope="module")
def script():
    return load_experiment("reproduce_tables")


def seed_record(acc: float, centred: float | None = None) -> dict:
    scores = {"acc": acc, "nmi": acc, "ari": acc}
    record = {
        "test": {"kmeans": scores, "svm": {"acc": acc, "f1": acc, "precision": acc}},
        "baselines": {"se_on_lbar": scores},
        "timing": {"train_seconds": 1.0},
    }
    if centred is not None:  # test ACC with the training embedding's k-means centres, on unit rows
        record["config"] = {"model": {"output_rows": "unit"}}
        record["clustering_variants"] = {
            "train_unit_n10": {"val": 0.0, "test": centred},
            "train_raw_n10": {"test": 0.0},
        }
    return record


def test_a_labelled_variant_becomes_a_column_beside_the_preset(script, tmp_path):
    preset = {"dataset": "handwritten", "overrides": [], "seeds": [seed_record(0.90), seed_record(0.92)]}
    variant = {
        "dataset": "handwritten",
        "label": "weighting active",
        "overrides": ["model.temperature=90"],
        "seeds": [seed_record(0.80), seed_record(0.84)],
    }
    unlabelled = {"dataset": "handwritten", "overrides": ["x=1"], "seeds": [seed_record(0.5)]}
    (tmp_path / "handwritten.json").write_text(json.dumps(preset))
    (tmp_path / "handwritten_weighting_active.json").write_text(json.dumps(variant))
    (tmp_path / "handwritten_probe.json").write_text(json.dumps(unlabelled))  # no label: not a column
    results, variants = script.load_results(tmp_path)
    assert list(results) == ["handwritten"] and [v["label"] for v in variants["handwritten"]] == ["weighting active"]
    table = script.markdown_tables(results, variants)
    assert "| metric | ours | weighting active | paper |" in table
    assert "| k-means ACC | 91.0 ± 1.0 | 82.0 ± 2.0 | 91.9 ± 3.5 |" in table
    assert "Variant: weighting active (2 seeds on cpu); run with `model.temperature=90`." in table
    assert "50.0" not in table


def test_the_worst_seed_and_the_training_centres_protocol_are_rows(script, tmp_path):
    preset = {"dataset": "bdgp", "seeds": [seed_record(0.90, 0.95), seed_record(0.96, 0.93)]}
    older = {"dataset": "bdgp", "label": "older", "seeds": [seed_record(0.80), seed_record(0.84)]}
    (tmp_path / "bdgp.json").write_text(json.dumps(preset))
    (tmp_path / "bdgp_older.json").write_text(json.dumps(older))
    table = script.markdown_tables(*script.load_results(tmp_path))
    assert "| k-means ACC, worst seed | 90.0 | 80.0 | — |" in table
    # the run's own rows (unit), not the other variant; a file without the variants shows a dash
    assert "| k-means ACC, training centres | 94.0 ± 1.0 | — | — |" in table
    assert "| k-means ACC, training centres, worst seed | 93.0 | — | — |" in table


def test_a_variant_continued_on_another_machine_names_both(script):
    gpu, cpu = {"backend": "gpu"}, {"backend": "cpu"}
    seeds = [seed_record(0.9), seed_record(0.9), {**seed_record(0.8), "environment": cpu}]
    payload = {"dataset": "noisymnist", "label": "weights free", "environment": gpu, "seeds": seeds}
    assert script.payload_label(payload) == "weights free (2 seeds on gpu and 1 on cpu)"
    assert script.seeds_by_backend({"seeds": [seed_record(0.9)]}) == "1 seed on cpu"


@pytest.mark.slow  # a blobs training run; the default suite is at its time budget
def test_clustering_variants_include_the_reported_protocol(script):
    result = script.run_seed("blobs", TINY, 0, None)
    variants = result["clustering_variants"]
    own_rows = {f"self_{rows}_n{n}" for rows in ("raw", "unit") for n in (10, 100)}
    assert set(variants) == own_rows | {"train_raw_n10", "train_unit_n10"}
    assert all(0.0 <= v[split] <= 1.0 for v in variants.values() for split in ("val", "test"))
    # the table's test k-means is k-means on the test embedding's own rows, 10 restarts
    rows = "unit" if result["config"]["model"]["output_rows"] == "unit" else "raw"
    assert variants[f"self_{rows}_n10"]["test"] == pytest.approx(result["test"]["kmeans"]["acc"])
