"""InfiniteMNIST at growing n with one command: the whole pipeline (data generation, autoencoders,
Siamese nets, SpecRaGE, evaluation) per size, then ACC and cost against n.

Each size is one ``specrage train --dataset infinitemnist:N`` run in a child process, with the
settings the preset and the data give (``--set`` passes more to every run), tracing the
validation ACC every ``--acc-every`` SpecRaGE epochs. Its wall time counts from the child's start
(generating the samples included) to its exit. Results are merged into ``--json`` by (n, seed,
device kind), so CPU runs and accelerator runs accumulate in one file, and ``--figure`` plots test
k-means ACC against n, each stage's seconds against n, and the validation ACC against SpecRaGE steps.

    PYTHONPATH=. python experiments/infinitemnist_curve.py --data-dir DATA --sizes 20000 100000 1000000
    PYTHONPATH=. python experiments/infinitemnist_curve.py --data-dir DATA --sizes 1000000 \\
        --set train.data_on_device=true            # on a GPU

Per run the JSON holds n, device_kind, wall_seconds, stage_seconds (data, autoencoders, Siamese
nets, SpecRaGE, evaluation), test k-means ACC / NMI / ARI, SVM accuracy (its training rows
sampled above 100,000, as ``eval_rows`` records), peak host and device memory, the CPU model, the
device and JAX version, the SpecRaGE steps, the validation ACC against steps, the run's resolved
settings and the command that reruns it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devsuite import cpu_model

DEFAULT_JSON = "experiments/results/infinitemnist_curve.json"
DEFAULT_FIGURE = "experiments/results/infinitemnist_curve.png"


def train_command(n: int, seed: int, data_dir: str, out: Path, overrides: Sequence[str]) -> list[str]:
    """The CLI command of one size."""
    command = [sys.executable, "-m", "specrage_jax.cli", "train", f"--dataset=infinitemnist:{n}", f"--seed={seed}"]
    command += [f"--data-dir={data_dir}", f"--out={out}", "--quiet", "--no-figure"]
    return command + [f"--set={item}" for item in overrides]


def rerun_command(n: int, seed: int, overrides: Sequence[str], acc_every: int) -> str:
    """The command line that reruns one size of the curve."""
    sets = "".join(f" --set {item}" for item in overrides)
    return (
        f"PYTHONPATH=. python experiments/infinitemnist_curve.py --data-dir DATA --sizes {n} --seeds {seed} "
        f"--acc-every {acc_every}{sets}"
    )


def stage_seconds(timing: dict[str, float]) -> dict[str, float]:
    """The run's seconds per stage from its metrics.json ``timing``."""
    return {
        "data": timing.get("data_seconds", 0.0),
        "autoencoders": timing.get("autoencoder_seconds", 0.0),
        "siamese": timing.get("siamese_seconds", 0.0),
        "specrage": timing.get("specrage_seconds", 0.0),
        "evaluation": timing.get("eval_seconds", 0.0),
    }


def steps_trace(training: dict[str, Any]) -> list[dict[str, float]]:
    """The validation ACC trace ({"epoch", "acc"}) with each epoch's SpecRaGE steps."""
    epochs = training.get("epochs", [])
    per_epoch = training["steps"] / len(epochs) if epochs else 0
    return [{"steps": round(r["epoch"] * per_epoch), "acc": r["acc"]} for r in training.get("validation_acc", [])]


def run_size(
    n: int, seed: int, data_dir: str, work_dir: Path, overrides: Sequence[str], acc_every: int = 0
) -> dict[str, Any]:
    """One whole-pipeline run of ``n`` samples; its record (metrics, wall seconds, stage times)."""
    out = work_dir / f"infinitemnist-{n}-seed{seed}"
    traced = [*overrides, f"eval.acc_every_epochs={acc_every}"] if acc_every else list(overrides)
    start = time.perf_counter()
    done = subprocess.run(train_command(n, seed, data_dir, out, traced))
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"infinitemnist_curve: the run of n {n} exited with {done.returncode}")
    metrics = json.loads((out / "metrics.json").read_text())
    test, env = metrics["test"], metrics["environment"]
    return {
        "n": n,
        "seed": seed,
        "device_kind": env["backend"],
        "devices": env["devices"],
        "cpu_model": cpu_model(),
        "jax": env["jax"],
        "n_samples": metrics["n_samples"],
        "kmeans_acc": test["kmeans"]["acc"],
        "kmeans_nmi": test["kmeans"]["nmi"],
        "kmeans_ari": test["kmeans"]["ari"],
        "svm_acc": test["svm"]["acc"],
        "eval_rows": test.get("eval_rows"),
        "wall_seconds": wall,
        "stage_seconds": stage_seconds(metrics["timing"]),
        "timing": metrics["timing"],
        "specrage_steps": metrics["training"]["steps"],
        "stop_reason": metrics["training"]["stop_reason"],
        "validation_acc": steps_trace(metrics["training"]),
        "peak_host_bytes": env.get("peak_host_bytes"),
        "peak_device_bytes": env.get("peak_device_bytes"),
        "overrides": list(overrides),
        "resolved": metrics.get("resolved_defaults", {}),
        "command": rerun_command(n, seed, overrides, acc_every),
    }


