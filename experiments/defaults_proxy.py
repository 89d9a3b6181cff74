"""Partitions of the training batch under every candidate graph setting, for choosing the rules.

For each dataset, the default estimator's preprocessing and validation split are run, then on
the seeded batch the defaults read (the same rows ``resolve_defaults`` sees) every candidate
setting's graph is built: graph inputs (the model's rows, and the unreduced rows where a view is
projected) x l in ``NEIGHBOR_CANDIDATES`` x degree normalization (none, samples). Each graph's
bottom c eigenvectors of the unnormalized Laplacian (what the network's loss is minimized by),
c = k .. 2k (the component rule's candidates), unit rows, k-means (k clusters, n_init 10,
seed 0) give one partition of the batch. Each view's own graph at every l gives the view's partition (c = k).

Saved per dataset (``OUT/NAME.npz``): the partitions (``setting`` keys ``inputs|l|norm|c`` and
``view|v|l``), the batch's labels and the settings the current defaults resolve; a selection
criterion is then scored against the exact-embedding accuracy of the partition it picks without
refitting anything.

    PYTHONPATH=. python experiments/defaults_proxy.py --data-dir DATA --out /tmp/proxy
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from specrage_jax.api import fit_pipeline as pipeline
from specrage_jax.config import ExperimentConfig
from specrage_jax.data import MultiViewData, split_indices
from specrage_jax.training.defaults import FULL_BATCH_MAX
from specrage_jax.training.graph_probes import (
    bottom_laplacian_eigenpairs,
    mean_graph,
    present_neighbor_lists,
    seeded_rows,
)
from specrage_jax.training.graph_rules import NEIGHBOR_CANDIDATES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsuite import PAPER_DATASETS, load_paper_dataset
from devsuite_variants import VARIANTS, build_variant

from specrage_jax.data.loaders import load_mat


def degree_normalized(w: sp.csr_matrix) -> sp.csr_matrix:
    """W_ij / sqrt(d_i d_j) times the mean degree (``graph.degree_normalization=samples``)."""
    d = np.asarray(w.sum(axis=1)).ravel()
    inv = np.where(d > 0, 1.0 / np.sqrt(np.maximum(d, 1e-300)), 0.0)
    return (sp.diags(inv) @ w @ sp.diags(inv) * float(d.mean())).tocsr()


def partitions_of(w: sp.csr_matrix, k: int, counts: range) -> dict[int, np.ndarray]:
    """{c: k-means labels of the unit rows of the bottom c Laplacian eigenvectors of w}."""
    largest = min(max(counts), w.shape[0] - 2)
    _, vectors = bottom_laplacian_eigenpairs(w, largest)
    out = {}
    for c in counts:
        if c > largest:
            break
        z = vectors[:, :c] / np.maximum(np.linalg.norm(vectors[:, :c], axis=1, keepdims=True), 1e-12)
        out[c] = KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(z).astype(np.int16)
    return out


def fit_rows(data: MultiViewData, paper: bool, seed: int) -> np.ndarray:
    """The rows the estimator is fitted on: all rows, or the paper protocol's train + validation."""
    if not paper:
        return np.arange(data.n_samples)
    idx = split_indices(data.labels, seed=seed)
    return np.sort(np.concatenate([idx.train, idx.val]))


@dataclass(frozen=True)
class ResolvedFit:
    """What the default estimator's fit reads before training: the scaled training views (and
    their unreduced rows where a view is projected), the training rows' labels and the settings
    resolved from them with their record."""

    scaled: pipeline.Scaled
    unreduced: tuple[np.ndarray, ...] | None
    labels: np.ndarray  # (n_train,)
    config: ExperimentConfig
    record: dict[str, Any]

    def setting(self) -> dict[str, Any]:
        """The resolved graph setting, keyed as the saved partitions are (inputs, l, norm, c)."""
        return {
            "inputs": self.config.data.graph_inputs if self.unreduced is not None else "model",
            "l": self.config.graph.n_neighbors,
            "norm": self.config.graph.degree_normalization,
            "c": self.config.model.n_components,
        }


