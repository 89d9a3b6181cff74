"""The default estimator under contamination, over several seeds: what a user who fits
``SpecRaGE(n_clusters=k)`` without a preset gets when a share of the samples has a corrupted view.

    PYTHONPATH=. python experiments/robustness_default.py --dataset bdgp --data-dir DATA \
        --fraction 0.4 --outlier-view 0 --seeds 0 1 2

For every seed: a clean fit, a fit with ``--fraction`` of the samples' view ``--outlier-view``
replaced by global anomalies (specrage_jax.data.contamination.inject_outliers; without
``--outlier-view`` every view, each with its own samples, as the paper's blobs figure), and a fit
with ``--fraction`` of the samples noised in one random view (inject_noise, N(0, (1.2 std_j)^2)).
The whole data set is contaminated before the split, the seed fixes split, contamination and fit;
each fit is on the 80 % training rows (weight_histogram.default_estimator_on_split). Scored on the
test rows: ACC of ``predict`` (the clusters a user gets) and of k-means on the test embedding (the
paper's protocol); relative loss = 100 (clean - contaminated) / clean per seed, then mean and std;
the test rows' view weights per group (weight_histogram.weight_summary: clean rows, rows with that
view contaminated, ...).

Writes experiments/results/robustness_default_<dataset>.json (every run, the summary) and a PNG
beside it: per contamination, per view, the weight histograms of clean and contaminated test rows
pooled over the seeds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import cluster_scores, kmeans_metrics
from specrage_jax.runs.plots import save_figure, view_label
from specrage_jax.runs.records import write_json_atomic
from specrage_jax.runs.robustness import CLEAN, KINDS, ContaminationSpec, contaminate, relative_degradation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsuite import cpu_model
from weight_histogram import BINS, default_estimator_on_split, fmt, inside_clean_data, weight_summary

RESULTS = Path(__file__).resolve().parent / "results"


def one_run(data: Any, kind: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One fit of the default estimator on ``data`` contaminated by ``kind``: scores and weights."""
    spec = ContaminationSpec(outlier_view=args.outlier_view)
    contaminated, full_mask = contaminate(data, kind, args.fraction, seed=seed, spec=spec)
    start = time.perf_counter()
    estimator, test = default_estimator_on_split(contaminated, list(args.overrides), seed=seed)
    seconds = time.perf_counter() - start
    test_views = [np.asarray(v)[test] for v in contaminated.views]
    labels = data.labels[test]
    mask = full_mask[test]
    inside = np.stack(
        [inside_clean_data(np.asarray(x), ~full_mask[:, v], test) for v, x in enumerate(contaminated.views)],
        axis=1,
    )
    return {
        "kind": kind,
        "seed": seed,
        "predict": cluster_scores(labels, estimator.predict(test_views)),
        "kmeans_on_test": kmeans_metrics(estimator.transform(test_views), labels, n_clusters=data.n_classes, seed=seed),
        "fit_seconds": seconds,
        "n_neighbors": estimator.config_.graph.n_neighbors,
        "n_components": estimator.config_.model.n_components,
        "views": weight_summary(np.asarray(estimator.view_weights(test_views)), mask, inside & mask),
    }


def summarize(runs: list[dict[str, Any]], kinds: list[str]) -> dict[str, Any]:
    """Per contamination: the relative ACC loss of both protocols (mean, std, per seed) against the
    same seed's clean run, and every view's clean / contaminated mean weight over the seeds."""
    clean = {r["seed"]: r for r in runs if r["kind"] == CLEAN}
    summary: dict[str, Any] = {}
    for kind in kinds:
        rows = [r for r in runs if r["kind"] == kind]
        entry: dict[str, Any] = {"n_seeds": len(rows)}
        for protocol in ("predict", "kmeans_on_test"):
            accs = [r[protocol]["acc"] for r in rows]
            entry[protocol] = {"acc_mean": float(np.mean(accs)), "acc_std": float(np.std(accs))}
            if kind != CLEAN and all(r["seed"] in clean for r in rows):
                losses = [relative_degradation(clean[r["seed"]][protocol]["acc"], r[protocol]["acc"]) for r in rows]
                entry[protocol].update(
                    loss_percent_mean=float(np.mean(losses)), loss_percent_std=float(np.std(losses)), per_seed=losses
                )
        entry["weights"] = [
            {
                group: float(np.mean([r["views"][v][group]["mean"] for r in rows if r["views"][v][group]["n"]]))
                for group in ("clean", "contaminated")
                if any(r["views"][v][group]["n"] for r in rows)
            }
            for v in range(len(rows[0]["views"]))
        ]
        summary[kind] = entry
    return summary


