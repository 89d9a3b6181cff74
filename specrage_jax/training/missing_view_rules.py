"""The data-aware rules for training rows where views are missing: the batch size that lets a
batch's graph split as cleanly as complete samples' do, and whether the views together split the
complete samples more cleanly than each alone (joint Siamese positives). Each returns its choice
with the scores behind it; :func:`specrage_jax.training.defaults.resolve_defaults` applies them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specrage_jax.training.graph_probes import batch_eigengap, seeded_rows
from specrage_jax.training.graph_rules import CLEAR_EIGENGAP, GAP_GAIN
from specrage_jax.training.siamese import joint_neighbor_space
from specrage_jax.validation import present_views

GROWN_BATCH_MAX = 8192  # views missing: the batch grows at most to this many rows ((V, m, m) graphs)


def batch_for_missing_views(
    views: Sequence[np.ndarray],
    n_clusters: int,
    batch_rows: int,
    l: int,
    max_factor: int,
    *,
    seed: int = 0,
    distinct: bool = True,
) -> tuple[int, float, dict[int, float]]:
    """(m, reference gap, {batch size: eigengap}): the batch size for training rows where views
    are missing (all-NaN rows).

    A missing view removes that sample's edges from the view's graph, so a batch of m rows with
    missing views splits into the k groups less cleanly than m complete rows do, and the
    network learns what its batches' graphs show. The reference is the eigengap of a seeded
    batch of ``batch_rows`` complete samples (all of them when fewer; CLEAR_EIGENGAP when they
    are too few for a graph); the batch doubles, up to ``max_factor`` times, GROWN_BATCH_MAX
    rows and the training rows, until a batch of the training rows with their missing views
    reaches it. Every view present: ``batch_rows`` unchanged.
    """
    n = views[0].shape[0]
    m = min(batch_rows, n)
    present = present_views(views)
    if present.all() or max_factor <= 1:
        return m, math.nan, {}
    complete = np.flatnonzero(present.all(axis=1))
    reference_rows = complete[seeded_rows(len(complete), m, seed=seed, stream=6)]
    reference = CLEAR_EIGENGAP  # too few complete samples for a graph of their own
    if len(complete) > max(l, n_clusters) + 1:
        reference = batch_eigengap(views, reference_rows, l, n_clusters, distinct=distinct)
        reference = reference if math.isfinite(reference) else CLEAR_EIGENGAP
    limit = min(n, max(m, min(m * max_factor, GROWN_BATCH_MAX)))
    gaps: dict[int, float] = {}
    size = m
    while True:
        gaps[size] = batch_eigengap(views, seeded_rows(n, size, seed=seed, stream=7), l, n_clusters, distinct=distinct)
        if gaps[size] >= reference or size >= limit:
            return size, reference, gaps
        size = min(2 * size, limit)


def joint_split_scores(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, l: int, *, seed: int = 0
) -> tuple[float, float]:
    """(joint, own): the relative eigengaps (:func:`eigengap_score`) of two l-NN graphs of a
    seeded batch of the samples that have every view (views (n, d_v) with NaN rows for missing
    views): the graph under all views together (:func:`training.siamese.joint_neighbor_space`)
    and the mean of the views' own graphs (what training sees). -inf where too few samples have
    every view for a graph of k groups: fewer than l + 1 per expected cluster, so that a sample's l
    neighbours can lie in its own cluster (the bound of :func:`class_size_neighbor_cap`)."""
    present = present_views(views)
    complete = np.flatnonzero(present.all(axis=1))
    if len(complete) < n_clusters * (l + 1) or len(complete) <= n_clusters + 1:
        return -math.inf, -math.inf
    rows = complete[seeded_rows(len(complete), min(batch_rows, len(complete)), seed=seed, stream=8)]
    batch = [np.asarray(x)[rows].astype(np.float32) for x in views]
    everything = np.arange(len(rows))
    joint = batch_eigengap([joint_neighbor_space(batch, seed=seed)], everything, l, n_clusters)
    return joint, batch_eigengap(batch, everything, l, n_clusters)


def joint_is_clearly_cleaner(joint: float, own: float) -> bool:
    """The rule of :func:`choose_neighbor_count` applied to the joint graph against the views'
    own: a score of at least CLEAR_EIGENGAP whose gap is at least GAP_GAIN times the own graphs'.
    Own graphs that already fall into exactly k components (+inf) leave nothing to gain."""
    if own == math.inf:
        return False
    return joint >= CLEAR_EIGENGAP and joint - 1.0 >= GAP_GAIN * max(own - 1.0, 0.0)
