"""Training on incomplete data: test k-means ACC/NMI when a fraction p of the samples miss views,
against three baselines.

    PYTHONPATH=. python experiments/incomplete.py --datasets handwritten bdgp --data-dir DATA
    PYTHONPATH=. python experiments/incomplete.py --datasets bdgp --fractions 0.5 --seeds 0 1 2 --resume

Protocol, per dataset and seed: the dataset's preset and its stratified 80/20 then 90/10 split
(the same seed, so the same rows, for every method and every p); a seeded fraction p of *all*
samples (training, validation and test alike) loses views at random
(:func:`specrage_jax.data.incomplete.remove_views_at_random`: between 1 and V - 1 views per chosen
sample, so each keeps one). Then, on the same incomplete data:

* ``specrage``: the library's training on incomplete data (each view's scaler, pre-training and
  kNN graphs on the samples that have it; a sample's fusion over its present views);
* ``complete_only``: the same, trained and validated on the samples that have every view (what a
  user must do when the method refuses incomplete samples); the test split is the same;
* ``mean_impute``: every missing row replaced by its view's mean over the training rows that have
  it (test rows too), then the complete-data pipeline;
* ``se_present_pairs``: the exact spectral embedding of the test split: bottom-k eigenvectors of
  sum_v L^(v) with each view's kNN graph among the test rows that have it (transductive; the
  preset's graph settings and graph inputs), then k-means.

``complete`` is the preset on the complete data (p = 0), the reference of the 3-point rule.
k-means: the preset's evaluation (n_init, seeded), on unit rows where the preset says so or, with
``model.output_rows`` left at auto, wherever views are missing, for every method of the cell alike.

Writes experiments/results/incomplete_<dataset>.json (after every run) and
incomplete_<dataset>.png (test ACC against p, mean over the seeds; with a dotted line for the
supervised reference of ``experiments/incomplete_ceiling.py`` where its JSON is there).
``--plot-only`` redraws the figures from the JSON files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from specrage_jax.config import AUTO, ExperimentConfig
from specrage_jax.data import MultiViewData, load_dataset, split_indices
from specrage_jax.data.incomplete import mean_impute, remove_views_at_random
from specrage_jax.data.preprocess import unit_rows
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.ops.spectral import present_pairs_laplacian_eigenvectors
from specrage_jax.runs.evaluate import evaluate_state
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.prepare import (
    PreparedSplits,
    SplitCodes,
    prepare_splits,
    preset_config,
    pretrain,
    resolve_run_defaults,
)
from specrage_jax.runs.records import environment_info
from specrage_jax.training.defaults import auto_output_rows
from specrage_jax.validation import present_views

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("specrage", "complete_only", "mean_impute", "se_present_pairs")


class SplitGraph(NamedTuple):
    """What the exact-SE baseline reads: the test split's graph inputs (V arrays (n_test, d_v)),
    its labels (n_test,) and the resolved configuration (graph settings, rows)."""

    inputs: tuple[np.ndarray, ...]
    labels: np.ndarray
    config: ExperimentConfig


def _test_graph(splits: PreparedSplits, codes: SplitCodes | None, config: ExperimentConfig) -> SplitGraph:
    return SplitGraph(splits.test if codes is None else codes.test, splits.test_labels, config)


def train_specrage(
    data: MultiViewData, config: ExperimentConfig, *, seed: int, fit_rows: np.ndarray | None = None
) -> tuple[dict[str, Any], SplitGraph]:
    """Split (training and validation restricted to ``fit_rows`` when given), preprocess,
    pre-train, train and score on the test split: (the scores, the test split's graph)."""
    start = time.perf_counter()
    splits = prepare_splits(data, config, seed=seed, fit_rows=fit_rows)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=seed)
    splits, codes, _ = pretrain(splits, config, seed=seed)
    state, history = train_on_splits(splits, config, seed=seed, codes=codes)
    metrics = evaluate_state(state, splits, config, seed=seed).metrics
    result = {
        **{key: metrics["kmeans"][key] for key in ("acc", "nmi", "ari")},
        "svm_acc": metrics["svm"]["acc"],
        **({"kmeans_by_views": metrics["kmeans_by_views"]} if "kmeans_by_views" in metrics else {}),
        "mean_view_weights": metrics["mean_view_weights"],
        "n_train": len(splits.train_labels),
        "batch_size": config.train.batch_size,
        "steps": history.steps,
        "seconds": time.perf_counter() - start,
    }
    return result, _test_graph(splits, codes, config)


