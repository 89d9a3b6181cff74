"""Train one dataset/seed with config overrides and print validation, train and test k-means ACC.

Hyperparameters are chosen on the VAL column; TEST is printed for the record only.

    PYTHONPATH=. python experiments/compare_configs.py handwritten --seed 1 --data-dir DATA \
        --set siamese.enabled=true --set siamese.n_positive=3
"""

from __future__ import annotations

import argparse
import json
import time

from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.nets.embed import embed
from specrage_jax.runs.evaluate import evaluate_state
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.prepare import prepare_splits, preset_config, pretrain, resolve_run_defaults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    data = load_dataset(args.dataset, seed=args.seed, data_dir=args.data_dir)
    config = preset_config(args.dataset, data.n_classes, args.overrides)
    start = time.perf_counter()
    splits = prepare_splits(data, config, seed=args.seed)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=args.seed)  # the data-aware settings
    splits, codes, stages = pretrain(splits, config, seed=args.seed)
    state, history = train_on_splits(splits, config, seed=args.seed, codes=codes)
    seconds = time.perf_counter() - start
    test = evaluate_state(state, splits, config, seed=args.seed).metrics
    k = data.n_classes  # k-means clusters: the classes, whatever n_components is
    acc = {
        name: kmeans_metrics(embed(state, views)[0], labels, n_clusters=k, seed=args.seed)["acc"]
        for name, views, labels in (
            ("val", splits.val, splits.val_labels),
            ("train", splits.train, splits.train_labels),
        )
    }
    print(
        json.dumps(
            {
                "dataset": args.dataset,
                "seed": args.seed,
                "overrides": args.overrides,
                "steps": history.steps,
                "seconds": round(seconds, 1),
                **{k: round(v, 1) for k, v in stages.items()},
                "val_acc": round(acc["val"], 4),
                "train_acc": round(acc["train"], 4),
                "test_kmeans": {k: round(v, 4) for k, v in test["kmeans"].items()},
                "test_svm_acc": round(test["svm"]["acc"], 4),
                "mean_view_weights": [round(w, 3) for w in test["mean_view_weights"]],
            }
        )
    )


if __name__ == "__main__":
    main()
