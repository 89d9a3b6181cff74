"""How the neighbour rule's choice scores on the exact spectral embedding of the batch graph.

Reads the partitions ``experiments/defaults_proxy.py`` saved (``PARTS/NAME_sSEED.npz``: every
candidate setting's k-means partition of the batch the defaults read, and the settings the rules
resolved when the partitions were made: the ``previous`` rules). Resolves the settings again with
the library as it is now and scores, per dataset and seed, the partition of each choice (ACC
against the labels, at c = k and at the chosen c), of the densest candidate and of the best
candidate in hindsight. A label-free rule is judged by how close it comes to the best without
looking, across every regime at once.

    PYTHONPATH=. python experiments/defaults_proxy.py --data-dir DATA --out PARTS --seed S   # S = 0, 1, 2
    PYTHONPATH=. python experiments/defaults_rules.py --data-dir DATA --parts PARTS \\
        --previous-commit e0fb9e7 --out experiments/results/defaults_rules.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.evaluation.metrics import clustering_accuracy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_proxy import load_named, resolved_fit
from devsuite import cpu_model


def resolved_now(name: str, data_dir: str, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(setting, record) the library resolves now for ``name`` at ``seed``, on the rows the estimator fits."""
    data, paper = load_named(name, data_dir, seed)
    fit = resolved_fit(data, paper, seed)
    return fit.setting(), fit.record


def partition_acc(parts: Any, labels: np.ndarray, setting: dict[str, Any], c: int) -> float | None:
    """ACC of the saved partition of ``setting`` with c directions; None where none was saved."""
    key = f"{setting['inputs']}|{setting['l']}|{setting['norm']}|{c}"
    return clustering_accuracy(labels, parts[key]) if key in parts.files else None


def score_file(path: Path, data_dir: str) -> dict[str, Any]:
    """One dataset and seed: the previous and the present choice, the densest and the best candidate."""
    name, seed = path.stem.rsplit("_s", 1)
    parts = np.load(path)
    labels = parts["labels"]
    k = len(np.unique(labels))
    previous = json.loads(str(parts["current"]))
    now, record = resolved_now(name, data_dir, int(seed))
    inputs, norm = now["inputs"], now["norm"]
    by_l = {
        int(f.split("|")[1]): clustering_accuracy(labels, parts[f])
        for f in parts.files
        if f.startswith(f"{inputs}|") and f.endswith(f"|{norm}|{k}")
    }
    return {
        "dataset": name,
        "seed": int(seed),
        "k": k,
        "previous": {**previous, "acc_at_k": partition_acc(parts, labels, previous, k)},
        "now": {
            **now,
            "rule": record.get("graph.n_neighbors", {}).get("rule", ""),
            "acc_at_k": partition_acc(parts, labels, now, k),
            "acc_at_c": partition_acc(parts, labels, now, now["c"]),
        },
        "dense_acc_at_k": by_l[max(by_l)],
        "best_acc_at_k": max(by_l.values()),
        "acc_at_k_by_l": by_l,
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over every dataset and seed (ACC at c = k) of each choice."""

    def mean(values: list[float | None]) -> float:
        return float(np.mean([v for v in values if v is not None]))

    return {
        "runs": len(rows),
        "previous": mean([r["previous"]["acc_at_k"] for r in rows]),
        "now": mean([r["now"]["acc_at_k"] for r in rows]),
        "dense": mean([r["dense_acc_at_k"] for r in rows]),
        "best": mean([r["best_acc_at_k"] for r in rows]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--parts", required=True, help="the directory defaults_proxy.py wrote")
    parser.add_argument("--previous-commit", required=True, help="the commit whose rules made the partitions")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = [score_file(path, args.data_dir) for path in sorted(Path(args.parts).glob("*_s*.npz"))]
    result = {
        "cpu": cpu_model(),
        "previous_rules": args.previous_commit,
        "protocol": "exact spectral embedding of the batch graph the defaults read; k-means seed 0, n_init 10",
        "summary": summary(rows),
        "runs": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