def preset_test_graph(data: MultiViewData, config: ExperimentConfig, *, seed: int) -> SplitGraph:
    """The test split's graph as the preset builds it: its own Siamese codes or the preprocessed
    views, never the joint Siamese nets that training on incomplete data may add
    (``siamese.positives`` own), so the baseline is the data's graph and not one learned by the
    method it is compared with."""
    own = dataclasses.replace(config, siamese=dataclasses.replace(config.siamese, positives="own"))
    splits = prepare_splits(data, own, seed=seed)
    own, _ = resolve_run_defaults(own, splits, data.n_classes, seed=seed)
    splits, codes, _ = pretrain(splits, own, seed=seed)
    return _test_graph(splits, codes, own)


def spectral_baseline(
    graph_inputs: tuple[np.ndarray, ...], labels: np.ndarray, config: ExperimentConfig, *, seed: int
) -> dict[str, Any]:
    """Exact SE of the test split's present-pairs graph, k-means on its (unit) rows as the preset clusters."""
    start = time.perf_counter()
    present = present_views(graph_inputs)
    k = int(labels.max()) + 1  # the classes, whatever n_components is
    _, vectors = present_pairs_laplacian_eigenvectors(graph_inputs, present, k, config.graph)
    if config.model.output_rows == "unit":
        vectors = unit_rows(vectors)
    metrics = kmeans_metrics(vectors, labels, n_clusters=k, seed=seed, n_init=config.eval.kmeans_n_init)
    return {**{key: metrics[key] for key in ("acc", "nmi", "ari")}, "seconds": time.perf_counter() - start}


def same_rows_for_every_method(config: ExperimentConfig, present: np.ndarray) -> ExperimentConfig:
    """``model.output_rows`` auto resolved from the incomplete dataset itself, for every method of a
    cell: the baselines train on complete or imputed rows (where auto reads raw) yet embed the same
    test samples, so all of them are clustered on the same kind of rows as SpecRaGE."""
    if config.model.output_rows != AUTO:
        return config
    rows = auto_output_rows(not present.all())
    return dataclasses.replace(config, model=dataclasses.replace(config.model, output_rows=rows))


