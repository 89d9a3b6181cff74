"""Renderers of the generated results blocks on the paper's datasets: ``paper_results`` (test k-means
ACC beside the paper's numbers, read from the ``PAPER`` literal of experiments/reproduce_tables.py,
parsed, not imported), ``robustness_bdgp`` (the loss of ACC under contamination, per fusion),
``infinitemnist_headline`` and ``infinitemnist_curve`` (the cost of the whole pipeline against n)
and ``one_view_rows`` (ACC with rows given with one view only). Each ``render_<name>`` takes the
block's parsed JSON files keyed by file stem and returns Markdown. Standard library only."""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

EXPERIMENTS = Path(__file__).resolve().parent
sys.path.insert(0, str(EXPERIMENTS))
from readme_format import Payloads, fmt3, markdown_table, mean, mean_pm_std, signed3

REPRODUCE_SCRIPT = EXPERIMENTS / "reproduce_tables.py"
ROBUSTNESS_SEEDS = "robustness_seeds/robustness_bdgp"  # the robustness curves on the current BDGP preset
KINDS = ("outliers", "noise")  # the contamination kinds of a curve file, in table order


# ---------------------------------------------------------------------------------------------
# the paper's numbers (from experiments/reproduce_tables.py, parsed)

PAPER_ALIASES = {"noisymnist": "infinitemnist"}  # reproduce_tables: the paper reports InfiniteMNIST


def paper_reference(script: Path = REPRODUCE_SCRIPT) -> dict[str, Any]:
    """The ``PAPER = {...}`` literal of reproduce_tables.py (percent; (mean, std or None))."""
    tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if [getattr(t, "id", None) for t in targets] == ["PAPER"] and getattr(node, "value", None) is not None:
            return dict(ast.literal_eval(node.value))  # type: ignore[attr-defined]
    raise ValueError(f"{script}: no literal PAPER = {{...}} assignment to read the paper's numbers from")


def paper_kmeans_acc(dataset: str, paper: Mapping[str, Any]) -> tuple[float, float | None] | None:
    """The paper's k-means ACC for a dataset as a fraction (mean, std), or None."""
    entry = paper.get(PAPER_ALIASES.get(dataset, dataset), {}).get("kmeans", {}).get("acc")
    if entry is None:
        return None
    value, std = entry
    return value / 100, None if std is None else std / 100


# ---------------------------------------------------------------------------------------------
# block: paper_results (the "Results so far" table)

DATASET_LABELS = {
    "handwritten": "Handwritten",
    "bdgp": "BDGP",
    "noisymnist": "NoisyMNIST",
    "infinitemnist": "InfiniteMNIST",
}
MULTI_SEED_SOURCES = ("handwritten", "bdgp", "noisymnist")  # experiments/reproduce_tables.py
SINGLE_RUN_SOURCES = ("digits_seed0_metrics", "blobs_seed0_metrics")  # `specrage train` metrics.json


def multi_seed_row(payload: Mapping[str, Any], paper: Mapping[str, Any]) -> list[str]:
    """One row from a reproduce_tables.py JSON: ACC mean ± std (NMI), the paper, the gap, mean time."""
    dataset = payload["dataset"]
    seeds = payload["seeds"]
    acc = [s["test"]["kmeans"]["acc"] for s in seeds]
    nmi = [s["test"]["kmeans"]["nmi"] for s in seeds]
    seconds = mean([s["timing"]["train_seconds"] for s in seeds])
    label = f"{DATASET_LABELS.get(dataset, dataset)}, {len(seeds)} seeds"
    if payload.get("overrides"):
        label += f" (preset + {len(payload['overrides'])} `--set` overrides)"
    ref = paper_kmeans_acc(dataset, paper)
    gap = "—" if ref is None else signed3(mean(acc) - ref[0])
    backend = payload.get("environment", {}).get("backend", "?").upper()
    return [
        label,
        f"{mean_pm_std(acc)} (NMI {fmt3(mean(nmi))})",
        paper_cell(dataset, ref),
        gap,
        f"{seconds:.0f} s per seed (mean), {backend}",
    ]


