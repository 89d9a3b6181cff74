"""Robustness curves as files: the command-line arguments of the curve scripts, recorded runs read
back, the JSON and figure written after every run, and the degradation table."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from specrage_jax.overrides import apply_overrides
from specrage_jax.runs.robustness import KINDS, ContaminationSpec, CurveSpec, Method, run_curves


def plot_curves(curves: dict[str, Any], path: Any, *, title: str) -> None:
    """One panel per contamination kind: relative ACC degradation (%) against the contaminated
    fraction (%), a line per method (error bars: std over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(4.6 * len(curves), 3.4), squeeze=False)
    for ax, (kind, by_method) in zip(axes[0], curves.items()):
        for name, rows in by_method.items():
            x = 100 * np.asarray(rows["fractions"], float)
            y = np.asarray([np.nan if v is None else v for v in rows["degradation_mean"]], float)
            err = np.asarray([0.0 if v is None else v for v in rows["degradation_std"]], float)
            ax.errorbar(x, y, yerr=err if err.any() else None, marker="o", ms=4, capsize=3, label=name)
        ax.axhline(0.0, color="grey", lw=0.8, ls=":")
        ax.set(
            xlabel=f"contaminated samples (%), {kind}",
            ylabel="relative ACC degradation (%)",
            title=f"{title}: {kind}",
            xticks=100 * np.asarray(next(iter(by_method.values()))["fractions"]),
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def add_curve_arguments(parser: Any) -> None:
    """The arguments both curve scripts take (argparse.ArgumentParser)."""
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds (curves: mean over them)")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.4])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--max-samples", type=int, default=0, help="stratified subset of this many rows (0: all)")
    parser.add_argument("--outlier-view", type=int, default=0, help="the view that receives the outliers")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every method (applied last: after the dataset preset and the method's own)",
    )
    parser.add_argument("--resume", action="store_true", help="keep the runs already in the output file")
    parser.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="JSON",
        help="also take matching runs (same signature) from this result file",
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="train nothing: rewrite the JSON and figure from the recorded runs (with --resume/--reuse)",
    )


def spec_from_args(args: Any) -> CurveSpec:
    return CurveSpec(
        kinds=tuple(args.kinds),
        fractions=tuple(args.fractions),
        seeds=tuple(args.seeds),
        max_samples=args.max_samples,
        contamination=ContaminationSpec(outlier_view=args.outlier_view),
    )


def recorded_runs(paths: Iterable[Any]) -> list[dict[str, Any]]:
    """The run records of existing result files (missing files are skipped)."""
    from pathlib import Path

    runs: list[dict[str, Any]] = []
    for path in map(Path, paths):
        if path.is_file():
            runs += json.loads(path.read_text()).get("runs", [])
    return runs


def write_curve_file(
    args: Any, dataset: str, methods: Sequence[Method], out: Any, *, title: str, protocol: str
) -> dict[str, Any]:
    """Runs the curves of ``methods`` on ``dataset`` and writes ``out`` (JSON, rewritten after
    every run, "complete" false until the end) and the PNG beside it. Returns the payload."""
    from pathlib import Path

    from specrage_jax.data import load_dataset
    from specrage_jax.presets import preset
    from specrage_jax.runs.records import environment_info, write_json_atomic

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    spec = spec_from_args(args)
    base = apply_overrides(preset(dataset), ["train.progress=false"])
    # --set comes last, so it wins over a method's own overrides (e.g. another temperature)
    methods = [dataclasses.replace(m, overrides=(*m.overrides, *args.overrides)) for m in methods]
    header = {
        "dataset": dataset,
        "protocol": protocol,
        "metric": "test k-means ACC; degradation = 100 (ACC_clean - ACC) / ACC_clean per seed, mean/std over seeds",
        "kinds": list(spec.kinds),
        "fractions": list(spec.fractions),
        "seeds": list(spec.seeds),
        "n_seeds": len(spec.seeds),
        "max_samples": spec.max_samples,
        "contamination": dataclasses.asdict(spec.contamination),
        "base_overrides": list(args.overrides),
        "methods": {m.name: {"overrides": list(m.overrides), "alignment": m.alignment} for m in methods},
        "environment": environment_info(),
    }

    def save(runs: list[dict[str, Any]], curves: dict[str, Any], complete: bool = False) -> dict[str, Any]:
        payload = {**header, "complete": complete, "curves": curves, "runs": runs}
        write_json_atomic(out, payload)
        return payload

    known = recorded_runs(([out] if args.resume else []) + list(args.reuse))
    runs, curves = run_curves(
        dataset,
        lambda seed: load_dataset(dataset, seed=seed, data_dir=args.data_dir),
        methods,
        base,
        spec,
        known_runs=known,
        on_update=save,
        log=lambda line: print(line, flush=True),
        run_missing=not args.no_run,
    )
    complete = all(
        n == len(spec.seeds) for by_method in curves.values() for rows in by_method.values() for n in rows["n_seeds"]
    )
    payload = save(runs, curves, complete=complete)
    plot_curves(curves, out.with_suffix(".png"), title=title)
    return payload


def degradation_table(curves: dict[str, Any]) -> str:
    """Lines "kind method: d10 d20 ... (clean ACC)" of the mean degradations, for the log."""
    lines = []
    for kind, by_method in curves.items():
        for name, rows in by_method.items():
            cells = " ".join("  n/a" if v is None else f"{v:5.1f}" for v in rows["degradation_mean"])
            clean = rows["clean_acc_mean"]
            lines.append(f"{kind:8s} {name:12s} {cells}   (clean ACC {'n/a' if clean is None else f'{clean:.4f}'})")
    return "\n".join(lines)
