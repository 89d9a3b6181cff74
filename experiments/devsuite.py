"""The default estimator on data nobody tuned for: the development suite and the paper's datasets.

What a new user does: ``SpecRaGE(n_clusters=k, random_state=seed)`` with nothing
else set, then k-means (n_init 10) with seeds 0-4 on the embedding. Two protocols:

* development suite (``DATA/devsuite/*.mat``, naive baselines in ``DATA/devsuite/baselines.json``):
  fit and transform on all rows, as the baselines do;
* Handwritten (views 0 and 2), BDGP and digits: the honest protocol: the CLI's seeded stratified
  80/20 split, fit on the training part (train + validation rows), k-means on the test embedding;
* stress variants of the suite (``experiments/devsuite_variants.py``: few samples per class, many
  classes, hubs and duplicates in text, class imbalance with a narrow view; naive baselines from
  ``experiments/naive_baselines.py`` in ``--variants-baselines``): all rows, as the suite. A variant
  is built with the seed its baselines were computed with (their ``seed``).

Writes ``OUT.json`` (every number, the resolved settings) and ``OUT.md`` (the table the README
shows). One dataset at a time; ``--set`` passes ``config_overrides`` to every fit. ``--missing P``
first removes views of a seeded fraction P of all samples (``remove_views_at_random``: each keeps
at least one), so that fit and transform see incomplete data.

    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA
    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA --datasets WebKB digits
    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA --missing 0.5 --out /tmp/devsuite_p05
    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA --variants all
    PYTHONPATH=. python experiments/devsuite.py --data-dir DATA --datasets WebKB+hubs mnistpairs40x10

Variants only (no suite or paper dataset named): the default ``--out`` is
``experiments/results/devsuite_variants``, so the suite's own table is not overwritten.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from threadpoolctl import threadpool_limits

from specrage_jax import SpecRaGE
from specrage_jax.data import MultiViewData, load_dataset, split_indices
from specrage_jax.data.incomplete import remove_views_at_random
from specrage_jax.data.loaders import load_mat
from specrage_jax.evaluation.metrics import clustering_accuracy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devsuite_variants import VARIANTS, build_variant

PAPER_DATASETS = {"handwritten": 0.93, "bdgp": 0.95, "digits": 0.97}  # name -> the test ACC the defaults must reach
KMEANS_SEEDS = range(5)
DEFAULT_OUT = "experiments/results/devsuite"
VARIANTS_OUT = "experiments/results/devsuite_variants"
VARIANTS_BASELINES = "experiments/results/devsuite_variants_baselines.json"
CCA_BASELINES = (
    "experiments/results/devsuite_cca_baselines.json",
    "experiments/results/devsuite_variants_cca_baselines.json",
)


def kmeans_scores(embedding: np.ndarray, labels: np.ndarray, k: int) -> dict[str, Any]:
    """ACC / NMI / ARI of k-means (n_init 10) with seeds 0-4 on an embedding: means, stds, per seed."""
    per_seed = []
    with threadpool_limits(limits=1, user_api="openmp"):
        for seed in KMEANS_SEEDS:
            predicted = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(embedding)
            per_seed.append(
                {
                    "seed": seed,
                    "ACC": clustering_accuracy(labels, predicted),
                    "NMI": float(normalized_mutual_info_score(labels, predicted)),
                    "ARI": float(adjusted_rand_score(labels, predicted)),
                }
            )
    summary: dict[str, Any] = {}
    for key in ("ACC", "NMI", "ARI"):
        values = [row[key] for row in per_seed]
        summary[key], summary[f"{key}_std"] = float(np.mean(values)), float(np.std(values))
    summary["per_seed"] = per_seed
    return summary


def release_compiled_programs() -> None:
    """Drop JAX's compiled programs. XLA:CPU keeps each one in memory maps of its own for the life
    of the process, so a script that fits set after set reaches vm.max_map_count (a run over every
    variant segfaulted in its 37th set; a rule check stopped after 20-24 runs with "LLVM: cannot
    allocate memory"), as the test suite did. Costs a recompile where the next fit has the same shapes."""
    jax.clear_caches()
    gc.collect()


def fit_default(views: Sequence[np.ndarray], k: int, seed: int, overrides: Sequence[str]) -> tuple[SpecRaGE, float]:
    """The default estimator fitted on ``views``; (estimator, fit seconds)."""
    estimator = SpecRaGE(n_clusters=k, random_state=seed, config_overrides=list(overrides))
    start = time.perf_counter()
    estimator.fit(list(views))
    return estimator, time.perf_counter() - start


def with_missing_views(data: MultiViewData, fraction: float, seed: int) -> MultiViewData:
    """``data`` with the views of a seeded ``fraction`` of its samples removed (NaN rows); 0: as is."""
    if fraction == 0.0:
        return data
    return data.with_views(remove_views_at_random(data.views, fraction, seed=seed)[0])


def run_devsuite_dataset(
    data: MultiViewData, baselines: dict[str, Any], seed: int, overrides: Sequence[str], missing: float = 0.0
) -> dict[str, Any]:
    """Fit and transform on all rows of one development-suite set (or a variant of one); scores
    beside its best baseline (``baselines``: its entry of ``baselines.json``)."""
    data = with_missing_views(data, missing, seed)
    k = data.n_classes
    estimator, seconds = fit_default(data.views, k, seed, overrides)
    scores = kmeans_scores(estimator.transform(list(data.views)), data.labels, k)
    best_name, best = max(baselines["baselines"].items(), key=lambda item: item[1]["ACC"])
    return {
        "protocol": "all rows",
        "n": len(data.labels),
        "k": k,
        "view_dims": list(data.view_dims),
        "fit_seconds": seconds,
        **scores,
        "baseline": {"name": best_name, "ACC": best["ACC"], "NMI": best["NMI"]},
        "ratio": scores["ACC"] / best["ACC"],
        "resolved": estimator.resolved_defaults_,
        "health": estimator.health_.as_dict(),
    }


def run_paper_dataset(data: MultiViewData, seed: int, overrides: Sequence[str]) -> dict[str, Any]:
    """The honest protocol: fit on the CLI's training part (train + validation rows), score the test split."""
    idx = split_indices(data.labels, seed=seed)
    fit_rows = np.sort(np.concatenate([idx.train, idx.val]))
    k = data.n_classes
    estimator, seconds = fit_default([v[fit_rows] for v in data.views], k, seed, overrides)
    scores = kmeans_scores(estimator.transform([v[idx.test] for v in data.views]), data.labels[idx.test], k)
    return {
        "protocol": "test split",
        "n": len(data.labels),
        "n_fit": len(fit_rows),
        "n_test": len(idx.test),
        "k": k,
        "view_dims": list(data.view_dims),
        "fit_seconds": seconds,
        **scores,
        "target_ACC": PAPER_DATASETS[data.name.lower()] if data.name.lower() in PAPER_DATASETS else None,
        "resolved": estimator.resolved_defaults_,
        "health": estimator.health_.as_dict(),
    }


def load_paper_dataset(name: str, data_dir: str, seed: int) -> MultiViewData:
    if name == "handwritten":
        return load_mat(Path(data_dir) / "handwritten.mat", views=(0, 2))
    return load_dataset(name, seed=seed, data_dir=data_dir)


def variants_summary(results: dict[str, dict[str, Any]]) -> str | None:
    """One line over the variants' results: the mean and the minimum of ACC / bar, and how many reach
    their bar; None when there is no variant."""
    ratios = {name: r["ratio"] for name, r in results.items() if r.get("variant")}
    if not ratios:
        return None
    worst = min(ratios, key=ratios.__getitem__)
    met = sum(ratio >= 1.0 for ratio in ratios.values())
    return (
        f"Variants: ACC / bar mean {np.mean(list(ratios.values())):.2f}, minimum {ratios[worst]:.2f} ({worst}); "
        f"{met} of {len(ratios)} at or above their bar."
    )


def cca_baselines() -> dict[str, Any]:
    """The best linear CCA setting per dataset (experiments/cca_baselines.py's files), by name."""
    found: dict[str, Any] = {}
    for path in CCA_BASELINES:
        if Path(path).exists():
            found.update(json.loads(Path(path).read_text()))
    return found


def markdown_table(
    results: dict[str, dict[str, Any]], cpu: str, seed: int = 0, cca: dict[str, Any] | None = None
) -> str:
    """The README's table: ACC / NMI, fit seconds, the bar and the best linear CCA (``cca``,
    :func:`cca_baselines`) beside each, and the resolved settings; a summary line below it when
    variants ran. ``seed``: the fits' random_state."""
    cca = cca or {}
    lines = [
        f"Default estimator, seed {seed}, k-means seeds 0-4 (n_init 10); fit seconds on {cpu}.",
        "",
        "| dataset | protocol | n | ACC | NMI | fit s | bar (ACC) | ACC / bar | CCA best | l | preprocessing |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if "baseline" in r:
            bar = f"{r['baseline']['ACC']:.3f} ({r['baseline']['name']})"
            ratio = f"{r['ratio']:.2f}"
        else:
            bar = f"{r['target_ACC']:.2f} (target)" if r.get("target_ACC") else "-"
            ratio = f"{r['ACC'] / r['target_ACC']:.2f}" if r.get("target_ACC") else "-"
        resolved = r["resolved"]
        l = resolved.get("graph.n_neighbors", {}).get("value", "-")
        prep = ", ".join(resolved.get("data.preprocess", {}).get("value", ["-"]))
        best = cca.get(name, {}).get("cca_best")
        linear = "-" if best is None else f"{best['ACC']:.3f} ({best['name']})"
        lines.append(
            f"| {name} | {r['protocol']} | {r['n']} | {r['ACC']:.3f} | {r['NMI']:.3f} | {r['fit_seconds']:.0f} "
            f"| {bar} | {ratio} | {linear} | {l} | {prep} |"
        )
    summary = variants_summary(results)
    if summary is not None:
        lines += ["", summary]
    return "\n".join(lines) + "\n"


def cpu_model() -> str:
    """The CPU's model name with its family and model numbers ("AMD EPYC (family 25, model 1)"):
    the name alone does not tell one EPYC generation from another, and their rounding differs."""
    try:
        fields = dict(
            (key.strip(), value.strip())
            for key, _, value in (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines())
            if value
        )
    except OSError:
        fields = {}
    if "model name" not in fields:
        return platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        return f"{fields['model name']} (family {fields['cpu family']}, model {fields['model']})"
    return fields["model name"]


def run_variant(
    name: str, data_dir: str, entry: dict[str, Any], seed: int, overrides: Sequence[str], missing: float = 0.0
) -> dict[str, Any]:
    """A stress variant, all rows, against the best of its naive baselines (``entry``: its entry of
    the variants' baselines JSON); the variant is built with the seed its baselines used."""
    variant_seed = int(entry.get("seed", 0))
    data = build_variant(name, data_dir, seed=variant_seed)
    if data.n_samples != entry["n"] or list(data.view_dims) != entry["dims"]:
        raise SystemExit(
            f"devsuite: variant {name!r} has n {data.n_samples}, dims {list(data.view_dims)}; its baselines were "
            f"computed on n {entry['n']}, dims {entry['dims']}: recompute them (experiments/naive_baselines.py)"
        )
    return {
        "variant": True,
        "variant_seed": variant_seed,
        **run_devsuite_dataset(data, entry, seed, overrides, missing),
    }


def select_names(
    datasets: Sequence[str] | None, variants: Sequence[str] | None, baselines: dict[str, Any]
) -> list[str]:
    """The names to run: ``datasets`` (suite, paper or variant names) then ``variants`` (names, or
    "all"); neither: the suite and the paper datasets."""
    names = list(datasets or [])
    if variants is not None:
        names += list(VARIANTS) if not variants or list(variants) == ["all"] else list(variants)
    if datasets is None and variants is None:
        names = [*baselines, *PAPER_DATASETS]
    return list(dict.fromkeys(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="holds devsuite/, handwritten.mat, BDGP.mat, mnist/")
    parser.add_argument(
        "--datasets", nargs="*", default=None, help="names to run: suite, paper or variant names (default: all)"
    )
    parser.add_argument(
        "--variants", nargs="*", default=None, help="variant names to run, or 'all' (experiments/devsuite_variants.py)"
    )
    parser.add_argument(
        "--variants-baselines",
        default=VARIANTS_BASELINES,
        help="the variants' naive baselines (experiments/naive_baselines.py --variants)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--out", default=None, help=f"writes OUT.json and OUT.md (default {DEFAULT_OUT}; variants only: {VARIANTS_OUT})"
    )
    parser.add_argument("--missing", type=float, default=0.0, help="fraction of samples that lose views (seeded)")
    args = parser.parse_args()
    suite_dir = Path(args.data_dir) / "devsuite"
    baselines = json.loads((suite_dir / "baselines.json").read_text()) if suite_dir.is_dir() else {}
    names = select_names(args.datasets, args.variants, baselines)
    known = [*baselines, *PAPER_DATASETS, *VARIANTS]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"devsuite: unknown datasets {unknown}; known: {', '.join(known)}")
    variant_names = [name for name in names if name in VARIANTS and name not in baselines]
    variant_baselines: dict[str, Any] = {}
    if variant_names:
        path = Path(args.variants_baselines)
        variant_baselines = json.loads(path.read_text()) if path.is_file() else {}
        lacking = [name for name in variant_names if name not in variant_baselines]
        if lacking:
            raise SystemExit(
                f"devsuite: no baselines for {lacking} in {path}; compute them with "
                f"experiments/naive_baselines.py --data-dir {args.data_dir} --variants {' '.join(lacking)} --out {path}"
            )
    out = Path(args.out or (VARIANTS_OUT if len(variant_names) == len(names) else DEFAULT_OUT))
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in baselines:
            data = load_mat(suite_dir / f"{name}.mat")
            results[name] = run_devsuite_dataset(data, baselines[name], args.seed, args.overrides, args.missing)
        elif name in PAPER_DATASETS:
            data = with_missing_views(load_paper_dataset(name, args.data_dir, args.seed), args.missing, args.seed)
            results[name] = run_paper_dataset(data, args.seed, args.overrides)
        else:
            results[name] = run_variant(
                name, args.data_dir, variant_baselines[name], args.seed, args.overrides, args.missing
            )
        release_compiled_programs()
        r = results[name]
        bar = r["baseline"]["ACC"] if "baseline" in r else r.get("target_ACC")
        print(
            f"{name:18s} ACC {r['ACC']:.3f} NMI {r['NMI']:.3f} bar {bar} fit {r['fit_seconds']:.1f} s  "
            f"l={r['resolved'].get('graph.n_neighbors', {}).get('value')}",
            flush=True,
        )
    cpu = cpu_model()
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"seed": args.seed, "overrides": args.overrides, "missing": args.missing, "cpu": cpu, "results": results}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=1))
    out.with_suffix(".md").write_text(markdown_table(results, cpu, args.seed, cca_baselines()))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