def paper_cell(dataset: str, ref: tuple[float, float | None] | None) -> str:
    """'0.976 ± 0.005', '0.991 ± 0.003 (InfiniteMNIST)' when the paper reports a sibling dataset, '—' without."""
    if ref is None:
        return "—"
    text = fmt3(ref[0]) if ref[1] is None else f"{fmt3(ref[0])} ± {fmt3(ref[1])}"
    alias = PAPER_ALIASES.get(dataset)
    return f"{text} ({DATASET_LABELS.get(alias, alias)})" if alias else text


def single_run_row(payload: Mapping[str, Any]) -> list[str]:
    """One row from a `specrage train` metrics.json (one seed)."""
    dataset = payload["dataset"]
    kmeans = payload["test"]["kmeans"]
    backend = payload.get("environment", {}).get("backend", "?").upper()
    return [
        f"{DATASET_LABELS.get(dataset, dataset)}, seed {payload['seed']}",
        f"{fmt3(kmeans['acc'])} (NMI {fmt3(kmeans['nmi'])})",
        "—",
        "—",
        f"{payload['timing']['train_seconds']:.0f} s, {backend}",
    ]


def render_paper_results(payloads: Payloads, paper: Mapping[str, Any] | None = None) -> str:
    """Test k-means ACC of the paper's datasets (10-seed runs) and the synthetic ones, beside the paper."""
    paper = paper_reference() if paper is None else paper
    rows = [multi_seed_row(payloads[name], paper) for name in MULTI_SEED_SOURCES]
    rows += [single_run_row(payloads[name]) for name in SINGLE_RUN_SOURCES]
    header = ["dataset", "k-means ACC (ours)", "paper", "ours − paper", "training time"]
    return "\n".join(markdown_table(header, rows)) + "\n"


# ---------------------------------------------------------------------------------------------
# block: robustness_bdgp (relative ACC loss at the largest contamination, per fusion)

FUSION_LABELS = {
    "weighting-eq4": "weighting, Eq. 4",
    "weighting": "weighting, α in the fusion only",
    "average": "average",
    "concat": "concatenation",
    "linear": "linear",
    "attention": "attention",
    "alignment": "alignment baseline (MvSCN-style)",
}
FUSION_NOTES = {"weighting-eq4": " (the paper's method)"}


def method_temperature(overrides: Sequence[str]) -> str | None:
    """The value of the last ``model.temperature=`` override, if any."""
    values = [o.split("=", 1)[1] for o in overrides if o.startswith("model.temperature=")]
    return values[-1] if values else None


def fusion_label(name: str, spec: Mapping[str, Any]) -> str:
    """A method's row label, with its temperature when the method is a weighting net."""
    label = FUSION_LABELS.get(name, name)
    temperature = method_temperature(spec.get("overrides", []))
    if name.startswith("weighting") and temperature:
        label += f", T {temperature}"
    return label + FUSION_NOTES.get(name, "")


def degradation_at(curve: Mapping[str, Any], fraction: float, *, spread: bool = True) -> str:
    """The relative ACC loss (%) of a curve at ``fraction``, 1 decimal, '± std' over its seeds
    where there are several (and ``spread``); '—' when not measured."""
    at = {f: i for i, f in enumerate(curve["fractions"])}
    if fraction not in at or curve["degradation_mean"][at[fraction]] is None:
        return "—"
    i = at[fraction]
    mean, seeds = curve["degradation_mean"][i], curve.get("n_seeds", [1] * len(at))[i]
    return f"{mean:.1f} ± {curve['degradation_std'][i]:.1f}" if spread and seeds > 1 else f"{mean:.1f}"


def clean_view_weights(payload: Mapping[str, Any], method: str) -> str:
    """Mean view weights of a method's clean run ('0.06 / 0.94'), '—' without any."""
    for run in payload.get("runs", []):
        if run["method"] == method and run["kind"] == "clean" and run.get("mean_view_weights"):
            return " / ".join(f"{w:.2f}" for w in run["mean_view_weights"])
    return "—"


def robustness_rows(payload: Mapping[str, Any], methods: Sequence[str], fraction: float) -> list[list[str]]:
    """One row per method of a fusion_comparison / robustness_curves JSON."""
    rows = []
    for method in methods:
        outliers, noise = payload["curves"]["outliers"][method], payload["curves"]["noise"][method]
        rows.append(
            [
                fusion_label(method, payload["methods"][method]),
                fmt3(outliers["clean_acc_mean"]),
                degradation_at(outliers, fraction),
                degradation_at(noise, fraction),
                clean_view_weights(payload, method),
            ]
        )
    return rows


