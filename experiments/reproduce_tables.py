"""Reproduce the paper's Tables 1 and 2 under the honest protocol, with its two extra baselines.

    PYTHONPATH=. python experiments/reproduce_tables.py --datasets handwritten bdgp --seeds 10 \
        --data-dir DATA

Per dataset and seed: the dataset's preset (specrage_jax.presets.preset), a stratified 80/20 split
(then 90/10 for validation), preprocessing fitted on train, the pre-training stages the preset
enables, SpecRaGE, then on the TEST split: k-means ACC/NMI/ARI of the embedding; a linear SVM
trained on the train embedding and scored on the test embedding; "SE on L-bar" (exact bottom-k
eigenvectors of the summed Laplacian of the same affinities on the test split, ARPACK for large
n) and the concatenated Siamese codes + k-means. Writes experiments/results/<dataset>.json
(per-seed metrics) and regenerates experiments/results/tables.md from every such file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from specrage_jax.data import load_dataset
from specrage_jax.data.preprocess import unit_rows
from specrage_jax.evaluation.clusters import nearest_centre
from specrage_jax.evaluation.metrics import clustering_accuracy, kmeans_clusters, kmeans_metrics, summarize_seeds
from specrage_jax.nets.embed import embed
from specrage_jax.ops.spectral import mean_laplacian_eigenvectors
from specrage_jax.overrides import config_to_dict
from specrage_jax.runs.evaluate import evaluate_state
from specrage_jax.runs.experiment import train_on_splits
from specrage_jax.runs.prepare import prepare_splits, preset_config, pretrain, resolve_run_defaults
from specrage_jax.runs.records import environment_info

RESULTS = Path(__file__).resolve().parent / "results"

# The paper's Tables 1, 2 and its "additional baselines" table (percent; mean, std where given).
PAPER: dict[str, dict[str, dict[str, tuple[float, float | None]]]] = {
    "bdgp": {
        "kmeans": {"acc": (97.6, 0.53), "nmi": (93.4, 0.83), "ari": (94.1, 1.29)},
        "svm": {"acc": (99.01, 0.30), "f1": (99.00, 0.23), "precision": (99.01, 0.20)},
        "siamese_concat_kmeans": {"acc": (88.20, None), "nmi": (75.42, None), "ari": (72.21, None)},
        "se_on_lbar": {"acc": (95.81, None), "nmi": (91.54, None), "ari": (91.79, None)},
    },
    "handwritten": {
        "kmeans": {"acc": (91.9, 3.51), "nmi": (86.5, 1.74), "ari": (83.0, 1.98)},
        "svm": {"acc": (97.80, 1.27), "f1": (97.77, 1.27), "precision": (97.80, 1.26)},
        "siamese_concat_kmeans": {"acc": (87.60, None), "nmi": (82.31, None), "ari": (78.89, None)},
        "se_on_lbar": {"acc": (88.91, None), "nmi": (84.30, None), "ari": (80.92, None)},
    },
    "infinitemnist": {
        "kmeans": {"acc": (99.1, 0.27), "nmi": (97.5, 0.54), "ari": (97.9, 0.21)},
        "svm": {"acc": (99.35, 0.04), "f1": (99.34, 0.04), "precision": (99.35, 0.04)},
        "siamese_concat_kmeans": {"acc": (82.41, None), "nmi": (85.28, None), "ari": (78.62, None)},
        "se_on_lbar": {"acc": (98.13, None), "nmi": (96.75, None), "ari": (97.23, None)},
    },
}
PAPER["noisymnist"] = PAPER["infinitemnist"]  # same view construction; the paper reports InfiniteMNIST


def run_seed(dataset: str, overrides: list[str], seed: int, data_dir: str | None) -> dict[str, Any]:
    """One seed of one dataset: train, evaluate, baselines. Metrics are fractions."""
    data = load_dataset(dataset, seed=seed, data_dir=data_dir)
    config = preset_config(dataset, data.n_classes, overrides)
    splits = prepare_splits(data, config, seed=seed)
    config, _ = resolve_run_defaults(config, splits, data.n_classes, seed=seed)  # the data-aware settings
    start = time.perf_counter()
    splits, codes, stages = pretrain(splits, config, seed=seed)
    state, history = train_on_splits(splits, config, seed=seed, codes=codes)
    train_seconds = time.perf_counter() - start
    test = evaluate_state(state, splits, config, seed=seed).metrics
    y_val, _ = embed(state, splits.val)
    k = data.n_classes  # k-means clusters and the exact SE's directions: the classes, whatever n_components is
    graph_inputs = splits.test if codes is None else codes.test
    _, eigvecs = mean_laplacian_eigenvectors(graph_inputs, k, config.graph)
    baselines = {"se_on_lbar": kmeans_metrics(eigvecs, splits.test_labels, n_clusters=k, seed=seed)}
    if codes is not None:
        baselines["siamese_concat_kmeans"] = kmeans_metrics(
            np.concatenate(codes.test, axis=1), splits.test_labels, n_clusters=k, seed=seed
        )
    return {
        "seed": seed,
        "clustering_variants": clustering_variants(state, splits, k, seed=seed),
        "test": {"kmeans": test["kmeans"], "svm": test["svm"]},
        "baselines": baselines,
        "val_kmeans": kmeans_metrics(y_val, splits.val_labels, n_clusters=k, seed=seed),
        "mean_view_weights": test["mean_view_weights"],
        "orthogonality_error": test["orthogonality_error"],
        "timing": {"train_seconds": train_seconds, **stages},
        "steps": history.steps,
        "config": config_to_dict(config),
    }


def clustering_variants(state: Any, splits: Any, k: int, *, seed: int) -> dict[str, dict[str, float]]:
    """k-means ACC of the validation and test embeddings under several ways of clustering them:
    fitted on the split's own rows ("self") or on the training rows with each row assigned to
    its nearest centre ("train"); raw rows or rows scaled to unit norm; 10 or 100 restarts.
    For choosing the clustering protocol on the validation split: {name: {"val", "test"}}."""
    raw = {name: embed(state, getattr(splits, name), rows="raw")[0] for name in ("train", "val", "test")}
    unit = {name: unit_rows(y) for name, y in raw.items()}
    labels = {"val": splits.val_labels, "test": splits.test_labels}
    out: dict[str, dict[str, float]] = {}
    for rows_name, rows in (("raw", raw), ("unit", unit)):
        for n_init in (10, 100):
            out[f"self_{rows_name}_n{n_init}"] = {
                split: clustering_accuracy(
                    labels[split], kmeans_clusters(rows[split], n_clusters=k, seed=seed, n_init=n_init)[0]
                )
                for split in ("val", "test")
            }
        _, centres = kmeans_clusters(rows["train"], n_clusters=k, seed=seed, n_init=10)
        out[f"train_{rows_name}_n10"] = {
            split: clustering_accuracy(labels[split], nearest_centre(rows[split], centres)) for split in ("val", "test")
        }
    return out


def payload_label(payload: dict[str, Any]) -> str:
    """How a results file names its run: its label and overrides ("preset" without either)."""
    name = payload.get("label") or "ours: the preset"
    if payload.get("description"):
        name = f"{name}: {payload['description']}"
    if payload.get("label"):  # a variant may differ from the preset in seed count and machine
        name = f"{name} ({seeds_by_backend(payload)})"
    overrides = payload.get("overrides") or []
    return f"{name}; run with {', '.join(f'`{o}`' for o in overrides)}" if overrides else name


def seeds_by_backend(payload: dict[str, Any]) -> str:
    """How many seeds ran on which backend, e.g. "2 seeds on gpu and 8 on cpu": a seed's own
    ``environment`` where it records one (runs continued on another machine), else the file's."""
    default = payload.get("environment", {}).get("backend", "cpu")
    counts: dict[str, int] = {}
    for seed in payload.get("seeds", []):
        backend = seed.get("environment", {}).get("backend", default)
        counts[backend] = counts.get(backend, 0) + 1
    if not counts:
        return f"0 seeds on {default}"
    noun = "seed" if sum(counts.values()) == 1 else "seeds"
    parts = [f"{n} {noun + ' ' if i == 0 else ''}on {backend}" for i, (backend, n) in enumerate(counts.items())]
    return " and ".join(parts)


