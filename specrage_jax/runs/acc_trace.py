"""A run's accuracy against its SpecRaGE steps: every ``eval.acc_every_epochs`` epochs, k-means
on the embedding of (at most ``TRACE_MAX_ROWS`` of) the validation rows, scored against their
labels. It reads the state at the end of an epoch and changes nothing that training uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specrage_jax.api import fit_pipeline as pipeline
from specrage_jax.config import ExperimentConfig
from specrage_jax.evaluation.metrics import clustering_accuracy
from specrage_jax.nets.state import SpecRaGEState
from specrage_jax.training.distributed import host_local

TRACE_MAX_ROWS = 10_000  # the validation split is already a seeded random sample: its first rows


@dataclass
class AccuracyTrace:
    """Collects {"epoch", "acc"} records: after every ``every``-th epoch (1-based), the k-means
    ACC of ``views`` (V arrays (n, d_v), the network's inputs) against ``labels`` (n,)."""

    views: tuple[Any, ...]
    labels: np.ndarray
    config: ExperimentConfig
    n_clusters: int
    seed: int
    records: list[dict[str, float]] = field(default_factory=list)

    def __call__(self, state: SpecRaGEState, record: Any) -> None:
        epoch = int(record.epoch) + 1
        if epoch % self.config.eval.acc_every_epochs:
            return
        embedding = pipeline.embed_rows(host_local(state), self.views, self.config).embedding
        clusters = pipeline.cluster(embedding, self.n_clusters, self.config, seed=self.seed)
        self.records.append({"epoch": epoch, "acc": clustering_accuracy(self.labels, clusters.labels)})


def accuracy_trace(
    val_views: tuple[Any, ...], val_labels: np.ndarray, config: ExperimentConfig, *, n_clusters: int, seed: int
) -> AccuracyTrace | None:
    """The trace of a run (None with ``eval.acc_every_epochs`` 0 or too few validation rows for
    ``n_clusters`` clusters) on the first ``TRACE_MAX_ROWS`` validation rows."""
    rows = min(len(val_labels), TRACE_MAX_ROWS)
    if not config.eval.acc_every_epochs or rows < n_clusters:
        return None
    views = tuple(np.asarray(v[:rows]) for v in val_views)  # a streamed view reads these rows
    return AccuracyTrace(views, np.asarray(val_labels[:rows]), config, n_clusters, seed)