def seeds_label(payload: Mapping[str, Any]) -> str:
    """'seed 0' or 'seeds 0, 1, 2' for a curve file."""
    seeds = payload["seeds"]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(str(s) for s in seeds)}"


def grid_cell(curve: Mapping[str, Any], fraction: float, n_seeds: int) -> str:
    """:func:`degradation_at` without the spread, naming how many of the ``n_seeds`` it averages
    where that is fewer (a job cut short)."""
    cell = degradation_at(curve, fraction, spread=False)
    counts = dict(zip(curve["fractions"], curve.get("n_seeds", [])))
    found = counts.get(fraction, n_seeds)
    return cell if cell == "—" or found >= n_seeds else f"{cell} ({found} of {n_seeds} seeds)"


def grid_rows(payload: Mapping[str, Any], methods: Sequence[str]) -> list[list[str]]:
    """One row per method: its mean relative ACC loss (%) at every fraction, outliers then noise."""
    fractions = sorted(payload["fractions"])
    n_seeds = len(payload["seeds"])
    return [
        [
            fusion_label(method, payload["methods"][method]),
            *(grid_cell(payload["curves"][kind][method], f, n_seeds) for kind in KINDS for f in fractions),
        ]
        for method in methods
    ]


def render_robustness_bdgp(payloads: Payloads) -> str:
    """Each fusion (fusion_bdgp.json) and the alignment baseline (robustness_seeds/robustness_bdgp.json)
    at the largest contamination, mean ± std over the seeds, then every fusion at every level."""
    fusion, robustness = payloads["fusion_bdgp"], payloads[ROBUSTNESS_SEEDS]
    fraction = max(fusion["fractions"])
    view = fusion["contamination"]["outlier_view"]
    dataset = DATASET_LABELS.get(fusion["dataset"], fusion["dataset"])
    caption = (
        f"Relative loss of test k-means ACC in % at {100 * fraction:.0f} % contamination, {dataset}, "
        f"{seeds_label(fusion)}, mean ± std (`experiments/fusion_comparison.py`; the alignment baseline "
        f"from `experiments/robustness_curves.py`, {seeds_label(robustness)}):"
    )
    header = ["fusion", "clean ACC", f"outliers in view {view}", "noise in one random view", "view weights, clean run"]
    rows = robustness_rows(fusion, list(fusion["methods"]), fraction)
    rows += robustness_rows(
        robustness, [m for m in robustness["methods"] if robustness["methods"][m].get("alignment")], fraction
    )
    levels = [f"{100 * f:.0f} %" for f in sorted(fusion["fractions"])]
    grid_caption = f"Every level, mean over {seeds_label(fusion)}:"
    grid_header = ["fusion", *(f"{kind} {level}" for kind in KINDS for level in levels)]
    grid = markdown_table(grid_header, grid_rows(fusion, list(fusion["methods"])))
    return "\n".join([caption, "", *markdown_table(header, rows), "", grid_caption, "", *grid]) + "\n"


# ---------------------------------------------------------------------------------------------
# blocks: infinitemnist_headline (README) and infinitemnist_curve (docs/03)

STAGE_LABELS = {
    "data": "data",
    "autoencoders": "autoencoders",
    "siamese": "Siamese",
    "specrage": "SpecRaGE",
    "evaluation": "evaluation",
}


def curve_runs(payloads: Payloads) -> list[dict[str, Any]]:
    """The CPU runs of the InfiniteMNIST curve that record their stage times, by n."""
    runs = payloads["infinitemnist_curve"]["runs"]
    return sorted((r for r in runs if r["device_kind"] == "cpu" and "stage_seconds" in r), key=lambda r: r["n"])


