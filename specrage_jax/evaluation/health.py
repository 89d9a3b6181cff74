"""Checks that a trained embedding is usable: orthogonal, spread out, and not one big cluster.

A run can finish without error and still return nonsense: R^-1 that no longer orthogonalizes the
outputs (too many components for the batch, a diverged step), rows that all coincide, or k-means
putting nearly every row into one of the k clusters asked for. :func:`embedding_problems` names
each such problem with what to try; the estimator warns with them (:class:`DegenerateEmbeddingWarning`),
the CLI prints them and ``metrics.json`` records them under ``test.health``.

Thresholds (measured, BUILD_NOTES.md "Degenerate results"): healthy runs have an orthogonality
error (max |Y^T Y / m - I|) of 0.02-0.25 on held-out rows, so 1.0 (off by the identity's own
scale) is far outside them; a relative spread below 1e-4 means the rows agree to about 1%.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specrage_jax.ops.ortho import orthogonality_error

ORTHOGONALITY_LIMIT = 1.0
LARGEST_CLUSTER_LIMIT = 0.9
SPREAD_LIMIT = 1e-4


class DegenerateEmbeddingWarning(UserWarning):
    """The trained embedding is degenerate (see :func:`embedding_problems`)."""


@dataclass(frozen=True)
class HealthReport:
    """What was measured on an embedding and the problems found (empty when healthy)."""

    orthogonality_error: float
    largest_cluster_share: float
    relative_spread: float
    problems: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "orthogonality_error": self.orthogonality_error,
            "largest_cluster_share": self.largest_cluster_share,
            "relative_spread": self.relative_spread,
            "problems": list(self.problems),
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> HealthReport:
        """The report :meth:`as_dict` wrote."""
        return cls(
            orthogonality_error=float(record["orthogonality_error"]),
            largest_cluster_share=float(record["largest_cluster_share"]),
            relative_spread=float(record["relative_spread"]),
            problems=tuple(record["problems"]),
        )


def relative_spread(y: np.ndarray) -> float:
    """Total variance of the rows over their mean squared norm, in [0, 1]: 0 when every row is the
    same. y: (n, k)."""
    y = np.asarray(y, dtype=np.float64)
    mean_sq_norm = float(np.mean(np.sum(y * y, axis=1)))
    if mean_sq_norm == 0.0:
        return 0.0
    return float(np.sum(np.var(y, axis=0)) / mean_sq_norm)


def largest_cluster_share(cluster_labels: np.ndarray) -> float:
    """Fraction of the rows in the most populous cluster. cluster_labels: (n,)."""
    _, counts = np.unique(np.asarray(cluster_labels), return_counts=True)
    return float(counts.max() / counts.sum())


def embedding_problems(
    y_raw: np.ndarray, cluster_labels: np.ndarray, n_clusters: int, *, convention: str = "m_identity"
) -> HealthReport:
    """Measures y_raw (n, k), the embedding as trained (Y = Y~ R^-1, before any row scaling), and
    the k-means labels (n,) found on it, and names each degenerate symptom with what to try."""
    n, k = np.shape(y_raw)
    ortho = float(orthogonality_error(np.asarray(y_raw, np.float32), convention))
    spread = relative_spread(y_raw)
    share = largest_cluster_share(cluster_labels)
    problems = []
    if ortho > ORTHOGONALITY_LIMIT:
        problems.append(
            f"the embedding is not orthogonal (max |Y^T Y/m - I| = {ortho:.3g}, healthy runs stay below 0.3): "
            f"its {k} components are more than the data supports, or training diverged or stopped too early; lower "
            f"n_components (model.n_components), raise the batch (train.batch_size), train longer (train.epochs) "
            f"or lower the learning rate"
        )
    if spread < SPREAD_LIMIT:
        problems.append(
            f"the embedding has collapsed: its {n} rows are nearly identical (spread {spread:.2g} of their norm); "
            f"check that the views carry signal after scaling (data.preprocess), and try a larger "
            f"graph.n_neighbors or the data-aware defaults (ExperimentConfig.auto)"
        )
    if n_clusters >= 2 and share >= LARGEST_CLUSTER_LIMIT:
        problems.append(
            f"the clusters have collapsed: k-means put {100 * share:.1f}% of {n} rows into one of {n_clusters} "
            f"clusters; unless the data really is that unbalanced, the embedding does not separate the groups: "
            f"try the data-aware defaults (leave n_neighbors, batch size and preprocessing to the data), "
            f"a larger graph.n_neighbors, or fewer clusters"
        )
    return HealthReport(
        orthogonality_error=ortho, largest_cluster_share=share, relative_spread=spread, problems=tuple(problems)
    )
