"""Data-aware defaults: the settings whose good value depends on the data, resolved at fit.

:meth:`ExperimentConfig.auto` leaves them unresolved (0, (0,), "auto"); :func:`resolve_defaults`
fills each from what the training rows show (their number, the requested number of clusters,
the views' widths) and says why. An explicit value is never touched, except the batch size
where views are missing (:func:`batch_for_missing_views`) and ``siamese.enabled`` where the
opt-in ``siamese.positives=auto`` picks joint positives. Per-view preprocessing
(``data.preprocess="auto"``) is resolved where the scalers are fitted
(:func:`specrage_jax.data.preprocess.auto_view_kind`); :func:`describe_preprocessing` reports it.

The rules and the measurements behind them are in BUILD_NOTES.md ("Data-aware defaults").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from specrage_jax.config import (
    AUTO,
    AUTO_COMPONENTS,
    AUTO_VIEW_NET_STEPS,
    AUTO_WIDTHS,
    VIEW_NETS_UNTIL_STALL,
    ExperimentConfig,
    SiameseConfig,
)
from specrage_jax.ops.neighbors import knn_lists
from specrage_jax.ops.spectral import sparse_gaussian_graph
from specrage_jax.training.siamese import joint_neighbor_space
from specrage_jax.validation import missing_rows, present_views

FULL_BATCH_MAX = 4096  # up to this many training rows, every step sees the whole training set
SHORT_DOCUMENT_TERMS = 15  # projected views whose median row has at most this many terms: short documents
NEIGHBOR_CANDIDATES = (5, 8, 10, 12, 15, 20, 30)  # the kNN graph's l is chosen among these
DENSE_SPECTRUM_MAX_ROWS = 600  # up to here the spectrum is a dense eigvalsh, above it ARPACK
CLASS_SHARE_OF_NEIGHBORS = 1.0  # l is below this share of the expected cluster size m / k
CLEAR_EIGENGAP = 1.2  # a sparser graph must split the batch at least this cleanly (lambda_k+1 / lambda_k) ...
GAP_GAIN = 2.0  # ... with a gap at least this many times the dense graph's
GAP_PERSISTENCE = 1 / 3  # ... and one of the next larger candidates keeps at least this share of its gap
PERSISTENCE_WINDOW = 2  # ... (the best of this many next larger candidates: one score may dip)
SUSTAINED_EIGENGAP = 1.1  # no clear gap: a run of consecutive sparser candidates each scoring at least this ...
SUSTAINED_RUN = 3  # ... (this many or more, each with GAP_GAIN times the dense graph's gap) takes the run's largest l
AGREEING_VIEWS = 0.25  # no clear gap: views sharing at least this share of their l-NN lists ...
AGREEMENT_NEIGHBORS = 10  # ... (at this l) take the sparse graph of this l instead of the dense one
ZERO_EIGENVALUE = 1e-8  # normalized-Laplacian eigenvalues below this count as 0 (a component)
STEP_BUDGET = 400  # gradient steps of a run (at least; an epoch is never cut short)
MIN_STEPS_PER_EPOCH = 10  # small sets: an "epoch" of the schedule is this many full-batch steps
WIDTHS_BY_ROWS = (  # (below this many training rows, per-view MLP widths)
    (1500, (512, 512, 256)),
    (FULL_BATCH_MAX + 1, (256, 256, 128)),  # whole-set steps grow with n x width^2: narrower nets
    (50000, (512, 512, 256)),  # mini-batches of FULL_BATCH_MAX rows: the step no longer grows with n
)
LARGE_WIDTHS = (1024, 1024, 512)  # the paper's widths, from 50000 training rows on
GROWN_BATCH_MAX = 8192  # views missing: the batch grows at most to this many rows ((V, m, m) graphs)
JOINT_MIN_PER_CLUSTER = 10  # the joint-positives rule needs this many samples with every view per cluster
EXTRA_COMPONENTS_MAX = 5  # n_components is chosen among k .. k + min(k, this)
CLEAR_NCUT_GAIN = 0.075  # more components only where their k-means partition cuts the graph this much less
NCUT_TOLERANCE = 0.01  # ... and then the fewest whose cut is within this of the lowest
COMPONENT_RULE_MAX_CLUSTERS = 20  # above this many clusters n_components is the number of clusters
NORMALIZED_DEGREES_ABOVE = 20  # more clusters than this: each batch's graphs are degree-normalized
EIGENVALUE_TIE = 0.02  # lambda_c+1 within this (relative) of lambda_c: the bottom c directions are ill-determined
EIGENVALUE_CLEAR = 0.08  # ... and the subspace grows to the first c whose next eigenvalue is this much above


@dataclass(frozen=True)
class DataShape:
    """What the rules look at: the model's input views on the training rows (after the per-view
    preprocessing; all of them, or a sample when there are many), V arrays (rows, d_v), and the
    number of clusters asked for. Only the choice of l reads the rows; without it ``views`` may
    be None with ``n_train`` given."""

    views: tuple[np.ndarray, ...] | None
    n_clusters: int
    seed: int = 0
    unreduced_views: tuple[np.ndarray, ...] | None = None  # graph inputs of data.graph_inputs=unreduced
    n_train: int = 0  # training rows when ``views`` hold a sample of them (or None); 0: the rows of ``views``
    views_missing: bool | None = None  # some training sample lacks a view; None: read from ``views``

    def __post_init__(self) -> None:
        if not self.n_train:
            if self.views is None:
                raise ValueError("DataShape needs the training views or n_train")
            object.__setattr__(self, "n_train", int(self.views[0].shape[0]))
        if self.views_missing is None:
            missing = self.views is not None and any(missing_rows(np.asarray(x)).any() for x in self.views)
            object.__setattr__(self, "views_missing", missing)


def projected_document_terms(shape: DataShape) -> float | None:
    """The median number of nonzero entries per row of the longest projected view (an svd_l2
    view, whose unreduced rows are wider than the model's inputs), over its present rows; None
    when no view is projected or the unreduced rows are not given."""
    if shape.unreduced_views is None or shape.views is None:
        return None
    medians = []
    for reduced, unreduced in zip(shape.views, shape.unreduced_views):
        x = np.asarray(unreduced)
        if x.shape[1] == np.asarray(reduced).shape[1]:
            continue
        rows = x[~missing_rows(x)]
        if rows.size:
            medians.append(float(np.median(np.count_nonzero(rows, axis=1))))
    return max(medians) if medians else None


def graph_inputs_rule(shape: DataShape, whole: bool) -> tuple[str, str]:
    """(``data.graph_inputs``, why): the unreduced rows where the whole training set is one batch,
    unless the projected views hold short documents (:func:`projected_document_terms` at most
    SHORT_DOCUMENT_TERMS): two such documents share too few terms for their raw rows to find
    neighbours, and the reduced (LSA) rows pool the terms that occur together."""
    if not whole:
        return "model", "mini-batches: each step's graph is built on the reduced rows"
    terms = projected_document_terms(shape)
    if terms is not None and terms <= SHORT_DOCUMENT_TERMS:
        return "model", (
            f"short documents: the longest projected view's median row has {terms:g} terms (at most "
            f"{SHORT_DOCUMENT_TERMS}), too few shared for the raw rows' neighbours; the graph is built on the "
            "reduced rows"
        )
    return "unreduced", "the whole training set is one batch, so the graph of the unreduced rows is built once"


def auto_output_rows(views_missing: bool) -> str:
    """``model.output_rows`` auto: unit where some training sample lacks a view (its row norm then
    follows the views it has), raw otherwise (the embedding as trained)."""
    return "unit" if views_missing else "raw"


def joint_split_scores(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, l: int, *, seed: int = 0
) -> tuple[float, float]:
    """(joint, own): the relative eigengaps (:func:`eigengap_score`) of two l-NN graphs of a
    seeded batch of the samples that have every view (views (n, d_v) with NaN rows for missing
    views): the graph under all views together (:func:`training.siamese.joint_neighbor_space`)
    and the mean of the views' own graphs (what training sees). -inf where too few samples have
    every view for a graph of k groups."""
    present = present_views(views)
    complete = np.flatnonzero(present.all(axis=1))
    if len(complete) < JOINT_MIN_PER_CLUSTER * n_clusters or len(complete) <= max(l, n_clusters) + 1:
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


def full_batch_size(n_train: int) -> int:
    """m: the whole training set while it fits one step (FULL_BATCH_MAX rows), else FULL_BATCH_MAX."""
    return max(1, min(n_train, FULL_BATCH_MAX))


def bottom_normalized_spectrum(w: sp.csr_matrix, count: int) -> np.ndarray:
    """The ``count`` smallest eigenvalues of the normalized Laplacian I - D^-1/2 W D^-1/2 of a
    symmetric sparse graph w (n, n), ascending (isolated rows count as their own component)."""
    degrees = np.asarray(w.sum(axis=1)).ravel()
    inv_sqrt = np.where(degrees > 0, 1.0 / np.sqrt(np.maximum(degrees, 1e-300)), 0.0)
    normalized = sp.diags(inv_sqrt) @ w @ sp.diags(inv_sqrt)
    n = w.shape[0]
    if n <= DENSE_SPECTRUM_MAX_ROWS or count >= n - 1:
        top = np.linalg.eigvalsh(normalized.toarray())[::-1][:count]
    else:
        start = np.random.default_rng(0).standard_normal(n)
        top = np.sort(
            sla.eigsh(normalized, k=count, which="LA", v0=start, return_eigenvectors=False, tol=1e-6, maxiter=20 * n)
        )[::-1]
    return np.clip(1.0 - top, 0.0, 2.0)


def eigengap_score(spectrum: np.ndarray, n_clusters: int) -> float:
    """lambda_{k+1} / lambda_k of a normalized-Laplacian spectrum (ascending): how cleanly the
    graph splits into k groups. A graph with more than k components scores -inf (it splits
    the data into fragments, not clusters); exactly k components score +inf."""
    k = n_clusters
    if k >= len(spectrum):
        return -math.inf
    if spectrum[k] <= ZERO_EIGENVALUE:
        return -math.inf
    return math.inf if spectrum[k - 1] <= ZERO_EIGENVALUE else float(spectrum[k] / spectrum[k - 1])


def eigengap_neighbor_count(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, *, seed: int = 0, distinct: bool = True
) -> tuple[int, dict[int, float]]:
    """(l, {candidate l: eigengap score}): the kNN graph's number of neighbours.

    On one seeded batch of ``batch_rows`` training rows (what a training step's graph sees), the
    mean of the views' kNN Gaussian graphs (the training rule: sigma the median distance to the
    l-th neighbour, kernel exp(-d^2 / 2 sigma^2), (W + W^T)/2) is built for each candidate l in
    NEIGHBOR_CANDIDATES up to a third of the batch and below the expected cluster size m / k
    (:func:`class_size_neighbor_cap`), and scored by the relative eigengap
    lambda_{k+1} / lambda_k of its normalized Laplacian (von Luxburg, "A tutorial on spectral
    clustering", sec. 8.3): how cleanly it splits into k groups.

    The dense graph (the largest candidate) is the default: it is connected, and steady to learn
    from in mini-batches. A sparser graph replaces it only when the data shows a clearly cleaner
    k-way split with it: a score of at least CLEAR_EIGENGAP, whose gap (score - 1) is at least
    GAP_GAIN times the dense graph's, and one of its next PERSISTENCE_WINDOW larger candidates
    keeping at least GAP_PERSISTENCE of that gap (:func:`choose_neighbor_count`); the best such
    score wins (ties: the larger l). Where no graph splits the batch clearly, a modest gap held
    over SUSTAINED_RUN consecutive sparser candidates takes the top of that run
    (:func:`sustained_gap_neighbor_count`). Candidates whose graph falls apart into more than k
    components are skipped.
    With no candidate left (tiny batches), l = max(1, m // 3).
    """
    l, scores, _, _ = neighbor_count_and_graph(views, n_clusters, batch_rows, seed=seed, distinct=distinct)
    return l, scores


def neighbor_count_and_graph(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, *, seed: int = 0, distinct: bool = True
) -> tuple[int, dict[int, float], sp.csr_matrix | None, float]:
    """:func:`eigengap_neighbor_count`, the batch's mean graph at the chosen l (None when l is
    the fallback, no candidate): what :func:`component_count` reads, built once, and the views'
    neighbour agreement (:func:`view_neighbor_agreement`; NaN with one view).

    Where no sparser graph splits the batch clearly cleaner, and no modest gap holds over a run
    of sparser candidates, the dense graph stays unless the views agree on their neighbours (at
    least AGREEING_VIEWS of their AGREEMENT_NEIGHBORS-NN lists shared): then each view's near
    neighbours are already the other views', and the sparse AGREEMENT_NEIGHBORS-NN graph keeps
    fewer edges across clusters than the dense one."""
    n = views[0].shape[0]
    m = max(2, min(batch_rows, n))
    rows = seeded_rows(n, m, seed=seed, stream=5)
    candidates = [l for l in NEIGHBOR_CANDIDATES if l <= min(m // 3, class_size_neighbor_cap(m, n_clusters))]
    scores: dict[int, float] = {}
    graphs: dict[int, sp.csr_matrix] = {}
    agreement = math.nan
    if candidates and n_clusters < m - 1:
        neighbors = present_neighbor_lists(views, rows, max(candidates), distinct=distinct)
        for l in candidates:
            graphs[l] = mean_graph(neighbors, m, l)
            scores[l] = eigengap_score(bottom_normalized_spectrum(graphs[l], n_clusters + 1), n_clusters)
        agreement = view_neighbor_agreement(neighbors, m, AGREEMENT_NEIGHBORS)
    chosen = choose_neighbor_count(scores, agreement)
    if chosen is None:
        return max(1, min(m // 3, m - 1)), scores, None, agreement
    return chosen, scores, graphs[chosen], agreement


def view_neighbor_agreement(neighbors: NeighborLists, m: int, l: int) -> float:
    """The share of their l nearest neighbours that two views' lists have in common (mean over
    view pairs, and over the batch's rows that have both views): 1 when the views see the same
    neighbourhoods, about l / m for unrelated views. NaN with fewer than two views.

    neighbors: per view (present positions in the m-row batch, squared distances, indices into
    the present rows), as :func:`present_neighbor_lists` gives them."""
    lists = []
    for present, _, idx in neighbors:
        if idx.shape[1] < l:
            return math.nan
        rows = np.full((m, l), -1, np.int64)
        rows[present] = present[idx[:, :l]]  # neighbours as batch positions
        lists.append((present, rows))
    shares = []
    for a in range(len(lists)):
        for b in range(a + 1, len(lists)):
            both = np.intersect1d(lists[a][0], lists[b][0])
            if both.size:
                left, right = lists[a][1][both], lists[b][1][both]  # (rows, l) each, no repeats in a row
                common = np.sum(left[:, :, None] == right[:, None, :], axis=(1, 2))
                shares.append(float(np.mean(common)) / l)
    return float(np.mean(shares)) if shares else math.nan


def class_size_neighbor_cap(batch_rows: int, n_clusters: int) -> int:
    """The most neighbours l a batch of ``batch_rows`` rows in ``n_clusters`` clusters supports:
    fewer than CLASS_SHARE_OF_NEIGHBORS times the expected cluster size m / k (at least the
    smallest candidate). With l at a cluster's size or above, most of a sample's neighbours lie
    in other clusters, whatever the eigengap of the graph says."""
    below = math.ceil(CLASS_SHARE_OF_NEIGHBORS * batch_rows / max(n_clusters, 1)) - 1
    return max(NEIGHBOR_CANDIDATES[0], below)


def seeded_rows(n: int, m: int, *, seed: int, stream: int) -> np.ndarray:
    """(min(m, n),) sorted row indices: a seeded batch of m of n rows (all of them when m >= n)."""
    return np.sort(np.random.default_rng([seed, stream]).choice(n, size=m, replace=False)) if m < n else np.arange(n)


NeighborLists = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def present_neighbor_lists(
    views: Sequence[np.ndarray], rows: np.ndarray, l: int, *, distinct: bool = True
) -> NeighborLists:
    """Per view with more than one present row among ``rows``: (its present positions in the
    batch, squared distances, indices) of each present row's min(l, present - 1) nearest present
    rows. A view's graph is built among the rows that have it, as in training, and with
    ``distinct`` a non-empty row's copies are not its neighbours (``graph.distinct_neighbors``)."""
    lists = []
    for x in views:
        batch = np.asarray(x, np.float64)[rows]
        present = np.flatnonzero(~missing_rows(batch))
        if len(present) > 1:
            d2, idx = knn_lists(batch[present], min(l, len(present) - 1), distinct=distinct)
            lists.append((present, d2, idx))
    return lists


def mean_graph(neighbors: NeighborLists, m: int, l: int) -> sp.csr_matrix:
    """The mean over views of the l-NN Gaussian graphs (the training rule) as one (m, m) graph."""
    graphs = [
        _graph_among(present, m, sparse_gaussian_graph(d2[:, :l], idx[:, :l], sigma_neighbor=min(l, idx.shape[1])))
        for present, d2, idx in neighbors
    ]
    return (sum(graphs[1:], graphs[0]) / len(graphs)).tocsr()


def batch_eigengap(
    views: Sequence[np.ndarray], rows: np.ndarray, l: int, n_clusters: int, *, distinct: bool = True
) -> float:
    """The relative eigengap lambda_k+1 / lambda_k (:func:`eigengap_score`) of the mean l-NN
    graph of the batch ``rows``, each view's graph among the rows that have it."""
    neighbors = present_neighbor_lists(views, rows, l, distinct=distinct)
    if not neighbors or n_clusters >= len(rows) - 1:
        return -math.inf
    return eigengap_score(bottom_normalized_spectrum(mean_graph(neighbors, len(rows), l), n_clusters + 1), n_clusters)


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


def _graph_among(rows: np.ndarray, m: int, graph: sp.csr_matrix) -> sp.csr_matrix:
    """``graph`` (len(rows), len(rows)) of the rows ``rows`` of an m-row batch as an (m, m) graph
    (the other rows isolated); ``graph`` itself when ``rows`` are all m."""
    if len(rows) == m:
        return graph
    coo = graph.tocoo()
    return sp.csr_matrix((coo.data, (rows[coo.row], rows[coo.col])), shape=(m, m))


def usable_scores(scores: dict[int, float]) -> dict[int, float]:
    """{candidate l: eigengap score} without the candidates whose graph falls apart (-inf)."""
    return {l: score for l, score in scores.items() if score > -math.inf}


def gap_persists(usable: dict[int, float], l: int) -> bool:
    """Whether candidate l's gap (score - 1) holds as the graph grows denser: one of the next
    PERSISTENCE_WINDOW larger candidates of ``usable`` ({l: eigengap score}, l not the largest)
    keeps at least GAP_PERSISTENCE of it. Cluster structure fades gradually with l, though one
    candidate's score may dip (faces, one seed: 1.71 at l 5, 1.10 at 8, 1.32 at 10); a sparse
    graph's fragments are gone at both next candidates (Handwritten, one split: 1.41, 1.09, 1.02)."""
    ordered = sorted(usable)
    start = ordered.index(l) + 1
    after = ordered[start : start + PERSISTENCE_WINDOW]
    return max(usable[c] for c in after) - 1.0 >= GAP_PERSISTENCE * (usable[l] - 1.0)


def choose_neighbor_count(scores: dict[int, float], agreement: float = math.nan) -> int | None:
    """The rule of :func:`eigengap_neighbor_count` on {candidate l: eigengap score}: the largest
    usable l, unless a smaller one scores at least CLEAR_EIGENGAP with a gap GAP_GAIN times the
    dense graph's, and one of the next PERSISTENCE_WINDOW larger candidates keeps at least
    GAP_PERSISTENCE of that gap (:func:`gap_persists`; the best such, ties to the larger l).
    Without such a candidate, and with the dense graph below CLEAR_EIGENGAP too, a modest gap
    sustained over several consecutive sparser candidates takes the largest l of that run
    (:func:`sustained_gap_neighbor_count`); else views whose neighbour ``agreement``
    (:func:`view_neighbor_agreement`) is at least AGREEING_VIEWS take the largest usable l up to
    AGREEMENT_NEIGHBORS. None when no candidate is usable.

    The last condition asks the clean split to hold over a range of sparsity: the gap of cluster
    structure shrinks gradually as l grows, while a sparse graph's fragments (a class falling
    apart into pieces, two classes joined by a few edges) may split the batch cleanly at one l
    and not at the next, into k groups that are not the clusters."""
    usable = usable_scores(scores)
    if not usable:
        return None
    ordered = sorted(usable)
    dense = ordered[-1]
    clear = {
        l: score
        for l, score in usable.items()
        if l != dense
        and score >= CLEAR_EIGENGAP
        and score - 1.0 >= GAP_GAIN * (usable[dense] - 1.0)
        and gap_persists(usable, l)
    }
    if not clear:
        flat = usable[dense] < CLEAR_EIGENGAP  # the dense graph does not split the batch clearly either
        sustained = sustained_gap_neighbor_count(usable) if flat else None
        if sustained is not None:
            return sustained
        sparse = [l for l in ordered if l <= AGREEMENT_NEIGHBORS]
        return max(sparse) if flat and agreement >= AGREEING_VIEWS and sparse else dense
    best = max(clear.values())
    return max(l for l, score in clear.items() if score == best)


def sustained_gap_neighbor_count(usable: dict[int, float]) -> int | None:
    """The largest l of the longest run of at least SUSTAINED_RUN consecutive sparser candidates of
    ``usable`` ({l: eigengap score}, the largest l the dense graph) that each score at least
    SUSTAINED_EIGENGAP with a gap GAP_GAIN times the dense graph's (ties: the run of larger l);
    None without such a run.

    No one candidate splits the batch clearly, but a modest gap that holds over a range of
    sparsity is cluster structure the dense graph blurs (digits with a 57 % class and a 3-wide
    informative view: 1.12-1.13 at l 5-12, 1.09 at 15, dense 1.04), where a sparse graph's fragments show at
    one or two l only (Handwritten, one split: 1.15, 1.07, 1.03)."""
    ordered = sorted(usable)
    dense = ordered[-1]
    floor = GAP_GAIN * (usable[dense] - 1.0)
    runs: list[list[int]] = [[]]
    for l in ordered[:-1]:
        if usable[l] >= SUSTAINED_EIGENGAP and usable[l] - 1.0 >= floor:
            runs[-1].append(l)
        elif runs[-1]:
            runs.append([])
    longest = max(runs, key=lambda run: (len(run), run[-1] if run else 0))
    return longest[-1] if len(longest) >= SUSTAINED_RUN else None


def batch_component_count(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, l: int, *, seed: int = 0, distinct: bool = True
) -> tuple[int, dict[int, float]]:
    """:func:`component_count` on the mean l-NN graph (the training rule) of the seeded batch of
    ``batch_rows`` training rows that the choice of l reads (views (n, d_v), NaN rows missing)."""
    n = views[0].shape[0]
    rows = seeded_rows(n, max(2, min(batch_rows, n)), seed=seed, stream=5)
    neighbors = present_neighbor_lists(views, rows, max(1, min(l, len(rows) - 1)), distinct=distinct)
    if not neighbors:
        return n_clusters, {}
    return component_count(mean_graph(neighbors, len(rows), max(1, min(l, len(rows) - 1))), n_clusters, seed=seed)


def partition_ncut(w: sp.spmatrix, labels: np.ndarray, n_clusters: int) -> float:
    """The normalized cut sum_a cut(A, rest) / vol(A) of the partition ``labels`` (m,) of the
    symmetric graph w (m, m); empty and zero-volume parts add nothing."""
    onehot = sp.csr_matrix((np.ones(len(labels)), (np.arange(len(labels)), labels)), shape=(len(labels), n_clusters))
    within = np.asarray((onehot.T @ sp.csr_matrix(w) @ onehot).diagonal()).ravel()
    volume = np.asarray(onehot.T @ np.asarray(w.sum(axis=1)).ravel()).ravel()
    parts = volume > 0
    return float(np.sum(np.maximum(volume[parts] - within[parts], 0.0) / volume[parts]))  # >= 0 despite rounding


def bottom_laplacian_eigenvectors(w: sp.spmatrix, count: int) -> np.ndarray:
    """(m, count) eigenvectors of the unnormalized Laplacian D - W of a symmetric graph w (m, m)
    with the smallest eigenvalues, ascending: what the network's loss is minimized by."""
    return bottom_laplacian_eigenpairs(w, count)[1]


def bottom_laplacian_eigenpairs(w: sp.spmatrix, count: int) -> tuple[np.ndarray, np.ndarray]:
    """((count,) eigenvalues ascending, (m, count) eigenvectors) of the unnormalized Laplacian
    D - W of a symmetric graph w (m, m), the smallest ones. Dense eigh up to
    DENSE_SPECTRUM_MAX_ROWS rows, else ARPACK in shift-invert mode."""
    degrees = np.asarray(w.sum(axis=1)).ravel()
    laplacian = sp.diags(degrees) - sp.csr_matrix(w)
    m = w.shape[0]
    if m <= DENSE_SPECTRUM_MAX_ROWS or count >= m - 1:
        values, vectors = np.linalg.eigh(laplacian.toarray())
        return values[:count], vectors[:, :count]
    shift = -1e-3 * max(float(degrees.mean()), 1e-12)  # below 0: L - shift I is positive definite
    start = np.random.default_rng(0).standard_normal(m)
    values, vectors = sla.eigsh(laplacian.tocsc(), k=count, sigma=shift, which="LM", v0=start)
    order = np.argsort(values)
    return values[order], vectors[:, order]


def tie_resolved_count(eigenvalues: np.ndarray, n_clusters: int) -> int:
    """The fewest directions c >= k whose subspace the eigenvalues (ascending, at least k + 1)
    determine: k unless lambda_k+1 is within EIGENVALUE_TIE (relative) of lambda_k; then the
    first c after k with lambda_c+1 at least EIGENVALUE_CLEAR above lambda_c, or k where none
    within the eigenvalues given is (a flat spectrum: no c is better determined than k).

    Near a tie lambda_k ~ lambda_k+1, the bottom-k eigen-subspace is ill-determined (a small
    change of the graph rotates it by a large angle; Davis-Kahan), and the loss cannot tell the
    k-th direction from the (k+1)-th: a trained network ends on an arbitrary mix of the two,
    which may miss the direction that separates two clusters. Both directions together are
    well determined when a clear gap follows them."""
    k = n_clusters
    values = np.asarray(eigenvalues, np.float64)

    def relative_gap(c: int) -> float:  # (lambda_c+1 - lambda_c) / lambda_c, 1-based c
        return float((values[c] - values[c - 1]) / max(values[c - 1], 1e-12))

    if len(values) <= k or relative_gap(k) >= EIGENVALUE_TIE:
        return k
    return next((c for c in range(k + 1, len(values)) if relative_gap(c) >= EIGENVALUE_CLEAR), k)


def component_count(
    w: sp.spmatrix, n_clusters: int, *, seed: int = 0, split_in_doubt: bool = False
) -> tuple[int, dict[int, float]]:
    """(c, {candidate c: normalized cut}): the embedding dimension for k = ``n_clusters`` clusters.

    The network learns the bottom eigenvectors of the batch graph's Laplacian, and users run
    k-means with k clusters on them. Two things can make the bottom k miss a direction that
    separates two clusters:

    * no eigengap at k: a split inside one class may cost the graph about as little as the
      split between two classes. For each c from k to k + min(k, EXTRA_COMPONENTS_MAX), k-means
      (k clusters, unit rows) partitions the bottom c eigenvectors of w (m, m), and the
      partition is scored by its normalized cut of w. c stays k unless some c cuts the graph
      at least CLEAR_NCUT_GAIN less (relative); then the fewest components whose cut is within
      NCUT_TOLERANCE of the lowest;
    * a tie at k, where the cuts keep k (:func:`tie_resolved_count`): lambda_k+1 about
      lambda_k, so the network ends on an arbitrary mix of the two directions; c then grows to
      the first count after which the spectrum has a clear gap.

    * a sparse graph in doubt (``split_in_doubt``, :func:`sparse_split_in_doubt`: the neighbour rule
      chose l below its dense candidate, which does not split the batch clearly, and the sparse
      graph is not k components): its k-way split may be sub-groups of one class with two classes joined,
      which the cut does not tell apart. c is then at least k + 1, grown past a tie at k + 1
      as above. Handwritten (views 0 and 2, 1,800 training rows, l 5, lambda_k+1 / lambda_k
      1.22-1.52): k-means on the bottom k eigenvectors 0.82-0.84, on k + 1 0.95-0.96, while
      the cuts differ by 2 % (0.289 against 0.295); one more direction lets k-means join the
      sub-groups of a class rather than two classes.

    Above COMPONENT_RULE_MAX_CLUSTERS clusters c is k: one direction more moves the cut of a
    partition into that many parts far less than the bar (100 clusters: 0.3 %), and the
    k-means runs would cost seconds for nothing.
    """
    k = n_clusters
    m = w.shape[0]
    largest = min(k + min(k, EXTRA_COMPONENTS_MAX), m - 2)
    if largest <= k or k > COMPONENT_RULE_MAX_CLUSTERS:
        return k, {}
    values, vectors = bottom_laplacian_eigenpairs(w, min(largest + 1, m - 1))
    scores: dict[int, float] = {}
    with threadpool_limits(limits=1, user_api="openmp"):
        for c in range(k, largest + 1):
            z = vectors[:, :c] / np.maximum(np.linalg.norm(vectors[:, :c], axis=1, keepdims=True), 1e-12)
            labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(z)
            scores[c] = partition_ncut(w, labels, k)
    chosen = choose_component_count(scores, k)
    components = min(tie_resolved_count(values, k), largest) if chosen == k else chosen
    if split_in_doubt:
        components = max(components, min(tie_resolved_count(values, k + 1), largest))
    return components, scores


def sparse_split_in_doubt(l: int, scores: dict[int, float]) -> bool:
    """Whether the neighbour rule chose ``l`` below its dense graph (the largest usable candidate
    of ``scores``, {candidate l: eigengap score}), for a clear eigengap or for agreeing views,
    where the two graphs disagree on the k groups: the dense graph does not split the batch
    clearly (score below CLEAR_EIGENGAP), and the sparse one does not fall into exactly k
    components (then its bottom k directions are the components' indicators, and k-means
    recovers them whatever directions come beside)."""
    usable = usable_scores(scores)
    if l not in usable:
        return False
    dense = max(usable)
    return l < dense and usable[dense] < CLEAR_EIGENGAP and usable[l] < math.inf


def choose_component_count(scores: dict[int, float], n_clusters: int) -> int:
    """The cut rule of :func:`component_count` on {c: normalized cut}: k unless the lowest cut is
    at least CLEAR_NCUT_GAIN below k's; then the smallest c within NCUT_TOLERANCE of the lowest."""
    if not scores:
        return n_clusters
    lowest = min(scores.values())
    if lowest > (1.0 - CLEAR_NCUT_GAIN) * scores[n_clusters]:
        return n_clusters
    return min(c for c, score in scores.items() if score <= lowest * (1.0 + NCUT_TOLERANCE))


def degree_normalization_rule(n_clusters: int) -> tuple[str, str]:
    """(graph.degree_normalization, why) for ``n_clusters`` clusters: 'samples' above
    NORMALIZED_DEGREES_ABOVE clusters, else 'none'. With many small clusters each real cluster is
    a few rows, and the unnormalized Laplacian's bottom directions can as cheaply cut off a handful
    of low-degree rows; scaling W_ij by 1 / sqrt(d_i d_j) prices a cut by the degree it removes
    (the normalized cut). With few clusters the graph stays as built: there the scaling lost as
    often as it gained (BUILD_NOTES, "Data-aware defaults")."""
    if n_clusters > NORMALIZED_DEGREES_ABOVE:
        return "samples", (
            f"{n_clusters} clusters (more than {NORMALIZED_DEGREES_ABOVE}): W_ij / sqrt(d_i d_j) times the mean "
            "degree, so a cluster of a few rows is cut by the degree it loses, not split off cheaply at low degree"
        )
    return "none", f"{n_clusters} clusters (at most {NORMALIZED_DEGREES_ABOVE}): each view's graph as built"


def hidden_widths(n_train: int) -> tuple[int, ...]:
    """Per-view MLP widths by training rows (WIDTHS_BY_ROWS): 512-512-256 for small sets; while the
    whole training set is one batch (up to FULL_BATCH_MAX rows) a step's work grows with
    n x width^2, so from 1,500 rows the nets narrow to 256-256-128 to keep a fit on 3,000 rows
    under a minute on 2 CPU cores; mini-batch training (larger sets) goes back to 512-512-256,
    and the paper's 1024-1024-512 from 50,000 rows on."""
    for below, widths in WIDTHS_BY_ROWS:
        if n_train < below:
            return widths
    return LARGE_WIDTHS


def epoch_plan(n_train: int, batch_rows: int, steps_per_epoch: int = 0) -> tuple[int, int]:
    """(epochs, steps_per_epoch): STEP_BUDGET gradient steps in epochs of ``steps_per_epoch``
    steps (0: one pass over the data, at least MIN_STEPS_PER_EPOCH steps)."""
    per_epoch = steps_per_epoch or max(math.ceil(n_train / max(batch_rows, 1)), MIN_STEPS_PER_EPOCH)
    return max(1, math.ceil(STEP_BUDGET / per_epoch)), per_epoch


def resolve_defaults(config: ExperimentConfig, shape: DataShape) -> tuple[ExperimentConfig, dict[str, Any]]:
    """``config`` with every unresolved field filled from ``shape``, and {field: {value, why}}.

    Explicit values stay as they are, with one exception: where views are missing for some
    training samples, ``train.batch_size`` (the batch for complete data) may grow
    (:func:`batch_for_missing_views`, up to ``train.missing_view_batch_growth`` times). Complete
    data with nothing unresolved comes back unchanged with an empty record (``model.output_rows``
    auto becomes raw there without a record: the embedding as trained).
    """
    graph, train = config.graph, config.train
    chosen: dict[str, Any] = {}

    def choose(key: str, value: Any, why: str) -> Any:
        chosen[key] = {"value": list(value) if isinstance(value, tuple) else value, "why": why}
        return value

    if train.batch_size == 0:
        train = dataclasses.replace(
            train,
            batch_size=choose(
                "train.batch_size",
                full_batch_size(shape.n_train),
                f"the whole training set ({shape.n_train} rows) up to {FULL_BATCH_MAX} rows per step",
            ),
        )
    m = min(train.batch_size, shape.n_train)
    if config.data.graph_inputs == AUTO:
        config = dataclasses.replace(
            config,
            data=dataclasses.replace(
                config.data, graph_inputs=choose("data.graph_inputs", *graph_inputs_rule(shape, m >= shape.n_train))
            ),
        )
    graph_views = shape.views
    if config.data.graph_inputs == "unreduced" and shape.unreduced_views is not None:
        graph_views = shape.unreduced_views
    batch_graph = None  # the batch's mean graph at the chosen l, where the choice of l built it
    split_in_doubt = False  # the chosen l is below the dense candidate, its k-way split in doubt
    if graph.n_neighbors == 0:
        if graph_views is None:
            raise ValueError("graph.n_neighbors=0 (from the data) needs the training views in DataShape")
        l, scores, batch_graph, agreement = neighbor_count_and_graph(
            graph_views, shape.n_clusters, m, seed=shape.seed, distinct=graph.distinct_neighbors
        )
        split_in_doubt = sparse_split_in_doubt(l, scores)
        shown = ", ".join(f"{c}: {score:.3g}" for c, score in scores.items()) or "none fits the batch"
        graph = dataclasses.replace(
            graph,
            n_neighbors=choose(
                "graph.n_neighbors",
                l,
                f"the densest graph unless a sparser one splits a {m}-row batch clearly cleaner "
                f"(relative eigengap lambda_k+1 / lambda_k, k = {shape.n_clusters}, >= "
                f"{CLEAR_EIGENGAP} and {GAP_GAIN:g}x the dense graph's gap, one of the next "
                f"{PERSISTENCE_WINDOW} larger l keeping {GAP_PERSISTENCE:.0%} of it); where no graph splits it "
                f"clearly, the top of a run of >= {SUSTAINED_RUN} consecutive sparser l each scoring >= "
                f"{SUSTAINED_EIGENGAP} with {GAP_GAIN:g}x the dense graph's gap, else l <= {AGREEMENT_NEIGHBORS} "
                f"if the views share >= {AGREEING_VIEWS:.0%} of their {AGREEMENT_NEIGHBORS}-NN lists; "
                f"scores by l: {shown}"
                + (f"; views' shared {AGREEMENT_NEIGHBORS}-NN: {agreement:.2f}" if math.isfinite(agreement) else ""),
            ),
        )
    model = config.model
    if model.n_components == AUTO_COMPONENTS:
        if graph_views is None:
            raise ValueError("model.n_components=-1 (from the data) needs the training views in DataShape")
        components, cuts = (
            batch_component_count(
                graph_views, shape.n_clusters, m, graph.n_neighbors, seed=shape.seed, distinct=graph.distinct_neighbors
            )
            if batch_graph is None
            else component_count(batch_graph, shape.n_clusters, seed=shape.seed, split_in_doubt=split_in_doubt)
        )
        shown = ", ".join(f"{c}: {cut:.4g}" for c, cut in cuts.items()) or "none fits the batch"
        model = dataclasses.replace(
            model,
            n_components=choose(
                "model.n_components",
                components,
                f"the {shape.n_clusters} clusters asked for, unless k-means on more eigen-directions of a {m}-row "
                f"batch's graph cuts it at least {CLEAR_NCUT_GAIN:.0%} less (then the fewest within "
                f"{NCUT_TOLERANCE:.0%} of the lowest), or its eigenvalues tie at k (lambda_k+1 within "
                f"{EIGENVALUE_TIE:.0%} of lambda_k: then up to the next clear gap); at least k + 1 beside a "
                f"graph sparser than the dense one where the dense one splits the batch less clearly (the sparse "
                f"graph's k-way split may join two classes); normalized "
                f"cut by components: {shown}",
            ),
        )
    if graph.degree_normalization == AUTO:
        graph = dataclasses.replace(
            graph,
            degree_normalization=choose("graph.degree_normalization", *degree_normalization_rule(shape.n_clusters)),
        )
    if shape.views is not None and train.missing_view_batch_growth > 1:
        grown, reference, gaps = batch_for_missing_views(
            shape.unreduced_views if config.data.graph_inputs == "unreduced" and shape.unreduced_views else shape.views,
            shape.n_clusters,
            m,
            graph.n_neighbors,
            train.missing_view_batch_growth,
            seed=shape.seed,
            distinct=graph.distinct_neighbors,
        )
        if gaps:
            configured, m = m, grown  # grown: at most the sampled rows, so at most n_train
            if m > configured and train.epochs and not train.steps_per_epoch:
                train = dataclasses.replace(
                    train,
                    steps_per_epoch=choose(
                        "train.steps_per_epoch",
                        math.ceil(shape.n_train / configured),
                        f"the batch grew from {configured} rows: an epoch keeps the gradient steps of one pass "
                        f"at {configured} rows, so the run takes as many steps as on complete data",
                    ),
                )
            shown = ", ".join(f"{size}: {gap:.3g}" for size, gap in gaps.items())
            train = dataclasses.replace(
                train,
                batch_size=choose(
                    "train.batch_size",
                    m,
                    f"views are missing: the batch doubles from {train.batch_size} (up to "
                    f"{train.missing_view_batch_growth}x, {GROWN_BATCH_MAX} rows) until its graph splits into "
                    f"{shape.n_clusters} groups as cleanly as {configured} complete samples "
                    f"(eigengap {reference:.3g}); eigengap by batch size: {shown}",
                ),
            )
    if train.epochs == 0:
        epochs, per_epoch = epoch_plan(shape.n_train, m, train.steps_per_epoch)
        train = dataclasses.replace(
            train,
            epochs=choose(
                "train.epochs", epochs, f"a budget of {STEP_BUDGET} gradient steps in epochs of {per_epoch} steps"
            ),
        )
        if train.steps_per_epoch == 0:
            train = dataclasses.replace(
                train,
                steps_per_epoch=choose(
                    "train.steps_per_epoch",
                    per_epoch,
                    f"one pass over the training rows, at least {MIN_STEPS_PER_EPOCH} steps",
                ),
            )
    if train.view_net_steps == AUTO_VIEW_NET_STEPS:
        whole = m >= shape.n_train
        train = dataclasses.replace(
            train,
            view_net_steps=choose(
                "train.view_net_steps",
                VIEW_NETS_UNTIL_STALL if whole else 0,
                "the whole training set is one batch: the view nets train until their validation loss has not "
                "improved for train.view_net_patience epochs, then only the weighting net and R^-1 train, on the "
                "frozen nets' outputs"
                if whole
                else "mini-batches: the view nets train throughout",
            ),
        )
    if model.view_hidden == AUTO_WIDTHS:
        model = dataclasses.replace(
            model,
            view_hidden=choose(
                "model.view_hidden",
                hidden_widths(shape.n_train),
                f"by training rows ({shape.n_train}): 512-512-256 below 1500, 256-256-128 while the whole set is one "
                f"batch (a step grows with n x width^2), 512-512-256 with mini-batches, 1024-1024-512 from 50000",
            ),
        )
    if model.output_rows == AUTO:
        rows = auto_output_rows(bool(shape.views_missing))
        if shape.views_missing:
            choose(
                "model.output_rows",
                rows,
                "views are missing: a sample's row norm depends on which views it has, not only on its "
                "cluster, so the embedding's rows are scaled to unit norm",
            )
        model = dataclasses.replace(model, output_rows=rows)  # complete data: raw, as trained (not recorded)
    siamese = config.siamese
    if siamese.positives == AUTO:
        siamese = _resolve_siamese_positives(siamese, shape, graph.n_neighbors, m, choose)
    resolved = dataclasses.replace(config, model=model, graph=graph, train=train, siamese=siamese)
    return resolved, chosen


def _resolve_siamese_positives(
    siamese: SiameseConfig, shape: DataShape, l: int, batch_rows: int, choose: Any
) -> SiameseConfig:
    """``siamese.positives`` auto (opt-in; the default is own): joint where views are missing and
    the samples that have every view split into k groups clearly more cleanly under all views
    together than under the mean of the views' own graphs (:func:`joint_split_scores`,
    :func:`joint_is_clearly_cleaner`); the Siamese nets are then enabled. Own otherwise; complete
    data: own, unrecorded (the paper's). Not the default: on BDGP it lifts p 0.5 from 0.916 to
    0.930 over 5 seeds, but k-means merged two classes at p 0.1 (BUILD_NOTES)."""
    if not shape.views_missing or shape.views is None:
        return dataclasses.replace(siamese, positives="own")
    joint, own = joint_split_scores(shape.views, shape.n_clusters, batch_rows, l, seed=shape.seed)
    scores = f"eigengap of the samples with every view: joint graph {joint:.3g}, mean of the views' graphs {own:.3g}"
    if not joint_is_clearly_cleaner(joint, own):
        choose(
            "siamese.positives",
            "own",
            f"views are missing, but all views together do not split the samples clearly more cleanly than each "
            f"view's own neighbours ({scores}; joint needs >= {CLEAR_EIGENGAP} and {GAP_GAIN:g}x the gap)",
        )
        return dataclasses.replace(siamese, positives="own")
    choose(
        "siamese.positives",
        "joint",
        f"views are missing and all views together split the samples clearly more cleanly ({scores}): each view's "
        "Siamese net learns the joint neighbours, so a sample seen through one view gets the neighbours its other "
        "views would have given it",
    )
    if not siamese.enabled:
        choose("siamese.enabled", True, "views are missing: the joint positives need the Siamese nets")
    return dataclasses.replace(siamese, positives="joint", enabled=True)


def describe_preprocessing(kinds: Sequence[str], requested: str) -> dict[str, Any]:
    """The record entry for ``data.preprocess``: the kind each view was given."""
    if requested != "auto":
        return {}
    return {
        "data.preprocess": {
            "value": list(kinds),
            "why": (
                "per view: where fewer than data.sparse_below of the entries are nonzero, svd_l2 if wider "
                "than data.svd_components, else idf_l2; standard_l2 for dense views"
            ),
        }
    }


def format_choices(chosen: dict[str, Any]) -> list[str]:
    """One line per resolved setting, for logs and the CLI."""
    return [f"{key} = {entry['value']}  ({entry['why']})" for key, entry in chosen.items()]
