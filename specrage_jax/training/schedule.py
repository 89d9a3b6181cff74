"""The paper's plateau learning-rate policy, as a pure function of the validation loss."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

PLATEAU_REL_THRESHOLD = 1e-4  # a loss counts as improved once it is this much (relative) below the best


class PlateauState(NamedTuple):
    """best: lowest monitored loss so far; bad_epochs: epochs since it improved."""

    best: float = math.inf
    bad_epochs: int = 0


def plateau_update(
    plateau: PlateauState,
    loss: float,
    learning_rate: float,
    *,
    factor: float,
    patience: int,
    rel_threshold: float = PLATEAU_REL_THRESHOLD,
) -> tuple[PlateauState, float]:
    """One epoch of reduce-on-plateau: x ``factor`` after more than ``patience`` epochs without
    a relative improvement of ``rel_threshold``. Returns (new plateau state, new learning rate)."""
    if improves(loss, plateau.best, rel_threshold):
        return PlateauState(best=loss, bad_epochs=0), learning_rate
    bad = plateau.bad_epochs + 1
    if bad > patience:
        return PlateauState(best=plateau.best, bad_epochs=0), learning_rate * factor
    return PlateauState(best=plateau.best, bad_epochs=bad), learning_rate


def improves(loss: float, best: float, rel_threshold: float) -> bool:
    """Whether ``loss`` is at least ``rel_threshold`` (relative) below ``best`` (any loss improves
    on no best yet, ``best`` = inf)."""
    return loss < (best * (1.0 - rel_threshold) if math.isfinite(best) else math.inf)


def stalls(losses: Sequence[float], patience: int, rel_threshold: float = PLATEAU_REL_THRESHOLD) -> bool:
    """Whether ``losses`` (one per epoch) hold ``patience`` consecutive epochs without a relative
    improvement of ``rel_threshold`` on the best loss before them: the plateau test of
    :func:`plateau_update`, asked of a whole run and without its learning-rate drops."""
    best, bad = math.inf, 0
    for loss in losses:
        if improves(loss, best, rel_threshold):
            best, bad = loss, 0
        else:
            bad += 1
            if bad >= patience:
                return True
    return False


def should_stop(learning_rate: float, min_lr: float) -> bool:
    """Training ends once the learning rate has decayed to ``min_lr`` (1e-8 in the paper)."""
    return learning_rate <= min_lr * (1.0 + 1e-6)
