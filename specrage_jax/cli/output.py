"""What the command line prints: one-line errors and warnings, the metrics table and the plan of a
run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

MAX_GROUP_ROWS = 6


def view_group_rows(by_views: dict[str, Any]) -> list[tuple[str, float]]:
    """Incomplete test data: (label, k-means ACC) of each group of samples with the same views, the
    MAX_GROUP_ROWS largest (metrics.json holds them all)."""
    largest = {group for group, _ in sorted(by_views.items(), key=lambda item: -item[1]["n"])[:MAX_GROUP_ROWS]}
    return [(f"  ACC {group} ({score['n']})", score["acc"]) for group, score in by_views.items() if group in largest]


def metrics_table(result: dict) -> str:
    """A readable table of the test metrics (percentages)."""
    test = result["test"]
    rows = [
        ("k-means ACC", test["kmeans"]["acc"]),
        ("k-means NMI", test["kmeans"]["nmi"]),
        ("k-means ARI", test["kmeans"]["ari"]),
        *view_group_rows(test.get("kmeans_by_views", {})),
        ("SVM accuracy", test["svm"]["acc"]),
        ("SVM macro F1", test["svm"]["f1"]),
        ("SVM macro precision", test["svm"]["precision"]),
    ]
    n = result["n_samples"]
    lines = [
        f"{result['dataset']} (seed {result['seed']}): train {n['train']}, val {n['val']}, test {n['test']} samples",
        f"{'metric':<22}{'test':>8}",
        "-" * 30,
    ]
    if "missing_views" in result:  # incomplete data: say how much of each view is missing
        share = ", ".join(
            f"view {v} {100 * f:.0f} %" for v, f in enumerate(result["missing_views"]["fraction_missing"])
        )
        lines.insert(1, f"missing views: {share} of the samples")
    lines += [f"{name:<22}{100 * value:>7.2f}%" for name, value in rows]
    sampled = test.get("eval_rows")
    if sampled and sampled["svm_train_rows"] < n["train"]:  # a streamed run's bounded SVM
        lines.append(f"(the SVM trained on {sampled['svm_train_rows']:,} seeded training rows of {n['train']:,})")
    weights = ", ".join(f"{w:.2f}" for w in test["mean_view_weights"])
    lines += [
        "-" * 30,
        f"mean view weights      {weights}",
        f"train time             {result['timing']['train_seconds']:.1f} s ({result['training']['steps']} steps)",
    ]
    problems = result["test"]["health"]["problems"]
    lines.append(f"embedding health       {'ok' if not problems else f'{len(problems)} problem(s), see the warnings'}")
    return "\n".join(lines)


def print_run_plan(resolved: dict[str, Any], stages: Sequence[Any]) -> None:
    """Prints the settings chosen from the data (if any) and the stages to train, before training."""
    from specrage_jax.runs.run_plan import format_plan
    from specrage_jax.training.defaults import format_choices

    if resolved:
        print("settings chosen from the data (any --set value wins):")
        for line in format_choices(resolved):
            print(f"  {line}")
    print("stages to train:")
    for line in format_plan(tuple(stages)):
        print(f"  {line}")
    sys.stdout.flush()


def print_warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A warning as the CLI shows it: ``specrage: warning: <message on one line>`` on stderr."""
    print(f"specrage: warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def one_line(err: BaseException) -> str:
    """An exception's message on one line (what the CLI prints for an expected failure)."""
    return " ".join(str(err).split()) or type(err).__name__
