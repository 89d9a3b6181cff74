"""mvlearn's multi-view clusterers as baselines for a multi-view set, beside the naive and CCA ones.

mvlearn (0.5.0) is the multi-view library users compare with; its four clusterers run on the
naive baselines' preprocessed views (``naive_baselines.preprocess_view``, each prep ``std`` and
``l2``, the sparse views' TruncatedSVD with ``random_state`` 0), with k = the number of classes:

* ``spectral/rbf``, ``spectral/knn``: ``MultiviewSpectralClustering`` (co-trained spectral
  clustering), its default RBF affinity or a 10-NN affinity;
* ``coreg/rbf``, ``coreg/knn``: ``MultiviewCoRegSpectralClustering`` (co-regularized spectral
  clustering), the same two affinities;
* ``kmeans``, ``sphkmeans``: ``MultiviewKMeans`` and ``MultiviewSphericalKMeans`` (co-EM k-means),
  which take exactly two views: only on two-view sets.

Each setting runs once, ``random_state`` 0 (mvlearn's k-means keeps the best of 10 starts; a
rerun reproduced the committed numbers on two variants): one co-trained fit of 1,600 rows takes
a minute here (mvlearn inverts and multiplies dense n x n matrices). ACC, NMI and ARI are kept in
the naive baselines' JSON layout, plus ``mvlearn_best``: the setting with the highest ACC, chosen
with the labels (an optimistic bar, as the CCA one is; None where every setting failed).

mvlearn is not a dependency of the library. Install it for this script alone, into a folder of
its own: ``pip install --no-deps --target MVLEARN mvlearn==0.5.0``, then run with
``PYTHONPATH=.:MVLEARN``. Its wheel also installs a top-level ``tests`` package that would shadow
this project's tests in the project's environment. Its package ``__init__`` imports its plotting
module (seaborn, and a matplotlib pin at or below 3.3.4 that Python 3.11 cannot build); the
clusterers need only NumPy, SciPy, scikit-learn and joblib, so :func:`mvlearn_clusterers` imports
``mvlearn.cluster`` without running that ``__init__``. Sets of more than MAX_ROWS rows are left
out, and a setting that raises (an ARPACK call that does not converge) is recorded under
``failed``; a rerun computes only the sets its results file lacks (``--recompute``: all).

    PYTHONPATH=.:MVLEARN python experiments/mvlearn_baselines.py --data-dir DATA --datasets all
    PYTHONPATH=.:MVLEARN python experiments/mvlearn_baselines.py --data-dir DATA --variants all
    PYTHONPATH=. python experiments/mvlearn_baselines.py --variants all --table-only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import types
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import naive_baselines as nb

MAX_ROWS = 1700  # dense n x n algebra: one co-trained fit of 1,600 rows takes 59 s here, one of 3,312 ran 30 min
SEEDS = (0,)  # mvlearn's k-means keeps the best of 10 starts
AFFINITY_NEIGHBORS = 10  # the naive graph's l
SUITE_OUT = "experiments/results/devsuite_mvlearn_baselines.json"
VARIANTS_OUT = "experiments/results/devsuite_variants_mvlearn_baselines.json"
DEFAULTS_SUITE = "experiments/results/devsuite.json"
DEFAULTS_VARIANTS = "experiments/results/devsuite_variants.json"

Clusterer = Callable[[int, int], Any]  # (k, seed) -> an unfitted mvlearn clusterer


def mvlearn_clusterers() -> types.ModuleType:
    """``mvlearn.cluster``, imported without the package ``__init__`` (which pulls in plotting)."""
    if "mvlearn" not in sys.modules:
        spec = importlib.util.find_spec("mvlearn")
        if spec is None or spec.submodule_search_locations is None:
            raise SystemExit(
                "mvlearn_baselines: mvlearn is not on the path "
                "(pip install --no-deps --target MVLEARN mvlearn==0.5.0; PYTHONPATH=.:MVLEARN)"
            )
        package = types.ModuleType("mvlearn")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["mvlearn"] = package
    import mvlearn.cluster

    return mvlearn.cluster


def settings(n_views: int) -> dict[str, Clusterer]:
    """{setting name: (k, seed) -> clusterer} for a set of ``n_views`` views."""
    cluster = mvlearn_clusterers()
    knn = {"affinity": "nearest_neighbors", "n_neighbors": AFFINITY_NEIGHBORS}
    chosen: dict[str, Clusterer] = {
        "spectral/rbf": lambda k, s: cluster.MultiviewSpectralClustering(n_clusters=k, random_state=s),
        "spectral/knn": lambda k, s: cluster.MultiviewSpectralClustering(n_clusters=k, random_state=s, **knn),
        "coreg/rbf": lambda k, s: cluster.MultiviewCoRegSpectralClustering(n_clusters=k, random_state=s),
        "coreg/knn": lambda k, s: cluster.MultiviewCoRegSpectralClustering(n_clusters=k, random_state=s, **knn),
    }
    if n_views == 2:
        chosen["kmeans"] = lambda k, s: cluster.MultiviewKMeans(n_clusters=k, random_state=s)
        chosen["sphkmeans"] = lambda k, s: cluster.MultiviewSphericalKMeans(n_clusters=k, random_state=s)
    return chosen


def best_setting(baselines: dict[str, Any]) -> dict[str, Any] | None:
    """{name, ACC, NMI} of the setting with the highest mean ACC; None when every setting failed."""
    if not baselines:
        return None
    name, numbers = nb.best_baseline({"baselines": baselines})
    return {"name": name, "ACC": numbers["ACC"], "NMI": numbers["NMI"]}


def setting_runs(
    make: Clusterer, prepared: list[np.ndarray], labels: np.ndarray, k: int, seeds: Sequence[int]
) -> list[dict[str, Any]] | str:
    """The per-seed scores of one setting, or the error that stopped it (mvlearn's ARPACK calls
    may not converge on a near-constant RBF affinity)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mvlearn's convergence and deprecation notices
            return [
                nb.partition_scores(labels, np.asarray(make(k, seed).fit_predict(prepared)), seed) for seed in seeds
            ]
    except (ArithmeticError, ValueError, RuntimeError, np.linalg.LinAlgError) as error:
        return f"{type(error).__name__}: {str(error)[:120]}"


