"""When do the pre-training stages stop helping? Per epoch of one view's autoencoder and Siamese
net: the held-out loss the early-stopping rule watches, and the kNN label purity of the
validation rows' codes (the share of each row's 10 nearest neighbours with its label: what the
in-batch graph built on the codes will see), with the epoch where the default rule stops.

    PYTHONPATH=. python experiments/pretrain_stopping.py --dataset infinitemnist:20000 \\
        --data-dir DATA --json experiments/results/pretrain_stopping.json

Labels are used for the diagnostic only, on the validation split.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from functools import partial
from pathlib import Path

import numpy as np
from flax import nnx
from sklearn.neighbors import NearestNeighbors

from specrage_jax.data import load_dataset
from specrage_jax.nets.autoencoder import Autoencoder
from specrage_jax.nets.netstate import NetState, TrainedNet, create_net_state
from specrage_jax.nets.siamese import siamese_net
from specrage_jax.runs.prepare import prepare_splits, preset_config, resolve_run_defaults
from specrage_jax.training.autoencoder import autoencoder_loss, autoencoder_step
from specrage_jax.training.pretrain import EarlyStopping, run_minibatch_epochs
from specrage_jax.training.siamese import contrastive_pairs, siamese_loss, siamese_step


def knn_purity(codes: np.ndarray, labels: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's k nearest neighbours (itself excluded) that share its label."""
    index = NearestNeighbors(n_neighbors=k + 1).fit(codes).kneighbors(codes, return_distance=False)[:, 1:]
    return float(np.mean(labels[index] == labels[:, None]))


def default_stop(held: list[float], patience: int, min_delta: float) -> int | None:
    """The epoch (1-based) after which the rule would stop, or None."""
    best, bad = np.inf, 0
    for epoch, value in enumerate(held, 1):
        if value < best * (1 - min_delta):
            best, bad = value, 0
        else:
            bad += 1
        if bad >= patience:
            return epoch
    return None


def traced_stage(state: NetState, step, loss, n: int, take, *, encode, val_x, val_y, epochs, batch, seed, desc):
    """Runs a stage for ``epochs`` epochs (never stopping) and records, per epoch, the held-out
    loss and the purity of the validation codes."""
    trace: list[dict] = []
    start = time.perf_counter()

    def watched(current: NetState, items):
        value = loss(current, items)
        codes = encode(TrainedNet(state=current, losses=()), val_x)
        trace.append(
            {
                "epoch": len(trace) + 1,
                "held_out_loss": float(value),
                "purity": knn_purity(codes, val_y),
                "seconds": time.perf_counter() - start,
            }
        )
        print(f"  {desc} epoch {len(trace)}: held-out {float(value):.5f}, purity {trace[-1]['purity']:.4f}", flush=True)
        return value

    run = run_minibatch_epochs(
        state, step, n, take, batch_size=batch, epochs=epochs, seed=seed, desc=desc, progress=False,
        loss=watched, stopping=EarlyStopping(patience=epochs + 1, min_delta=0.0),
    )  # fmt: skip
    return run.state, trace


def stage_record(trace: list[dict], stage_config, inputs: np.ndarray, labels: np.ndarray) -> dict:
    """A stage's trace, the epoch the configured rule stops after, and its input's purity."""
    held = [t["held_out_loss"] for t in trace]
    return {
        "trace": trace,
        "default_rule_stops_after": default_stop(held, stage_config.patience, stage_config.min_delta),
        "input_purity": knn_purity(inputs, labels),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="infinitemnist:20000")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--view", type=int, default=0)
    parser.add_argument("--ae-epochs", type=int, default=60)
    parser.add_argument("--siamese-epochs", type=int, default=20)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", default="experiments/results/pretrain_stopping.json")
    args = parser.parse_args()

    data = load_dataset(args.dataset, seed=args.seed, data_dir=args.data_dir)
    config = preset_config(args.dataset, data.n_classes, args.overrides)
    splits = prepare_splits(data, config, seed=args.seed)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=args.seed)
    x, val_x, val_y = splits.train[args.view], splits.val[args.view], splits.val_labels
    seed = args.seed + args.view
    result: dict = {
        "dataset": args.dataset,
        "seed": args.seed,
        "view": args.view,
        "overrides": args.overrides,
        "machine": platform.processor(),
    }

    ae_config = config.autoencoder
    ae = create_net_state(Autoencoder(x.shape[1], ae_config, rngs=nnx.Rngs(seed)), ae_config.learning_rate)

    def ae_codes(net: TrainedNet, rows: np.ndarray) -> np.ndarray:
        return dataclasses.replace(net, submodule="encoder").encode(rows)

    ae, trace = traced_stage(
        ae, autoencoder_step, autoencoder_loss, x.shape[0], lambda idx: (x[idx],), encode=ae_codes,
        val_x=val_x, val_y=val_y, epochs=args.ae_epochs, batch=ae_config.batch_size, seed=seed, desc="autoencoder",
    )  # fmt: skip
    result["autoencoder"] = stage_record(trace, ae_config, val_x, val_y)
    trained_ae = TrainedNet(state=ae, losses=(), submodule="encoder")
    codes, val_codes = trained_ae.encode(x), trained_ae.encode(val_x)

    sc = config.siamese
    first, second, positive = contrastive_pairs(codes, sc.n_positive, seed=seed, block_size=sc.pair_block)
    net = create_net_state(siamese_net(codes.shape[1], sc, seed=seed), sc.learning_rate)
    _, trace = traced_stage(
        net, partial(siamese_step, margin=sc.margin), partial(siamese_loss, margin=sc.margin), first.size,
        lambda idx: (codes[first[idx]], codes[second[idx]], positive[idx]), encode=lambda n, rows: n.encode(rows),
        val_x=val_codes, val_y=val_y, epochs=args.siamese_epochs, batch=sc.batch_size, seed=seed, desc="siamese",
    )  # fmt: skip
    result["siamese"] = stage_record(trace, sc, val_codes, val_y)
    Path(args.json).write_text(json.dumps(result, indent=1))
    for stage in ("autoencoder", "siamese"):
        r = result[stage]
        print(
            f"{stage}: input purity {r['input_purity']:.4f}; default rule stops after {r['default_rule_stops_after']}"
        )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