def merged(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``previous`` runs with those of the same (n, seed, device kind) replaced by ``new``, sorted."""
    key = lambda r: (r["device_kind"], r["n"], r["seed"])  # noqa: E731
    table = {key(r): r for r in previous}
    table.update({key(r): r for r in new})
    return [table[k] for k in sorted(table)]


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Three panels: test k-means ACC against n (log axis, one line per device kind, mean over
    seeds); each stage's seconds and the wall time against n (log-log, the first device kind's
    runs with stage times); validation ACC against SpecRaGE steps, one line per run that traced it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (acc_ax, cost_ax, trace_ax) = plt.subplots(1, 3, figsize=(14, 3.8))
    by_kind: dict[str, dict[int, list[float]]] = {}
    for r in runs:
        by_kind.setdefault(r["device_kind"], {}).setdefault(r["n"], []).append(r["kmeans_acc"])
    for kind, by_n in sorted(by_kind.items()):
        sizes = sorted(by_n)
        acc_ax.plot(sizes, [sum(by_n[n]) / len(by_n[n]) for n in sizes], marker="o", label=kind)
    acc_ax.axhline(0.991, color="grey", linestyle="--", linewidth=0.8, label="paper, 1M (0.991)")
    acc_ax.set(xscale="log", xlabel="samples n (InfiniteMNIST)", ylabel="test k-means ACC")
    acc_ax.set_title("Whole pipeline, one command per n")
    acc_ax.legend()
    timed = [r for r in runs if "stage_seconds" in r]
    if timed:
        kind = sorted({r["device_kind"] for r in timed})[0]
        mine = sorted((r for r in timed if r["device_kind"] == kind), key=lambda r: r["n"])
        sizes = [r["n"] for r in mine]
        cost_ax.plot(sizes, [r["wall_seconds"] for r in mine], marker="o", color="black", label="wall")
        for stage in mine[0]["stage_seconds"]:
            cost_ax.plot(sizes, [r["stage_seconds"][stage] for r in mine], marker=".", label=stage)
        cost_ax.set_title(f"Seconds per stage ({kind})")
        cost_ax.legend(fontsize=7)
    cost_ax.set(xscale="log", yscale="log", xlabel="samples n", ylabel="seconds")
    for r in runs:
        if r.get("validation_acc"):
            trace = r["validation_acc"]
            trace_ax.plot([t["steps"] for t in trace], [t["acc"] for t in trace], marker=".", label=f"n {r['n']:,}")
    trace_ax.set(xlabel="SpecRaGE steps", ylabel="validation k-means ACC")
    trace_ax.set_title("ACC against steps")
    if trace_ax.lines:
        trace_ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds mnist/ (the raw MNIST files)")
    parser.add_argument("--sizes", nargs="+", type=int, required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--acc-every", type=int, default=5, help="trace the validation ACC every N SpecRaGE epochs (0: off)"
    )
    parser.add_argument("--work-dir", default="runs/infinitemnist_curve", help="the runs' output folders")
    parser.add_argument("--json", default=DEFAULT_JSON)
    parser.add_argument("--figure", default=DEFAULT_FIGURE)
    args = parser.parse_args()
    json_path = Path(args.json)
    previous = json.loads(json_path.read_text())["runs"] if json_path.is_file() else []
    new = []
    for n in args.sizes:
        for seed in args.seeds:
            record = run_size(n, seed, args.data_dir, Path(args.work_dir), args.overrides, args.acc_every)
            new.append(record)
            print(
                f"n {n} seed {seed} ({record['device_kind']}): k-means ACC {record['kmeans_acc']:.4f}, "
                f"SVM {record['svm_acc']:.4f}, wall {record['wall_seconds']:.0f} s, "
                f"peak host {record['peak_host_bytes'] / 2**30:.2f} GiB",
                flush=True,
            )
            runs = merged(previous, new)
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps({"runs": runs}, indent=1))
            plot(runs, Path(args.figure))
    print(f"wrote {json_path} and {args.figure}")


if __name__ == "__main__":
    main()