def render_infinitemnist_headline(payloads: Payloads) -> str:
    """One sentence: the largest CPU run of the curve, its wall time, ACC and peak memory."""
    run = curve_runs(payloads)[-1]
    return (
        f"InfiniteMNIST at **{run['n']:,} samples**, the whole pipeline (generating the samples, autoencoders, "
        f"Siamese nets, SpecRaGE, evaluation) in one command on 2 CPU cores, {run['cpu_model']}: "
        f"**{run['wall_seconds'] / 60:.0f} minutes**, test k-means ACC **{run['kmeans_acc']:.3f}** "
        f"(NMI {run['kmeans_nmi']:.3f}; the paper: 0.991 ± 0.003), peak host memory "
        f"{run['peak_host_bytes'] / 2**30:.1f} GiB ([the curve](docs/03-reproducing-the-paper.md#infinitemnist))."
    )


def render_infinitemnist_curve(payloads: Payloads) -> str:
    """The cost curve: per n, wall and stage seconds, SpecRaGE steps, ACC, SVM, peak host memory."""
    runs = curve_runs(payloads)
    stages = list(runs[0]["stage_seconds"])
    header = ["n", "wall s", *(f"{STAGE_LABELS.get(s, s)} s" for s in stages), "SpecRaGE steps"]
    header += ["test k-means ACC", "SVM", "peak host GiB"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in runs:
        cells = [f"{r['n']:,}", f"{r['wall_seconds']:.0f}", *(f"{r['stage_seconds'][s]:.0f}" for s in stages)]
        cells += [f"{r['specrage_steps']:,}", f"{r['kmeans_acc']:.4f}", f"{r['svm_acc']:.4f}"]
        cells.append(f"{r['peak_host_bytes'] / 2**30:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    cpus = sorted({r["cpu_model"] for r in runs})
    sampled = [r for r in runs if r.get("eval_rows")]
    notes = [
        "",
        f"Seed 0, 2 CPU cores, {', '.join(cpus)}, one `specrage train --dataset infinitemnist:N` per row, "
        "wall time from the process's start (generating the samples included) to its exit. k-means runs on "
        "every test row (20 % of n).",
    ]
    if sampled:
        rows = sampled[0]["eval_rows"]["svm_train_rows"]
        notes[-1] += f" At n {sampled[0]['n']:,} and above the SVM trains on {rows:,} seeded training rows."
    notes += ["", f"Rerun a row: `{runs[-1]['command']}`."]
    return "\n".join(lines + notes)


# block: one_view_rows (docs/02)

VIEW_NAMES = {"handwritten": ("pixels", "profile correlations"), "bdgp": ("visual", "text")}


def render_one_view_rows(payloads: Payloads) -> str:
    """Per dataset and view: k-means ACC with 30 % / every row given with that view only, its
    own-graph ceiling, and unseen rows, through the single-view nets and through the view nets'
    parts of the fused sum (the same fits otherwise)."""
    nets, parts = payloads["one_view_rows"], payloads["one_view_rows_fusion_parts"]
    header = ["data", "view", "complete rows", "30 % one view", "every row one view", "view's own ceiling"]
    header += ["unseen rows, one view", "complete unseen rows"]
    rows = []
    for run, base in zip(nets["runs"], parts["runs"]):
        names = VIEW_NAMES.get(run["dataset"], ())
        for view, base_view in zip(run["views"], base["views"]):
            label = names[view["view"]] if view["view"] < len(names) else str(view["view"])
            rows.append(
                [
                    run["dataset"].capitalize() if run["dataset"] != "bdgp" else "BDGP",
                    label,
                    fmt3(run["full"]),
                    f"**{fmt3(view['share'])}** ({fmt3(base_view['share'])})",
                    f"**{fmt3(view['alone'])}** ({fmt3(base_view['alone'])})",
                    fmt3(view["ceiling"]),
                    f"**{fmt3(view['unseen_alone'])}** ({fmt3(base_view['unseen_alone'])})",
                    fmt3(run["unseen_full"]),
                ]
            )
    notes = [
        "",
        f"In bold through the single-view nets, in brackets through the view nets' parts "
        f"(`model.single_view_nets=false`); seed {nets['runs'][0]['seed']}, {nets['cpu_model']}. The view's own "
        "ceiling is scikit-learn's SpectralEmbedding on that view alone (standardized, unit rows, the better of "
        "10 and 30 neighbours).",
    ]
    return "\n".join(markdown_table(header, rows) + notes)