def resolved_fit(data: MultiViewData, paper: bool, seed: int) -> ResolvedFit:
    """The default estimator's validation split, preprocessing and resolved settings on the rows it
    is fitted on (:func:`fit_rows`)."""
    rows_fit = fit_rows(data, paper, seed)
    views = [np.asarray(v)[rows_fit] if not sp.issparse(v) else v[rows_fit] for v in data.views]
    k = data.n_classes
    config = ExperimentConfig()
    train_idx, val_idx = pipeline.validation_split(len(rows_fit), seed, config.data.val_fraction)
    train = pipeline.select_rows(views, train_idx)
    val = pipeline.select_rows(views, val_idx)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a view left out is recorded in the resolved settings
        scaled = pipeline.preprocess(train, val, config, n_clusters=k, seed=seed)
    unreduced = None if scaled.unreduced is None else scaled.unreduced[0]
    resolved, record = pipeline.resolve_settings(
        config, scaled.train, k, seed=seed, scalers=scaled.scalers, unreduced_train=unreduced
    )
    return ResolvedFit(scaled, unreduced, data.labels[rows_fit][train_idx], resolved, record)


def dataset_partitions(data: MultiViewData, paper: bool, seed: int) -> dict[str, Any]:
    """Every candidate setting's partition of the batch the defaults read, and the current choice."""
    fit = resolved_fit(data, paper, seed)
    scaled, unreduced, k = fit.scaled, fit.unreduced, data.n_classes
    n_train = len(fit.labels)
    m = min(n_train, FULL_BATCH_MAX)
    batch = seeded_rows(n_train, m, seed=seed, stream=5)
    inputs = {"model": scaled.train}
    if unreduced is not None:
        inputs["unreduced"] = unreduced
    candidates = [l for l in NEIGHBOR_CANDIDATES if l <= m // 3]
    counts = range(k, 2 * k + 1)
    out: dict[str, Any] = {"labels": fit.labels[batch]}
    with threadpool_limits(limits=1, user_api="openmp"):
        for name, graph_views in inputs.items():
            neighbors = present_neighbor_lists(graph_views, batch, max(candidates), distinct=True)
            for l in candidates:
                w = mean_graph(neighbors, m, l)
                for norm, graph in (("none", w), ("samples", degree_normalized(w))):
                    for c, part in partitions_of(graph, k, counts).items():
                        out[f"{name}|{l}|{norm}|{c}"] = part
                if name == "model":
                    for v, single in enumerate(neighbors):
                        parts = partitions_of(mean_graph([single], m, l), k, range(k, k + 1))
                        out[f"view|{v}|{l}"] = parts[k]
    out["current"] = np.array(json.dumps({**fit.setting(), "kinds": [s.kind for s in scaled.scalers]}))
    return out


SUITE = ("20newsgroups", "BBC4view", "CiteSeer", "WebKB", "WikipediaArticles", "EYaleB10", "course3")
PROXY_DATASETS = (*SUITE, "handwritten", "bdgp", *VARIANTS)  # every regime the defaults are judged on


def load_named(name: str, data_dir: str, seed: int) -> tuple[MultiViewData, bool]:
    """(data, paper protocol?) for a suite set, a paper dataset or a variant."""
    if name.lower() in PAPER_DATASETS:
        return load_paper_dataset(name.lower(), data_dir, seed), True
    if name in VARIANTS:
        baselines = json.loads(Path("experiments/results/devsuite_variants_baselines.json").read_text())
        return build_variant(name, data_dir, seed=int(baselines.get(name, {}).get("seed", 0))), False
    return load_mat(Path(data_dir) / "devsuite" / f"{name}.mat"), False


def per_set_arguments(description: str) -> argparse.Namespace:
    """The command line of a per-set probe over the judged sets: --data-dir, --out, --seed (0) and
    --datasets (default: every set of ``PROXY_DATASETS``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="*")
    args = parser.parse_args()
    args.datasets = args.datasets or list(PROXY_DATASETS)
    return args


def main() -> None:
    args = per_set_arguments(__doc__.splitlines()[0])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.datasets:
        target = out / f"{name}_s{args.seed}.npz"
        if target.exists():
            continue
        start = time.perf_counter()
        data, paper = load_named(name, args.data_dir, args.seed)
        parts = dataset_partitions(data, paper, args.seed)
        np.savez_compressed(target, **parts)
        print(f"{name}: {len(parts) - 2} partitions, {time.perf_counter() - start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