def plot(result: dict[str, Any], path: Path, view_names: tuple[str, ...]) -> None:
    """Rows: outliers, noise; columns: views; clean (blue) and contaminated (red) test rows'
    weight histograms pooled over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in result["kinds"] if k != CLEAN]
    n_views = len(result["runs"][0]["views"])
    fig, axes = plt.subplots(len(kinds), n_views, figsize=(4.6 * n_views, 3.2 * len(kinds)), squeeze=False)
    for row, kind in enumerate(kinds):
        runs = [r for r in result["runs"] if r["kind"] == kind]
        loss = result["summary"][kind]["predict"].get("loss_percent_mean", float("nan"))
        for v in range(n_views):
            ax = axes[row][v]
            for group, colour in (("clean", "tab:blue"), ("contaminated", "tab:red")):
                counts = np.sum([r["views"][v][group]["histogram"] for r in runs], axis=0).astype(float)
                if counts.sum():
                    mean = result["summary"][kind]["weights"][v][group]
                    ax.stairs(
                        counts / counts.sum(), BINS, fill=True, alpha=0.55, color=colour, label=f"{group} ({mean:.2f})"
                    )
            ax.set(xlabel=f"weight of {view_label(view_names, v)}", ylabel="fraction of test rows", xlim=(0, 1))
            ax.set_title(f"{kind}: ACC loss {loss:.1f} %", fontsize=9)
            ax.legend(fontsize=8)
    fig.suptitle(
        f"{result['dataset']}: default estimator, {int(100 * result['fraction'])} % contaminated, "
        f"seeds {', '.join(str(s) for s in result['seeds'])}",
        fontsize=10,
    )
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bdgp")
    parser.add_argument("--data-dir", default=None, help="where real datasets live (default: $SPECRAGE_DATA)")
    parser.add_argument("--fraction", type=float, default=0.4, help="share of samples contaminated")
    parser.add_argument("--outlier-view", type=int, default=None, help="the outliers' view (default: every view)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kinds", nargs="+", default=[CLEAN, *KINDS], choices=[CLEAN, *KINDS])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None, help="JSON path (default results/robustness_default_<dataset>.json)")
    args = parser.parse_args(argv)
    kinds = list(dict.fromkeys([CLEAN, *args.kinds]))  # the losses need the clean run
    runs = []
    for seed in args.seeds:
        data = load_dataset(args.dataset, seed=seed, data_dir=args.data_dir)
        for kind in kinds:
            run = one_run(data, kind, args, seed)
            runs.append(run)
            weights = " ".join(
                f"view {v['view']} clean {fmt(v['clean']['mean'])} contaminated {fmt(v['contaminated']['mean'])}"
                for v in run["views"]
            )
            print(
                f"seed {seed} {kind:8s} predict ACC {run['predict']['acc']:.3f}  k-means on test "
                f"{run['kmeans_on_test']['acc']:.3f}  {weights}  fit {run['fit_seconds']:.0f} s",
                flush=True,
            )
    result = {
        "dataset": args.dataset,
        "fraction": args.fraction,
        "outlier_view": args.outlier_view,
        "seeds": args.seeds,
        "kinds": kinds,
        "overrides": args.overrides,
        "cpu": cpu_model(),
        "runs": runs,
        "summary": summarize(runs, kinds),
    }
    out = Path(args.out) if args.out else RESULTS / f"robustness_default_{args.dataset}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out, result)
    plot(result, out.with_suffix(".png"), data.view_names)
    for kind, entry in result["summary"].items():
        losses = {p: entry[p].get("loss_percent_mean") for p in ("predict", "kmeans_on_test")}
        print(
            f"{kind}: " + ", ".join(f"{p} loss {v:.1f} %" for p, v in losses.items() if v is not None), entry["weights"]
        )
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