def run_cell(
    data: MultiViewData,
    config: ExperimentConfig,
    fraction: float,
    *,
    seed: int,
    methods: tuple[str, ...] = METHODS,
    earlier: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``methods`` at one fraction p and seed; the other methods' results are kept from
    ``earlier`` (the same cell of an earlier run), if any."""
    views, present = remove_views_at_random(data.views, fraction, seed=seed)
    incomplete = data.with_views(views)
    config = same_rows_for_every_method(config, present)
    results: dict[str, Any] = {m: earlier[m] for m in METHODS if earlier and m in earlier and m not in methods}
    ours = None
    if "specrage" in methods:
        results["specrage"], ours = train_specrage(incomplete, config, seed=seed)
    if "se_present_pairs" in methods:
        # the run's own graph where it learned no joint nets; otherwise the preset's, built again
        graph = (
            ours
            if ours is not None and ours.config.siamese.positives == "own"
            else preset_test_graph(incomplete, config, seed=seed)
        )
        results["se_present_pairs"] = spectral_baseline(graph.inputs, graph.labels, graph.config, seed=seed)
    if "complete_only" in methods:
        results["complete_only"] = train_specrage(
            incomplete, config, seed=seed, fit_rows=np.asarray(present.all(axis=1))
        )[0]
    if "mean_impute" in methods:
        split = split_indices(
            data.labels, seed=seed, test_fraction=config.data.test_fraction, val_fraction=config.data.val_fraction
        )
        imputed = data.with_views(mean_impute(views, split.train))
        results["mean_impute"] = train_specrage(imputed, config, seed=seed)[0]
    results["fraction_missing_per_view"] = (1.0 - present.mean(axis=0)).tolist()
    results["complete_samples"] = float(present.all(axis=1).mean())
    return results


def summarize(runs: list[dict[str, Any]], fractions: list[float]) -> dict[str, Any]:
    """Mean/std of test ACC and NMI per method and fraction; the complete-data reference."""
    complete = [r["specrage"]["acc"] for r in runs if r["fraction"] == 0.0]
    summary: dict[str, Any] = {"complete_acc_mean": float(np.mean(complete)) if complete else None, "methods": {}}
    for method in METHODS:
        rows = []
        for p in fractions:
            cell = [r[method] for r in runs if r["fraction"] == p and method in r]
            if cell:
                acc, nmi = [c["acc"] for c in cell], [c["nmi"] for c in cell]
                rows.append(
                    {
                        "fraction": p,
                        "acc_mean": float(np.mean(acc)),
                        "acc_std": float(np.std(acc)),
                        "nmi_mean": float(np.mean(nmi)),
                        "n_seeds": len(cell),
                    }
                )
        summary["methods"][method] = rows
    return summary


def recorded_fractions(runs: list[dict[str, Any]]) -> list[float]:
    """Every p > 0 with a run in the file (a resumed file keeps the fractions of earlier calls)."""
    return sorted({r["fraction"] for r in runs} - {0.0})


def supervised_reference(results: Path, dataset: str) -> dict[str, float] | None:
    """Mean test ACC by p of ``experiments/incomplete_ceiling.py`` (labels used), if it was run."""
    path = results / f"incomplete_{dataset}_supervised.json"
    if not path.exists():
        return None
    return {float(p): acc for p, acc in json.loads(path.read_text())["acc_mean_by_fraction"].items()}


def plot(path: Path, dataset: str, summary: dict[str, Any], supervised: dict[str, float] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    labels = {
        "specrage": "SpecRaGE, incomplete data",
        "complete_only": "complete samples only",
        "mean_impute": "mean imputation",
        "se_present_pairs": "exact SE, present pairs (test)",
    }
    for method, rows in summary["methods"].items():
        if rows:
            ax.errorbar(
                [r["fraction"] for r in rows],
                [r["acc_mean"] for r in rows],
                yerr=[r["acc_std"] for r in rows],
                marker="o",
                capsize=3,
                label=labels[method],
            )
    if summary["complete_acc_mean"] is not None:
        ax.axhline(summary["complete_acc_mean"], color="gray", ls="--", lw=1, label="complete data")
    if supervised:
        fractions = sorted(supervised)
        ax.plot(fractions, [supervised[p] for p in fractions], color="black", ls=":", lw=1, label="RBF SVM with labels")
    ax.set(xlabel="fraction of samples missing views (p)", ylabel="test k-means ACC", title=dataset, xlim=(0.0, 0.8))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_results(path: Path, dataset: str, overrides: list[str], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Writes the runs and their summary (atomic replace); returns the summary."""
    summary = summarize(runs, recorded_fractions(runs))
    payload = {
        "dataset": dataset,
        "protocol": __doc__,
        "overrides": overrides,
        "environment": environment_info(),
        "runs": runs,
        "summary": summary,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1))
    tmp.replace(path)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["handwritten", "bdgp"])
    parser.add_argument("--fractions", nargs="+", type=float, default=[0.1, 0.3, 0.5, 0.7])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--resume", action="store_true", help="keep the (fraction, seed) runs already in the file")
    parser.add_argument(
        "--plot-only", action="store_true", help="redraw the figures from the JSON files; train nothing"
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=None,
        help="methods to run (default: all); with --resume a recorded cell (p > 0) reruns the methods "
        "named here and keeps the others, and is skipped when none are named",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets:
        path = out / f"incomplete_{dataset}.json"
        if args.plot_only:
            plot(
                path.with_suffix(".png"),
                dataset,
                json.loads(path.read_text())["summary"],
                supervised_reference(out, dataset),
            )
            print(f"wrote {path.with_suffix('.png')}")
            continue
        runs: list[dict[str, Any]] = json.loads(path.read_text())["runs"] if args.resume and path.exists() else []
        data = load_dataset(dataset, seed=0, data_dir=args.data_dir)
        config = preset_config(dataset, data.n_classes, args.overrides)
        fractions = sorted({0.0, *args.fractions})
        methods = tuple(args.methods or METHODS)
        for seed in args.seeds:
            for p in fractions:
                earlier = next((r for r in runs if r["fraction"] == p and r["seed"] == seed), None)
                if earlier is not None and (p == 0.0 or args.methods is None):
                    continue  # recorded; --methods reruns those methods of a recorded cell (p > 0)
                if p == 0.0:
                    cell = {"specrage": train_specrage(data, config, seed=seed)[0]}
                else:
                    cell = run_cell(data, config, p, seed=seed, methods=methods, earlier=earlier)
                runs = [r for r in runs if r is not earlier]
                runs.append({"fraction": p, "seed": seed, **cell})
                shown = ", ".join(f"{m} {cell[m]['acc']:.4f}" for m in METHODS if m in cell)
                print(f"{dataset} p={p:.1f} seed {seed}: test ACC {shown}", flush=True)
                write_results(path, dataset, args.overrides, runs)  # after every run: a killed run keeps them
        summary = write_results(path, dataset, args.overrides, runs)
        plot(path.with_suffix(".png"), dataset, summary, supervised_reference(out, dataset))
        print(f"wrote {path} and {path.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
