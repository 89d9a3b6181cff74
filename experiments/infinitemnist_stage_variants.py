"""SpecRaGE-stage settings compared at InfiniteMNIST scale on one run's pre-trained nets.

The autoencoders and Siamese nets of a finished ``specrage train --dataset infinitemnist:N`` run
(its ``OUT/checkpoints/pretrained``) are restored, not retrained, and only the SpecRaGE stage
trains again with each variant's ``--set`` values; its test k-means ACC, SVM accuracy, SpecRaGE
steps and seconds, and validation ACC every 5 epochs, are appended to ``--json``. So graph and
batch settings compare on the same codes, at a fraction of a whole run's cost.

    PYTHONPATH=. python experiments/infinitemnist_stage_variants.py --run OUT --data-dir DATA \\
        --name l10_m8192 --set graph.n_neighbors=10 --set train.batch_size=8192 --set train.epochs=10
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from devsuite import cpu_model

from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.runs.experiment import STREAM_EVAL_MAX_ROWS, open_streamed_once, train_and_evaluate
from specrage_jax.runs.prepare import with_n_components
from specrage_jax.runs.records import read_run_record

DEFAULT_JSON = "experiments/results/infinitemnist_stage_variants.json"
RUN_SETTINGS = ["checkpoint.every_epochs=1", "checkpoint.min_seconds=1e9", "train.progress=false"]


def run_variant(run: Path, data_dir: str, overrides: list[str]) -> dict[str, Any]:
    """SpecRaGE trained anew with ``overrides`` on the pre-trained nets of ``run``; its record."""
    record = read_run_record(run)
    dataset, seed = record["dataset"], record["seed"]
    config = apply_overrides(preset(dataset), [*RUN_SETTINGS, "eval.acc_every_epochs=5", *overrides])
    data = open_streamed_once(dataset, seed=seed, data_dir=data_dir, cache_dir=None)
    config = with_n_components(config, data.n_classes)
    with tempfile.TemporaryDirectory() as work:
        checkpoints = Path(work) / "checkpoints"
        shutil.copytree(run / "checkpoints" / "pretrained", checkpoints / "pretrained")
        start = time.perf_counter()
        result = train_and_evaluate(
            data, config, seed=seed, ckpt_dir=checkpoints, resume=True, eval_max_rows=STREAM_EVAL_MAX_ROWS
        ).result
    data.close()
    return {
        "dataset": dataset,
        "seed": seed,
        "overrides": overrides,
        "kmeans_acc": result["test"]["kmeans"]["acc"],
        "svm_acc": result["test"]["svm"]["acc"],
        "specrage_steps": result["training"]["steps"],
        "specrage_seconds": result["timing"]["specrage_seconds"],
        "validation_acc": [r["acc"] for r in result["training"].get("validation_acc", [])],
        "seconds": time.perf_counter() - start,
        "cpu_model": cpu_model(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a finished specrage train output directory (OUT)")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--name", required=True, help="the variant's key in the results file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", default=DEFAULT_JSON)
    args = parser.parse_args()
    path = Path(args.json)
    results = json.loads(path.read_text())["variants"] if path.is_file() else {}
    results[args.name] = run_variant(Path(args.run), args.data_dir, args.overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"variants": results}, indent=1))
    print(f"{args.name}: k-means ACC {results[args.name]['kmeans_acc']:.4f}, SVM {results[args.name]['svm_acc']:.4f}")


if __name__ == "__main__":
    main()
