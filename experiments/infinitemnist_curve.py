"""InfiniteMNIST at growing n with one command: the whole pipeline (data generation, autoencoders,
Siamese nets, SpecRaGE, evaluation) per size, then ACC against n.

Each size is one ``specrage train --dataset infinitemnist:N`` run in a child process, with the
settings the preset and the data give (``--set`` passes more to every run). Its wall time counts
from the child's start (generating the samples included) to its exit. Results are merged into
``--json`` by (n, seed, device kind), so CPU runs and accelerator runs accumulate in one file, and
``--figure`` plots test k-means ACC against n, one line per device kind.

    PYTHONPATH=. python experiments/infinitemnist_curve.py --data-dir DATA --sizes 20000 100000
    PYTHONPATH=. python experiments/infinitemnist_curve.py --data-dir DATA --sizes 1000000 \\
        --set train.data_on_device=true            # on a GPU

Per run the JSON holds test k-means ACC / NMI / ARI, SVM accuracy, wall seconds, the run's
stage times (``timing`` of its metrics.json), peak host and device memory, device and JAX
version, and the run's resolved settings.
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

DEFAULT_JSON = "experiments/results/infinitemnist_curve.json"
DEFAULT_FIGURE = "experiments/results/infinitemnist_curve.png"


def train_command(n: int, seed: int, data_dir: str, out: Path, overrides: Sequence[str]) -> list[str]:
    """The CLI command of one size."""
    command = [sys.executable, "-m", "specrage_jax.cli", "train", f"--dataset=infinitemnist:{n}", f"--seed={seed}"]
    command += [f"--data-dir={data_dir}", f"--out={out}", "--quiet", "--no-figure"]
    return command + [f"--set={item}" for item in overrides]


def run_size(n: int, seed: int, data_dir: str, work_dir: Path, overrides: Sequence[str]) -> dict[str, Any]:
    """One whole-pipeline run of ``n`` samples; its record (metrics, wall seconds, stage times)."""
    out = work_dir / f"infinitemnist-{n}-seed{seed}"
    start = time.perf_counter()
    done = subprocess.run(train_command(n, seed, data_dir, out, overrides))
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
        "jax": env["jax"],
        "n_samples": metrics["n_samples"],
        "kmeans_acc": test["kmeans"]["acc"],
        "kmeans_nmi": test["kmeans"]["nmi"],
        "kmeans_ari": test["kmeans"]["ari"],
        "svm_acc": test["svm"]["acc"],
        "wall_seconds": wall,
        "timing": metrics["timing"],
        "peak_host_bytes": env.get("peak_host_bytes"),
        "peak_device_bytes": env.get("peak_device_bytes"),
        "overrides": list(overrides),
        "resolved": metrics.get("resolved_defaults", {}),
    }


def merged(previous: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``previous`` runs with those of the same (n, seed, device kind) replaced by ``new``, sorted."""
    key = lambda r: (r["device_kind"], r["n"], r["seed"])  # noqa: E731
    table = {key(r): r for r in previous}
    table.update({key(r): r for r in new})
    return [table[k] for k in sorted(table)]


def plot(runs: list[dict[str, Any]], path: Path) -> None:
    """Test k-means ACC against n (log axis), one line per device kind; mean over seeds per n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    by_kind: dict[str, dict[int, list[float]]] = {}
    for r in runs:
        by_kind.setdefault(r["device_kind"], {}).setdefault(r["n"], []).append(r["kmeans_acc"])
    for kind, by_n in sorted(by_kind.items()):
        sizes = sorted(by_n)
        ax.plot(sizes, [sum(by_n[n]) / len(by_n[n]) for n in sizes], marker="o", label=kind)
    ax.axhline(0.991, color="grey", linestyle="--", linewidth=0.8, label="paper, 1M (0.991)")
    ax.set_xscale("log")
    ax.set_xlabel("samples n (InfiniteMNIST)")
    ax.set_ylabel("test k-means ACC")
    ax.set_title("Whole pipeline, one command per n")
    ax.legend()
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
    parser.add_argument("--work-dir", default="runs/infinitemnist_curve", help="the runs' output folders")
    parser.add_argument("--json", default=DEFAULT_JSON)
    parser.add_argument("--figure", default=DEFAULT_FIGURE)
    args = parser.parse_args()
    json_path = Path(args.json)
    previous = json.loads(json_path.read_text())["runs"] if json_path.is_file() else []
    new = []
    for n in args.sizes:
        for seed in args.seeds:
            record = run_size(n, seed, args.data_dir, Path(args.work_dir), args.overrides)
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
