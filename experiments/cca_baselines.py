"""Linear CCA baselines for a multi-view set, beside the naive baselines (``naive_baselines.py``).

Two transductive linear methods on all n rows, from the textbook math (NumPy / SciPy), each at the
shrinkage values c in SHRINKAGE, with k = the number of classes as the embedding dimension:

* ``mcca/c<c>``: multiset CCA in its SUMCOR generalized-eigenproblem form. With the centred views
  X_v, C_ij = X_i^T X_j / (n - 1), the block matrix A of all cross-covariances C_ij (i != j; the
  diagonal blocks zero) and the block-diagonal B of (1 - c) C_vv + c tr(C_vv) / d_v I, the top k
  solutions of A w = mu B w give the directions w = (W_1; ...; W_V); the embedding is sum_v X_v W_v.
  On two views without shrinkage mu is the canonical correlation; on V views mu / (V - 1) is the
  mean of the pairwise correlations (reported as ``spectrum``; shrinkage can lift it above 1).
* ``gcca/c<c>``: generalized CCA, Carroll's MAXVAR: the shared representation G (n, k) holds the
  top k eigenvectors of sum_v P_v, P_v = X_v ((1 - c) X_v^T X_v + c tr / d_v I)^-1 X_v^T, computed
  as the top left singular vectors of the stacked whitened views [X_1 R_1^-1/2, ..., X_V R_V^-1/2]
  (``spectrum``: the eigenvalues, in [0, V]).

Then k-means (k clusters, n_init 10, seeds 0-4) on the embedding's rows as they are, or scaled to
unit length (the names with ``/unit``): 2 methods x 4 shrinkages x 2 = 16 settings, scored as the
naive baselines are (ACC, NMI, ARI averaged over the seeds, per-seed rows) in the same JSON
layout, plus ``cca_best``: the setting with the highest mean ACC (the "best of 16 settings").

Views are reduced as the naive baselines reduce them: a sparse view (under 10 % nonzero) is row
L2-normalized and cut to at most 100 dimensions with TruncatedSVD (``random_state`` = the seed),
its rows L2-normalized again; a dense view is standardized. A view still wider than
min(100, n - 1) is then cut to that many principal components, so the covariances are well posed.

    PYTHONPATH=. python experiments/cca_baselines.py --data-dir DATA --datasets all
    PYTHONPATH=. python experiments/cca_baselines.py --data-dir DATA --variants all
    PYTHONPATH=. python experiments/cca_baselines.py --data-dir DATA --variants all --table-only
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
from scipy.linalg import eigh, svd
from sklearn.preprocessing import normalize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import naive_baselines as nb

SHRINKAGE = (0.1, 0.3, 0.5, 0.9)
METHODS = ("mcca", "gcca")
ROWS = ("raw", "unit")
MAX_DIMS = 100
SUITE_OUT = "experiments/results/devsuite_cca_baselines.json"
VARIANTS_OUT = "experiments/results/devsuite_variants_cca_baselines.json"
VARIANTS_NAIVE = "experiments/results/devsuite_variants_baselines.json"


# --- views and covariances -------------------------------------------------------------------------


def centered(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=0, keepdims=True)


def pca_cap(x: np.ndarray, dims: int) -> np.ndarray:
    """The centred ``x``, cut to its first ``dims`` principal components when it is wider."""
    x = centered(np.asarray(x, dtype=np.float64))
    if x.shape[1] <= dims:
        return x
    u, s, _ = svd(x, full_matrices=False)
    return u[:, :dims] * s[:dims]


def reduce_view(view: Any, seed: int = 0) -> np.ndarray:
    """One view as the CCA methods see it (module docstring): (n, d') float64, centred."""
    sparse = nb.nonzero_fraction(view) < nb.SPARSE_BELOW
    x = nb.preprocess_view(view, "l2" if sparse else "std", svd_seed=seed)
    return pca_cap(x, max(1, min(MAX_DIMS, x.shape[0] - 1)))


def shrunk(cov: np.ndarray, c: float) -> np.ndarray:
    """(1 - c) C + c tr(C) / d I; a zero C gives the identity's share instead."""
    d = cov.shape[0]
    level = float(np.trace(cov)) / d
    return (1.0 - c) * cov + c * (level if level > 0 else 1.0) * np.eye(d)


# --- the two methods -----------------------------------------------------------------------------


def mcca(views: Sequence[np.ndarray], k: int, c: float) -> tuple[np.ndarray, np.ndarray]:
    """(embedding (n, k) = sum_v X_v W_v, mean pairwise correlations (k,)) of SUMCOR multiset
    CCA with shrinkage ``c`` (module docstring); ``views`` (n, d_v), centred here."""
    xs = [centered(np.asarray(v, dtype=np.float64)) for v in views]
    if len(xs) < 2:
        raise ValueError("mcca: needs two views or more")
    stacked = np.hstack(xs)
    n, total = stacked.shape
    k = min(k, total)
    cross = stacked.T @ stacked / (n - 1)
    within = np.zeros_like(cross)
    edges = np.cumsum([0] + [x.shape[1] for x in xs])
    for start, stop in zip(edges[:-1], edges[1:]):
        within[start:stop, start:stop] = shrunk(cross[start:stop, start:stop], c)
        cross[start:stop, start:stop] = 0.0
    values, vectors = eigh(cross, within, subset_by_index=[total - k, total - 1])
    values, vectors = values[::-1], vectors[:, ::-1]
    embedding = sum(x @ vectors[start:stop] for x, start, stop in zip(xs, edges[:-1], edges[1:]))
    return embedding, values / (len(xs) - 1)


def whitened(x: np.ndarray, c: float) -> np.ndarray:
    """X R^-1/2 (in R's eigenbasis) with R = (1 - c) X^T X + c tr / d I: its Gram matrix is P."""
    values, vectors = eigh(shrunk(x.T @ x, c))
    values = np.maximum(values, 1e-12 * max(float(values.max()), 1e-300))
    return (x @ vectors) / np.sqrt(values)


def gcca(views: Sequence[np.ndarray], k: int, c: float) -> tuple[np.ndarray, np.ndarray]:
    """(G (n, k), its eigenvalues of sum_v P_v (k,)) of MAXVAR generalized CCA with shrinkage
    ``c`` (module docstring); ``views`` (n, d_v), centred here."""
    stacked = np.hstack([whitened(centered(np.asarray(v, dtype=np.float64)), c) for v in views])
    u, s, _ = svd(stacked, full_matrices=False)
    k = min(k, s.size)
    return u[:, :k], s[:k] ** 2


SOLVERS = {"mcca": mcca, "gcca": gcca}


# --- scoring -----------------------------------------------------------------------------------


def setting_name(method: str, c: float, rows: str) -> str:
    return f"{method}/c{c:g}" + ("" if rows == "raw" else f"/{rows}")


def setting_names(shrinkage: Sequence[float] = SHRINKAGE) -> list[str]:
    return [setting_name(m, c, r) for m in METHODS for c in shrinkage for r in ROWS]


def embeddings(
    reduced: Sequence[np.ndarray], k: int, shrinkage: Sequence[float]
) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    """{setting name: (embedding, spectrum, seconds)} for every method, shrinkage and row form."""
    out: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
    for method in METHODS:
        for c in shrinkage:
            start = time.perf_counter()
            embedding, spectrum = SOLVERS[method](reduced, k, c)
            seconds = time.perf_counter() - start
            out[setting_name(method, c, "raw")] = (embedding, spectrum, seconds)
            out[setting_name(method, c, "unit")] = (normalize(embedding), spectrum, seconds)
    return out


def best_setting(baselines: dict[str, Any]) -> dict[str, Any]:
    """The ``cca_best`` summary: the setting with the highest mean ACC and its numbers."""
    name, best = max(baselines.items(), key=lambda item: item[1]["ACC"])
    summary = {"name": name, "settings": len(baselines)}
    summary.update({key: best[key] for key in ("ACC", "ACC_std", "NMI", "NMI_std", "ARI", "ARI_std")})
    return summary


def cca_baselines(
    views: Sequence[Any],
    labels: np.ndarray,
    k: int,
    *,
    seeds: Sequence[int] = tuple(nb.KMEANS_SEEDS),
    shrinkage: Sequence[float] = SHRINKAGE,
) -> dict[str, Any]:
    """One entry, in the naive baselines' layout: {n, k, dims, reduced_dims, baselines: {setting:
    {ACC, ..., per_seed, seconds, spectrum}}, cca_best}. Seed s redoes the sparse views' SVD with
    ``random_state=s`` (a set without sparse views is reduced once) and the k-means."""
    labels = np.asarray(labels)
    n = labels.shape[0]
    if any(v.shape[0] != n for v in views) or len(views) < 2:
        raise ValueError(f"cca_baselines: views of shapes {[v.shape for v in views]} for {n} labels")
    any_sparse = any(nb.nonzero_fraction(v) < nb.SPARSE_BELOW for v in views)
    names = setting_names(shrinkage)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    seconds = dict.fromkeys(names, 0.0)
    spectra: dict[str, list[float]] = {}
    reduced, solved = None, None
    for seed in seeds:
        if reduced is None or any_sparse:
            reduced = [reduce_view(v, seed) for v in views]
            solved = embeddings(reduced, k, shrinkage)
        for name in names:
            embedding, spectrum, solve_seconds = solved[name]
            start = time.perf_counter()
            runs[name].append(nb.kmeans_once(embedding, labels, k, seed))
            seconds[name] += solve_seconds + time.perf_counter() - start
            spectra.setdefault(name, [round(float(x), 4) for x in spectrum])
    baselines = {name: {**nb.summarize(runs[name], seconds[name]), "spectrum": spectra[name]} for name in names}
    return {
        "n": int(n),
        "k": int(k),
        "dims": [int(v.shape[1]) for v in views],
        "reduced_dims": [int(x.shape[1]) for x in reduced],
        "baselines": baselines,
        "cca_best": best_setting(baselines),
    }


# --- command line --------------------------------------------------------------------------------


def naive_bar(entry: dict[str, Any] | None) -> tuple[str, float] | None:
    if entry is None:
        return None
    name, numbers = nb.best_baseline(entry)
    return name, float(numbers["ACC"])


def table_line(name: str, entry: dict[str, Any], naive: dict[str, Any] | None) -> str:
    """dataset, n, views' widths, best naive bar, best CCA (and which), their ratio."""
    best = entry["cca_best"]
    bar = naive_bar(naive)
    dims = "/".join(str(d) for d in entry["dims"])
    naive_text = f"{bar[1]:.3f} {bar[0]:18s}" if bar else f"{'-':24s}"
    ratio = f"{best['ACC'] / bar[1]:.2f}" if bar and bar[1] > 0 else "-"
    return (
        f"{name:36s} n {entry['n']:5d}  {dims:24s} naive {naive_text}  "
        f"cca {best['ACC']:.3f} {best['name']:18s} ratio {ratio}"
    )


def targets(args: argparse.Namespace) -> list[tuple[str, list[str], str, str]]:
    """(kind, names, out file, naive file) for the suite sets and/or the variants asked for."""
    jobs = []
    for kind, names in nb.chosen_sets(args):
        if kind == "suite":
            jobs.append((kind, names, args.out or SUITE_OUT, str(Path(args.data_dir) / "devsuite" / "baselines.json")))
        else:
            jobs.append((kind, names, args.out or VARIANTS_OUT, VARIANTS_NAIVE))
    if len(jobs) == 2 and args.out:
        raise SystemExit("cca_baselines: --out names one file; run the suite and the variants apart")
    return jobs


def run_job(kind: str, names: list[str], out: Path, naive_file: str, args: argparse.Namespace) -> None:
    """Computes (unless --table-only) and writes the entries, then prints the table."""
    known = nb.known_sets(kind)
    naive = json.loads(Path(naive_file).read_text()) if Path(naive_file).is_file() else {}
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    for name in names:
        if not args.table_only:
            data = nb.load_known_set(kind, name, args.data_dir, args.seed)
            with threadpool_limits(limits=1):
                entry = cca_baselines(data.views, data.labels, data.n_classes)
            if kind == "variants":
                entry["seed"] = args.seed
            results[name] = entry
            nb.write_entries(out, results, known)
        if name in results:
            print(table_line(name, results[name], naive.get(name)), flush=True)
    if not args.table_only:
        print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    nb.add_set_arguments(parser, data_dir_required=True)
    parser.add_argument("--out", default=None, help=f"default {SUITE_OUT} or {VARIANTS_OUT}")
    parser.add_argument("--table-only", action="store_true", help="print the table from --out, compute nothing")
    args = parser.parse_args()
    jobs = targets(args)
    if not jobs:
        raise SystemExit("cca_baselines: name --datasets and/or --variants")
    for kind, names, out, naive_file in jobs:
        run_job(kind, names, Path(out), naive_file, args)


if __name__ == "__main__":
    main()
