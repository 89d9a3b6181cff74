"""What a run will train, stage by stage, before it starts: nets, epochs, steps and the setting
that bounds each stage (the CLI prints it, so a short ``--epochs`` is never a surprise)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from specrage_jax.config import VIEW_NETS_UNTIL_STALL, ExperimentConfig
from specrage_jax.training.pretrain import stage_epoch_steps


@dataclass(frozen=True)
class Stage:
    """One training stage: ``nets`` networks, each ``epochs`` epochs of ``steps_per_epoch`` steps
    of ``batch`` rows (pairs for the Siamese nets); ``bound_by`` names the setting of its epochs."""

    name: str
    nets: int
    epochs: int
    steps_per_epoch: int
    batch: int
    unit: str
    bound_by: str
    note: str = ""

    @property
    def total_steps(self) -> int:
        return self.nets * self.epochs * self.steps_per_epoch


def early_stop_note(patience: int, items: str) -> str:
    return f"at most: stops once the loss of held-out {items} stalls for {patience} epochs" if patience else ""


def stage_plan(config: ExperimentConfig, *, n_train: int, n_views: int) -> tuple[Stage, ...]:
    """The stages a run of ``config`` trains on ``n_train`` rows of ``n_views`` views, in order."""
    stages = []
    if config.autoencoder.enabled:
        m = min(config.autoencoder.batch_size, n_train)
        stages.append(
            Stage(
                "autoencoders",
                n_views,
                config.autoencoder.epochs,
                stage_epoch_steps(n_train, m, config.autoencoder.steps_per_epoch, config.autoencoder.patience),
                m,
                "rows",
                "--autoencoder-epochs (autoencoder.epochs)",
                note=early_stop_note(config.autoencoder.patience, "rows"),
            )
        )
    if config.siamese.enabled:
        rows = min(config.siamese.max_samples or n_train, n_train)
        pairs = rows * 2 * config.siamese.n_positive
        m = min(config.siamese.batch_size, pairs)
        stages.append(
            Stage(
                "Siamese nets",
                n_views,
                config.siamese.epochs,
                stage_epoch_steps(pairs, m, config.siamese.steps_per_epoch, config.siamese.patience),
                m,
                "pairs",
                "--siamese-epochs (siamese.epochs)",
                note="; ".join(
                    part
                    for part in (f"{pairs} pairs from {rows} rows", early_stop_note(config.siamese.patience, "pairs"))
                    if part
                ),
            )
        )
    m = min(config.train.batch_size, n_train)
    steps = config.train.steps_per_epoch or math.ceil(n_train / m)
    stages.append(
        Stage(
            "SpecRaGE",
            1,
            config.train.epochs,
            steps,
            m,
            "rows",
            "--epochs (train.epochs)",
            note="; ".join(
                part
                for part in (
                    "at most: the plateau schedule may stop it earlier",
                    frozen_view_nets_note(config.train.view_net_steps),
                )
                if part
            ),
        )
    )
    return tuple(stages)


def frozen_view_nets_note(view_net_steps: int) -> str:
    """What the plan says of ``train.view_net_steps``: nothing when the view nets train throughout."""
    if view_net_steps == VIEW_NETS_UNTIL_STALL:
        return "the view nets until their loss stalls, then the weighting net alone"
    if view_net_steps <= 0:
        return ""
    return f"the view nets for the first {view_net_steps:,}, then the weighting net alone"


def format_plan(stages: tuple[Stage, ...]) -> list[str]:
    """One line per stage, e.g. ``2. Siamese nets: 2 nets x 20 epochs x 35 steps of 512 pairs
    (1,400 steps; bound by --siamese-epochs (siamese.epochs))``."""
    lines = []
    for i, stage in enumerate(stages, 1):
        nets = f"{stage.nets} nets x " if stage.nets > 1 else ""
        note = f"; {stage.note}" if stage.note else ""
        lines.append(
            f"{i}. {stage.name}: {nets}{stage.epochs} epochs x {stage.steps_per_epoch} steps of "
            f"{stage.batch} {stage.unit} ({stage.total_steps:,} steps{note}; bound by {stage.bound_by})"
        )
    return lines