def fmt(mean: float, std: float | None) -> str:
    return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def markdown_tables(results: dict[str, dict[str, Any]], variants: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """One table per dataset: ours (mean ± std over seeds, percent) beside the paper's; each
    labelled variant run of that dataset (``--label``: e.g. the view weights left free) as one
    more column, named by its label."""
    variants = variants or {}
    lines = [
        "# SpecRaGE (specrage_jax) vs the paper",
        "",
        "Test split, honest protocol (see experiments/reproduce_tables.py). Percent, mean ± std over seeds.",
        "",
    ]
    rows = [
        ("kmeans", "acc", "k-means ACC"),
        ("kmeans", "nmi", "k-means NMI"),
        ("kmeans", "ari", "k-means ARI"),
        ("svm", "acc", "SVM accuracy"),
        ("svm", "f1", "SVM F-score"),
        ("svm", "precision", "SVM precision"),
    ]
    for dataset, payload in sorted(results.items()):
        seeds = payload["seeds"]
        ours = summarize_seeds([s["test"] for s in seeds])
        base = summarize_seeds([s["baselines"] for s in seeds])
        paper = PAPER.get(dataset, {})
        seconds = np.mean([s["timing"]["train_seconds"] for s in seeds])
        extra = variants.get(dataset, [])
        extra_ours = [summarize_seeds([s["test"] for s in v["seeds"]]) for v in extra]
        extra_base = [summarize_seeds([s["baselines"] for s in v["seeds"]]) for v in extra]
        lines += [f"## {dataset} ({len(seeds)} seeds, mean train time {seconds:.0f} s)", ""]
        lines += [f"{payload_label(payload)}."] + [f"Variant: {payload_label(v)}." for v in extra] + [""]
        header = ["metric", "ours", *(v["label"] for v in extra), "paper"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

        def cell(summary: dict[str, Any], group: str, name: str) -> str:
            mine = summary.get(group, {}).get(name)
            return fmt(100 * mine["mean"], 100 * mine["std"]) if mine else "—"

        for group, name, label in rows:
            ref = paper.get(group, {}).get(name)
            cells = [cell(ours, group, name), *(cell(o, group, name) for o in extra_ours)]
            lines.append(f"| {label} | {' | '.join(cells)} | {fmt(*ref) if ref else '—'} |")
        runs = [payload, *extra]
        centred = [training_centres_acc(r) for r in runs]
        lines += [
            f"| k-means ACC, worst seed | {' | '.join(worst_seed(paper_protocol_acc(r)) for r in runs)} | — |",
            f"| k-means ACC, training centres | {' | '.join(mean_std(a) for a in centred)} | — |",
            f"| k-means ACC, training centres, worst seed | {' | '.join(worst_seed(a) for a in centred)} | — |",
        ]
        for group, label in (("se_on_lbar", "SE on L̄"), ("siamese_concat_kmeans", "Siamese concat + k-means")):
            if group in base:
                ref = paper.get(group, {}).get("acc")
                cells = [cell(base, group, "acc"), *(cell(b, group, "acc") for b in extra_base)]
                lines.append(f"| {label} ACC | {' | '.join(cells)} | {fmt(*ref) if ref else '—'} |")
        lines.append("")
    return "\n".join(lines)


def paper_protocol_acc(payload: dict[str, Any]) -> list[float]:
    """Per-seed test k-means ACC of the paper's protocol (k-means fitted on the test embedding)."""
    return [s["test"]["kmeans"]["acc"] for s in payload["seeds"]]


def training_centres_acc(payload: dict[str, Any]) -> list[float] | None:
    """Per-seed test ACC with the k-means centres fitted on the training embedding and each test
    row given its nearest centre (what ``SpecRaGE.predict`` and the CLI do), on the rows the run
    clustered (its ``model.output_rows``: unit, else raw as ``embed`` takes auto); None for files
    recorded before the variants were."""
    accs = []
    for s in payload["seeds"]:
        rows = "unit" if s.get("config", {}).get("model", {}).get("output_rows") == "unit" else "raw"
        variant = s.get("clustering_variants", {}).get(f"train_{rows}_n10")
        if variant is None:
            return None
        accs.append(variant["test"])
    return accs


def mean_std(accs: list[float] | None) -> str:
    return "—" if accs is None else fmt(100 * float(np.mean(accs)), 100 * float(np.std(accs)))


def worst_seed(accs: list[float] | None) -> str:
    return "—" if accs is None else f"{100 * min(accs):.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument(
        "--label",
        default=None,
        help="a variant run (e.g. 'weighting active'): written to <dataset>_<label>.json and shown "
        "as one more column beside the preset's",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for dataset in args.datasets:
        seeds = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            result = {**run_seed(dataset, args.overrides, seed, args.data_dir), "environment": environment_info()}
            seeds.append(result)
            print(
                f"{dataset} seed {seed}: test ACC {result['test']['kmeans']['acc']:.4f} "
                f"NMI {result['test']['kmeans']['nmi']:.4f} SVM {result['test']['svm']['acc']:.4f} "
                f"SE-on-Lbar {result['baselines']['se_on_lbar']['acc']:.4f} "
                f"({result['timing']['train_seconds']:.0f} s)",
                flush=True,
            )
            # after every seed, so an interrupted run keeps what it finished (atomic replace)
            payload = {
                "dataset": dataset,
                "label": args.label,
                "overrides": args.overrides,
                "environment": environment_info(),
                "seeds": seeds,
            }
            stem = dataset if args.label is None else f"{dataset}_{variant_suffix(args.label)}"
            tmp = out / f"{stem}.json.tmp"
            tmp.write_text(json.dumps(payload, indent=1))
            tmp.replace(out / f"{stem}.json")
    results, variants = load_results(out)
    (out / "tables.md").write_text(markdown_tables(results, variants))
    print(markdown_tables(results, variants))
    return 0


def variant_suffix(label: str) -> str:
    """A label as a file-name suffix: 'weighting active' -> 'weighting_active'."""
    return "".join(c if c.isalnum() else "_" for c in label.strip().lower())


def load_results(folder: Path) -> tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(the presets' results by dataset, the labelled variant runs by dataset) in ``folder``."""
    results: dict[str, dict[str, Any]] = {}
    variants: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.stem in PAPER:
            results[path.stem] = json.loads(path.read_text())
        elif path.stem.split("_")[0] in PAPER:
            payload = json.loads(path.read_text())
            if payload.get("label") and path.stem == f"{payload['dataset']}_{variant_suffix(payload['label'])}":
                variants.setdefault(payload["dataset"], []).append(payload)
    return results, variants


if __name__ == "__main__":
    sys.exit(main())
