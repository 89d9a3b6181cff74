"""Naive baselines for a multi-view set, computed as the development suite's ``baselines.json``.

Two transductive methods on all n rows, k-means (k = classes, n_init 10) with seeds 0-4,
ACC (Hungarian), NMI and ARI averaged over the seeds, with the per-seed numbers:

* ``concat_kmeans/<prep>``: k-means on the concatenated preprocessed views;
* ``se_mean_graph/<prep>``: the exact spectral embedding of the mean of the views' graphs, then
  k-means. Each view's graph is its symmetric 10-NN Gaussian graph: weights exp(-d^2 / (2 sigma^2))
  with sigma the median of the view's nonzero 10-NN distances, symmetrized as
  max(W, W^T); the embedding is D^-1/2 u for the k eigenvectors u of D^-1/2 W D^-1/2 with the
  largest eigenvalues (the random-walk Laplacian's k smallest, the constant one included), rows
  not normalized.

Preprocessing per view (``prep``): a view with under 10 % nonzero entries is sparse and reduced to
at most 100 dimensions (and n - 1) with TruncatedSVD (after row L2 normalization for ``l2``); then ``std``
standardizes every feature and ``l2`` scales every row to unit norm (after standardizing a dense
view). Seed s redoes the whole pipeline: the TruncatedSVD takes ``random_state=s`` as k-means does.
These choices reproduce ``baselines.json`` (ACC within 0.01 on WebKB, 20newsgroups,
BBC4view and WikipediaArticles; see ``check_against``).

    PYTHONPATH=. python experiments/naive_baselines.py --data-dir DATA --variants all \\
        --out experiments/results/devsuite_variants_baselines.json
    PYTHONPATH=. python experiments/naive_baselines.py --data-dir DATA --check WebKB 20newsgroups
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse
from scipy.linalg import eigh
from sklearn.cluster import KMeans
from sklearn.decomposition import TruncatedSVD
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors
from sklearn.preprocessing import StandardScaler, normalize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from specrage_jax.data import MultiViewData
from specrage_jax.evaluation.metrics import clustering_accuracy

KMEANS_SEEDS = range(5)
SPARSE_BELOW = 0.10  # a view with a smaller fraction of nonzero entries counts as sparse
SVD_DIMS = 100
N_NEIGHBORS = 10
PREPS = ("std", "l2")
BASELINE_ORDER = ("concat_kmeans/std", "se_mean_graph/std", "concat_kmeans/l2", "se_mean_graph/l2")


def as_float_array(view: Any) -> np.ndarray | scipy.sparse.csr_matrix:
    """A float64 copy of a dense or scipy-sparse view (sparse stays sparse, as CSR)."""
    if scipy.sparse.issparse(view):
        return scipy.sparse.csr_matrix(view, dtype=np.float64)
    return np.asarray(view, dtype=np.float64)


def nonzero_fraction(view: Any) -> float:
    if scipy.sparse.issparse(view):
        return float(view.count_nonzero()) / float(np.prod(view.shape))
    return float(np.count_nonzero(view)) / float(view.size)


def preprocess_view(view: Any, prep: str, *, svd_seed: int = 0) -> np.ndarray:
    """One view preprocessed for ``prep`` ("std" or "l2"), as a dense (n, d') float64 array."""
    if prep not in PREPS:
        raise ValueError(f"prep must be one of {PREPS}, got {prep!r}")
    x = as_float_array(view)
    if nonzero_fraction(x) < SPARSE_BELOW:
        if prep == "l2":
            x = normalize(x)
        dims = min(SVD_DIMS, x.shape[1] - 1, x.shape[0] - 1)  # fewer than 100 rows: at most n - 1
        x = TruncatedSVD(n_components=dims, random_state=svd_seed).fit_transform(x)
        return StandardScaler().fit_transform(x) if prep == "std" else normalize(x)
    x = StandardScaler().fit_transform(x.toarray() if scipy.sparse.issparse(x) else x)
    return x if prep == "std" else normalize(x)


def knn_gaussian_graph(x: np.ndarray, n_neighbors: int = N_NEIGHBORS) -> np.ndarray:
    """(n, n) symmetric 10-NN Gaussian affinity: w_ij = exp(-d_ij^2 / (2 sigma^2)) for j among the
    10 nearest neighbours of i (itself excluded), sigma the median of the nonzero ones of the
    n * 10 neighbour distances (duplicate rows give zeros), symmetrized as max(W, W^T)."""
    n = x.shape[0]
    distances, neighbors = NearestNeighbors(n_neighbors=n_neighbors).fit(x).kneighbors()
    positive = distances[distances > 0]
    sigma = float(np.median(positive)) if positive.size else 1.0
    weights = np.exp(-(distances**2) / (2.0 * sigma**2))
    w = np.zeros((n, n))
    w[np.repeat(np.arange(n), n_neighbors), neighbors.ravel()] = weights.ravel()
    return np.maximum(w, w.T)


def spectral_embedding(w: np.ndarray, k: int) -> np.ndarray:
    """The exact spectral embedding of an affinity W: the k eigenvectors u of D^-1/2 W D^-1/2 with
    the largest eigenvalues (the smallest of the normalized Laplacian), mapped to D^-1/2 u (the
    random-walk Laplacian's eigenvectors, the trivial constant one included); (n, k)."""
    degree = w.sum(axis=1)
    inv_sqrt = np.where(degree > 0, 1.0 / np.sqrt(np.maximum(degree, 1e-300)), 0.0)
    n = w.shape[0]
    _, vectors = eigh(inv_sqrt[:, None] * w * inv_sqrt[None, :], subset_by_index=[n - k, n - 1])
    return inv_sqrt[:, None] * vectors[:, ::-1]


def kmeans_once(embedding: np.ndarray, labels: np.ndarray, k: int, seed: int) -> dict[str, Any]:
    """ACC / NMI / ARI of one k-means (n_init 10, ``random_state=seed``)."""
    with threadpool_limits(limits=1, user_api="openmp"):
        predicted = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(embedding)
    return partition_scores(labels, predicted, seed)


def partition_scores(labels: np.ndarray, predicted: np.ndarray, seed: int) -> dict[str, Any]:
    """ACC (Hungarian) / NMI / ARI of one partition ``predicted`` (n,) against ``labels`` (n,)."""
    return {
        "seed": seed,
        "ACC": clustering_accuracy(labels, predicted),
        "NMI": float(normalized_mutual_info_score(labels, predicted)),
        "ARI": float(adjusted_rand_score(labels, predicted)),
    }


def summarize(per_seed: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Means and (population) standard deviations over the seeds, the per-seed rows, the seconds."""
    summary: dict[str, Any] = {}
    for key in ("ACC", "NMI", "ARI"):
        values = [row[key] for row in per_seed]
        summary[key], summary[f"{key}_std"] = float(np.mean(values)), float(np.std(values))
    summary["per_seed"] = per_seed
    summary["seconds"] = round(seconds, 1)
    return summary


def naive_baselines(views: Sequence[Any], labels: np.ndarray, k: int) -> dict[str, Any]:
    """One entry of ``baselines.json`` for ``views`` ((n, d_v) dense or scipy-sparse) and ``labels``:
    {n, k, dims, baselines: {name: {ACC, ACC_std, NMI, NMI_std, ARI, ARI_std, per_seed, seconds}}}.

    Seed s runs the whole pipeline: the sparse views' TruncatedSVD with ``random_state=s`` (so the
    spectral baselines also vary with the seed when a view is sparse), then k-means with
    ``random_state=s``."""
    labels = np.asarray(labels)
    if not views:
        raise ValueError("naive_baselines: no views")
    n = labels.shape[0]
    bad = [tuple(v.shape) for v in views if v.shape[0] != n]
    if bad:
        raise ValueError(f"naive_baselines: views of shapes {bad} for {n} labels")
    any_sparse = any(nonzero_fraction(v) < SPARSE_BELOW for v in views)
    baselines: dict[str, Any] = {}
    for prep in PREPS:
        runs: dict[str, list[dict[str, Any]]] = {"concat_kmeans": [], "se_mean_graph": []}
        seconds = {"concat_kmeans": 0.0, "se_mean_graph": 0.0}
        embedding = None
        for seed in KMEANS_SEEDS:
            start = time.perf_counter()
            prepared = [preprocess_view(view, prep, svd_seed=seed) for view in views]
            prep_seconds = time.perf_counter() - start
            start = time.perf_counter()
            runs["concat_kmeans"].append(kmeans_once(np.hstack(prepared), labels, k, seed))
            seconds["concat_kmeans"] += prep_seconds + time.perf_counter() - start
            start = time.perf_counter()
            if embedding is None or any_sparse:
                graph = np.mean([knn_gaussian_graph(x) for x in prepared], axis=0)
                embedding = spectral_embedding(graph, k)
            runs["se_mean_graph"].append(kmeans_once(embedding, labels, k, seed))
            seconds["se_mean_graph"] += prep_seconds + time.perf_counter() - start
        for method, per_seed in runs.items():
            baselines[f"{method}/{prep}"] = summarize(per_seed, seconds[method])
    ordered = {name: baselines[name] for name in BASELINE_ORDER}
    return {"n": int(n), "k": int(k), "dims": [int(v.shape[1]) for v in views], "baselines": ordered}


def best_baseline(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, numbers) of the baseline with the highest mean ACC: the bar."""
    return max(entry["baselines"].items(), key=lambda item: item[1]["ACC"])


def known_sets(kind: str) -> list[str]:
    """The development suite's set names (``kind`` "suite") or the variants' names, in order."""
    import devsuite_variants as dv

    return list(dv.DEVSUITE_SETS) if kind == "suite" else list(dv.VARIANTS)


def add_set_arguments(parser: argparse.ArgumentParser, *, data_dir_required: bool) -> None:
    """--data-dir, --datasets (suite sets or 'all'), --variants (names or 'all') and --seed."""
    parser.add_argument("--data-dir", required=data_dir_required, help="holds devsuite/, handwritten.mat, mnist/")
    parser.add_argument("--datasets", nargs="*", default=None, help="development-suite sets, or 'all'")
    parser.add_argument("--variants", nargs="*", default=None, help="variant names, or 'all' (devsuite_variants)")
    parser.add_argument("--seed", type=int, default=0, help="the variants' seed")


def chosen_sets(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(kind, names) for the suite sets and/or the variants that :func:`add_set_arguments`'s
    arguments ask for; an empty list or 'all' names every set of its kind. A name of neither kind
    stops the script with the names it knows."""
    chosen = []
    for kind, asked in (("suite", args.datasets), ("variants", args.variants)):
        if asked is None:
            continue
        known = known_sets(kind)
        names = known if asked in ([], ["all"]) else list(asked)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise SystemExit(f"unknown {kind} names {unknown}; known: {', '.join(known)}")
        chosen.append((kind, names))
    return chosen


def load_known_set(kind: str, name: str, data_dir: str, seed: int) -> MultiViewData:
    """A development-suite set (``kind`` "suite", all views) or a variant built with ``seed``."""
    import devsuite_variants as dv

    return dv.load_base(name, data_dir) if kind == "suite" else dv.build_variant(name, data_dir, seed=seed)


def write_entries(out: Path, results: dict[str, Any], known: Sequence[str]) -> None:
    """Writes ``results`` ({set name: entry}) to ``out`` as JSON, in the order of ``known``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({key: results[key] for key in known if key in results}, indent=1))


def check_against(data_dir: str, names: Sequence[str]) -> list[dict[str, Any]]:
    """Recomputes the named development-suite sets and compares with ``baselines.json``; one row
    per (dataset, baseline): ours, theirs and the difference in ACC."""
    from specrage_jax.data.loaders import load_mat

    suite = Path(data_dir) / "devsuite"
    reference = json.loads((suite / "baselines.json").read_text())
    rows = []
    for name in names:
        data = load_mat(suite / f"{name}.mat")
        ours = naive_baselines(data.views, data.labels, data.n_classes)
        for baseline in BASELINE_ORDER:
            mine, theirs = ours["baselines"][baseline], reference[name]["baselines"][baseline]
            rows.append(
                {
                    "dataset": name,
                    "baseline": baseline,
                    "ACC": mine["ACC"],
                    "ACC_ref": theirs["ACC"],
                    "diff": mine["ACC"] - theirs["ACC"],
                    "NMI": mine["NMI"],
                    "NMI_ref": theirs["NMI"],
                }
            )
            print(
                f"{name:18s} {baseline:18s} ACC {mine['ACC']:.4f} ref {theirs['ACC']:.4f} "
                f"diff {mine['ACC'] - theirs['ACC']:+.4f}  NMI {mine['NMI']:.4f} ref {theirs['NMI']:.4f}",
                flush=True,
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds devsuite/, handwritten.mat, mnist/")
    parser.add_argument("--variants", nargs="*", default=None, help="variant names, or 'all' (devsuite_variants)")
    parser.add_argument("--seed", type=int, default=0, help="the variants' seed")
    parser.add_argument("--out", default="experiments/results/devsuite_variants_baselines.json")
    parser.add_argument("--check", nargs="*", default=None, help="devsuite sets to compare with baselines.json")
    args = parser.parse_args()
    if args.check is not None:
        check_against(args.data_dir, args.check or ["WebKB", "20newsgroups", "BBC4view", "WikipediaArticles"])
        if args.variants is None:
            return
    from devsuite_variants import VARIANTS, build_variant

    names = list(VARIANTS) if not args.variants or args.variants == ["all"] else args.variants
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise SystemExit(f"naive_baselines: unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    out = Path(args.out)
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    for name in names:
        data = build_variant(name, args.data_dir, seed=args.seed)
        entry = naive_baselines(data.views, data.labels, data.n_classes)
        entry["seed"] = args.seed
        results[name] = entry
        best_name, best = best_baseline(entry)
        print(f"{name:32s} n {entry['n']:5d} k {entry['k']:3d}  best {best_name} ACC {best['ACC']:.3f}", flush=True)
        write_entries(out, results, list(VARIANTS))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