def mvlearn_baselines(views: Sequence[Any], labels: np.ndarray, k: int, seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """{n, k, dims, baselines: {setting/prep: summary}, failed: {setting/prep: error},
    mvlearn_best} for ``views`` (n, d_v), each setting run with every ``random_state`` of ``seeds``."""
    labels = np.asarray(labels)
    baselines: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for prep in nb.PREPS:
        prepared = [nb.preprocess_view(view, prep, svd_seed=0) for view in views]
        for name, make in settings(len(prepared)).items():
            start = time.perf_counter()
            runs = setting_runs(make, prepared, labels, k, seeds)
            if isinstance(runs, str):
                failed[f"{name}/{prep}"] = runs
            else:
                baselines[f"{name}/{prep}"] = nb.summarize(runs, time.perf_counter() - start)
            print(f"  {name}/{prep}: {runs if isinstance(runs, str) else round(runs[0]['ACC'], 3)}", flush=True)
    return {
        "n": int(labels.shape[0]),
        "k": int(k),
        "dims": [int(v.shape[1]) for v in views],
        "baselines": baselines,
        "failed": failed,
        "mvlearn_best": best_setting(baselines),
    }


# --- command line --------------------------------------------------------------------------------


def defaults_acc(results_file: str) -> dict[str, float]:
    """{dataset: the default estimator's ACC} from a devsuite results file (empty if absent)."""
    path = Path(results_file)
    if not path.is_file():
        return {}
    return {name: float(entry["ACC"]) for name, entry in json.loads(path.read_text())["results"].items()}


def table_row(name: str, entry: dict[str, Any], defaults: float | None) -> str:
    """A markdown row: dataset, n, the defaults' ACC, the best mvlearn setting, their ratio."""
    best = entry["mvlearn_best"]
    ours = f"{defaults:.3f}" if defaults is not None else "-"
    ratio = f"{defaults / best['ACC']:.2f}" if defaults is not None and best["ACC"] > 0 else "-"
    return f"| {name} | {entry['n']} | {ours} | {best['ACC']:.3f} ({best['name']}) | {ratio} |"


def summary_line(names: Sequence[str], results: dict[str, Any], ours: dict[str, float]) -> str:
    """How often the defaults reach mvlearn's best, and the lowest ratio."""
    ratios = {
        name: ours[name] / results[name]["mvlearn_best"]["ACC"]
        for name in names
        if results.get(name, {}).get("mvlearn_best") and name in ours and results[name]["mvlearn_best"]["ACC"] > 0
    }
    if not ratios:
        return "No default results to compare."
    lowest = min(ratios, key=lambda name: ratios[name])
    at_or_above = sum(ours[name] >= results[name]["mvlearn_best"]["ACC"] for name in ratios)
    settings_run = sorted({setting for name in ratios for setting in results[name]["baselines"]})
    each = {
        setting: [ours[name] >= results[name]["baselines"][setting]["ACC"] for name in ratios]
        for setting in settings_run
        if all(setting in results[name]["baselines"] for name in ratios)  # the two-view k-means: not everywhere
    }
    alone = [sum(wins) for wins in each.values()]
    against_each = (
        f" Against each of the {len(each)} settings run on every set alone: {min(alone)} to {max(alone)}."
        if each
        else ""
    )
    return (
        f"The defaults at or above mvlearn's best on {at_or_above} of {len(ratios)}; "
        f"ratio mean {np.mean(list(ratios.values())):.2f}, lowest {ratios[lowest]:.2f} ({lowest}).{against_each}"
    )


def markdown_table(names: Sequence[str], results: dict[str, Any], ours: dict[str, float], defaults_file: str) -> str:
    """The comparison table (markdown) with its source files and summary line."""
    rows = [
        table_row(name, results[name], ours.get(name)) for name in names if results.get(name, {}).get("mvlearn_best")
    ]
    missing = [name for name in names if not results.get(name, {}).get("mvlearn_best")]
    left_out = ""
    if missing:
        reason = f"sets over {MAX_ROWS} rows are left out; where every setting failed, see `failed` in the JSON"
        left_out = f"Not in the results: {', '.join(missing)} ({reason})."
    return "\n".join(
        [
            f"The default estimator's ACC (`{defaults_file}`) against the best of mvlearn 0.5.0's clusterer "
            "settings (chosen with the labels; `experiments/mvlearn_baselines.py`).",
            "",
            "| dataset | n | defaults ACC | mvlearn best | defaults / mvlearn |",
            "|---|---|---|---|---|",
            *rows,
            "",
            summary_line(names, results, ours),
            *([left_out] if left_out else []),
            "",
        ]
    )


def run_job(kind: str, names: list[str], out: Path, args: argparse.Namespace) -> None:
    """Computes (unless --table-only) and writes the entries, then writes and prints the table."""
    known = nb.known_sets(kind)
    defaults_file = DEFAULTS_SUITE if kind == "suite" else DEFAULTS_VARIANTS
    ours = defaults_acc(defaults_file)
    results: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    for name in names:
        if args.table_only or (name in results and not args.recompute):
            continue
        data = nb.load_known_set(kind, name, args.data_dir, args.seed)
        if data.labels.shape[0] > MAX_ROWS:
            print(f"{name}: {data.labels.shape[0]} rows, over {MAX_ROWS}: left out", flush=True)
            continue
        entry = mvlearn_baselines(data.views, data.labels, data.n_classes)
        if kind == "variants":
            entry["seed"] = args.seed
        results[name] = entry
        nb.write_entries(out, results, known)
        print(table_row(name, entry, ours.get(name)), flush=True)
    table = markdown_table(known, results, ours, defaults_file)
    out.with_suffix(".md").write_text(table)
    print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    nb.add_set_arguments(parser, data_dir_required=False)
    parser.add_argument("--table-only", action="store_true", help="print the tables from the results files")
    parser.add_argument("--recompute", action="store_true", help="rerun the sets the results files already hold")
    args = parser.parse_args()
    if not args.table_only and args.data_dir is None:
        raise SystemExit("mvlearn_baselines: --data-dir is required unless --table-only")
    jobs = nb.chosen_sets(args)
    if not jobs:
        raise SystemExit("mvlearn_baselines: name --datasets and/or --variants")
    for kind, names in jobs:
        run_job(kind, names, Path(SUITE_OUT if kind == "suite" else VARIANTS_OUT), args)


if __name__ == "__main__":
    main()
