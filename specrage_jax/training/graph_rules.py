"""The data-aware rules that read the training rows' batch graphs: the kNN graph's number of
neighbours (the eigengap rule), the embedding dimension (the normalized-cut and eigenvalue-tie
rules). The rules for training rows with missing views are in
:mod:`specrage_jax.training.missing_view_rules`. Each returns its choice with the scores
behind it; :func:`specrage_jax.training.defaults.resolve_defaults` applies them. The measurements
they read are in :mod:`specrage_jax.training.graph_probes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from specrage_jax.training.graph_probes import (
    bottom_laplacian_eigenpairs,
    bottom_normalized_spectrum,
    eigengap_score,
    mean_graph,
    partition_ncut,
    present_neighbor_lists,
    seeded_rows,
    view_neighbor_agreement,
)

NEIGHBOR_CANDIDATES = (5, 8, 10, 12, 15, 20, 30)  # the kNN graph's l is chosen among these
CLASS_SHARE_OF_NEIGHBORS = 1.0  # l is below this share of the expected cluster size m / k
EIGENVALUE_GAP = 0.10  # a Laplacian eigenvalue this much (relative) above the one below it: a determined split
GAP_GAIN = 2.0  # "clearly": a gap at least this many times another (the dense graph's; the modest one)
SUSTAINED_RUN = 3  # no clear gap: a run of this many sparser candidates at the modest split takes the run's largest l


class DerivedBars(NamedTuple):
    """The bars computed from the two tuned numbers, named as this module's constants."""

    SUSTAINED_EIGENGAP: float
    CLEAR_EIGENGAP: float
    CLEAR_NCUT_GAIN: float


def derived_bars(eigenvalue_gap: float, gap_gain: float) -> DerivedBars:
    """The bars from the two tuned numbers: a modest split lambda_k+1 / lambda_k >= 1 + gap (what
    a clear gap must keep over the next larger candidates); a clear split GAP_GAIN times that gap;
    more components only where their normalized cut is that much (relative) lower (the relaxed
    cut is the sum of the bottom eigenvalues, so one relative bar serves both)."""
    return DerivedBars(1.0 + eigenvalue_gap, 1.0 + gap_gain * eigenvalue_gap, eigenvalue_gap)


SUSTAINED_EIGENGAP, CLEAR_EIGENGAP, CLEAR_NCUT_GAIN = derived_bars(EIGENVALUE_GAP, GAP_GAIN)
AGREEING_VIEWS = 0.25  # no clear gap: views sharing at least this share of their l-NN lists ...
AGREEMENT_NEIGHBORS = 10  # ... (at this l) take the sparse graph of this l instead of the dense one
MANY_CLUSTERS = 20  # above this many clusters: n_components is k and each batch's graphs are degree-normalized


@dataclass(frozen=True)
class NeighborChoice:
    """The neighbour rule's outcome: l, the branch that decided it and the scores it read.

    rule: "clear gap" (a sparser graph splits the batch clearly cleaner), "sustained gap" (a
    modest gap held over a run of sparser candidates), "agreeing views" (no gap, views that share
    their near neighbours), "dense" (none of these: the largest usable candidate) or "fallback"
    (no candidate fits the batch: l = m // 3)."""

    l: int
    rule: str
    scores: dict[int, float]
    graph: sp.csr_matrix | None = None  # the batch's mean graph at l (None for the fallback)
    agreement: float = math.nan  # the views' shared AGREEMENT_NEIGHBORS-NN (NaN: one view, or shorter lists)

    def _why_dense(self, usable: dict[int, float]) -> str:
        """Why no sparser graph was taken, by the branch of :func:`choose_neighbor_count` reached."""
        dense_score = usable[max(usable)]
        no_clear = (
            f"no sparser l scores >= {CLEAR_EIGENGAP} with {GAP_GAIN:g}x its gap, held "
            f">= {SUSTAINED_EIGENGAP} at one of the next {SUSTAINED_RUN - 1} l"
        )
        if dense_score >= CLEAR_EIGENGAP:
            return f"it splits the batch clearly itself ({dense_score:.3g} >= {CLEAR_EIGENGAP}) and {no_clear}"
        no_run = f"{no_clear}, nor >= {SUSTAINED_EIGENGAP} over {SUSTAINED_RUN} consecutive l"
        if not math.isfinite(self.agreement) and max(usable) < AGREEMENT_NEIGHBORS:
            return f"{no_run}, and the batch is too small for the views' {AGREEMENT_NEIGHBORS}-NN lists"
        if not math.isfinite(self.agreement):
            return f"{no_run}, and one view has no other to agree with"
        if self.agreement < AGREEING_VIEWS:
            return f"{no_run}, and the views share fewer than {AGREEING_VIEWS:.0%} of their neighbours"
        sparse = agreeing_views_l(usable)
        if sparse is None:
            return f"{no_run}; the views agree, but no candidate l is at most {AGREEMENT_NEIGHBORS}"
        return (
            f"{no_clear}; the views agree, but the dense graph holds the modest split itself: every l "
            f"from {sparse} to it scores >= {SUSTAINED_EIGENGAP}, a run of at least {SUSTAINED_RUN}"
        )

    def explain(self) -> str:
        """One sentence: the branch taken and the numbers that decided it."""
        shown = ", ".join(f"{c}: {score:.3g}" for c, score in self.scores.items()) or "none fits the batch"
        usable = usable_scores(self.scores)
        if self.rule == "fallback" or not usable:
            return f"no candidate l fits the batch (eigengap by l: {shown}); l is a third of the batch"
        dense = max(usable)
        shared = (
            f"; views' shared {AGREEMENT_NEIGHBORS}-NN: {self.agreement:.2f}" if math.isfinite(self.agreement) else ""
        )
        if self.rule == "dense":
            return (
                f"the densest usable graph (l {dense}): {self._why_dense(usable)} "
                f"(eigengap lambda_k+1 / lambda_k by l: {shown}{shared})"
            )
        if self.rule == "clear gap":
            return (
                f"l {self.l} splits the batch clearly cleaner than the densest graph (eigengap "
                f"{usable[self.l]:.3g} >= {CLEAR_EIGENGAP}, gap >= {GAP_GAIN:g}x l {dense}'s "
                f"{usable[dense]:.3g}, held >= {SUSTAINED_EIGENGAP} at one of the next {SUSTAINED_RUN - 1} l; "
                f"eigengap by l: {shown})"
            )
        if self.rule == "agreeing views":
            return (
                f"no graph splits the batch clearly (eigengap by l: {shown}), and the views share "
                f"{self.agreement:.0%} of their {AGREEMENT_NEIGHBORS}-NN lists (>= {AGREEING_VIEWS:.0%}): "
                f"the sparse l {self.l} graph keeps fewer edges across clusters"
            )
        return (
            f"the top of a run of >= {SUSTAINED_RUN} consecutive sparser l each scoring >= "
            f"{SUSTAINED_EIGENGAP} with {GAP_GAIN:g}x the gap of l {dense} ({usable[dense]:.3g}); "
            f"eigengap by l: {shown}"
        )


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
    clustering", sec. 8.3): how cleanly it splits into k groups; a candidate whose graph falls
    apart into more than k components scores -inf and is passed over. :func:`choose_neighbor_count`
    decides from the scores. With no candidate left (tiny batches), l = max(1, m // 3).
    """
    choice = neighbor_choice(views, n_clusters, batch_rows, seed=seed, distinct=distinct)
    return choice.l, choice.scores


def neighbor_choice(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, *, seed: int = 0, distinct: bool = True
) -> NeighborChoice:
    """:func:`eigengap_neighbor_count` with the branch taken and the batch's mean graph at the
    chosen l (what :func:`component_count` reads, built once)."""
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
        # how the views agree is the data's, read as the view-relation test reads it (float64:
        # ties fall by rounding, not by the row order every view shares)
        exact = present_neighbor_lists(views, rows, max(candidates), distinct=distinct, as_trained=False)
        agreement = view_neighbor_agreement(exact, m, AGREEMENT_NEIGHBORS)
    decided = choose_neighbor_count(scores, agreement)
    if decided is None:
        return NeighborChoice(max(1, min(m // 3, m - 1)), "fallback", scores, agreement=agreement)
    l, rule = decided
    return NeighborChoice(l, rule, scores, graphs[l], agreement)


def class_size_neighbor_cap(batch_rows: int, n_clusters: int) -> int:
    """The most neighbours l a batch of ``batch_rows`` rows in ``n_clusters`` clusters supports:
    fewer than CLASS_SHARE_OF_NEIGHBORS times the expected cluster size m / k (at least the
    smallest candidate). With l at a cluster's size or above, most of a sample's neighbours lie
    in other clusters, whatever the eigengap of the graph says."""
    below = math.ceil(CLASS_SHARE_OF_NEIGHBORS * batch_rows / max(n_clusters, 1)) - 1
    return max(NEIGHBOR_CANDIDATES[0], below)


def usable_scores(scores: dict[int, float]) -> dict[int, float]:
    """{candidate l: eigengap score} without the candidates whose graph falls apart (-inf)."""
    return {l: score for l, score in scores.items() if score > -math.inf}


def gap_persists(usable: dict[int, float], l: int) -> bool:
    """Whether candidate l's split holds as the graph grows denser: one of the next
    SUSTAINED_RUN - 1 larger candidates of ``usable`` ({l: eigengap score}, l not the largest)
    still scores at least SUSTAINED_EIGENGAP, the modest split the sustained-gap rule asks of a
    run of SUSTAINED_RUN candidates. Cluster structure fades gradually with l, though one
    candidate's score may dip (faces, one seed: 1.71 at l 5, 1.10 at 8, 1.32 at 10); a sparse
    graph's fragments are gone at both next candidates (Handwritten, one split: 1.41, 1.09, 1.02)."""
    ordered = sorted(usable)
    start = ordered.index(l) + 1
    return max(usable[c] for c in ordered[start : start + SUSTAINED_RUN - 1]) >= SUSTAINED_EIGENGAP


def choose_neighbor_count(scores: dict[int, float], agreement: float = math.nan) -> tuple[int, str] | None:
    """(l, rule) from {candidate l: eigengap score} and the views' neighbour ``agreement``
    (:func:`view_neighbor_agreement`); None when no candidate is usable.

    The dense graph (the largest usable candidate) is the default: it is connected, and steady to
    learn from in mini-batches. A sparser graph replaces it only when the data shows a clearly
    cleaner k-way split with it ("clear gap"): a score of at least CLEAR_EIGENGAP whose gap
    (score - 1) is at least GAP_GAIN times the dense graph's, and one of the next
    SUSTAINED_RUN - 1 larger candidates still scores SUSTAINED_EIGENGAP (:func:`gap_persists`); the
    best such score wins (ties: the larger l). Where neither that nor
    the dense graph splits the batch clearly, a modest gap sustained over several consecutive
    sparser candidates takes the largest l of that run ("sustained gap",
    :func:`sustained_gap_neighbor_count`). Where the dense graph itself ends such a run that
    starts at the agreeing views' l (:func:`dense_gap_sustained`), it stays. Else views that share
    at least AGREEING_VIEWS of their AGREEMENT_NEIGHBORS-NN lists take the largest usable l up to
    AGREEMENT_NEIGHBORS ("agreeing views"): each view's near neighbours are already the other
    views', and the sparse graph keeps fewer edges across clusters than the dense one.

    The persistence check asks the clean split to hold over a range of sparsity: the gap of
    cluster structure shrinks gradually as l grows, while a sparse graph's fragments (a class
    falling apart into pieces, two classes joined by a few edges) may split the batch cleanly at
    one l and not at the next, into k groups that are not the clusters."""
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
    if clear:
        best = max(clear.values())
        return max(l for l, score in clear.items() if score == best), "clear gap"
    flat = usable[dense] < CLEAR_EIGENGAP  # the dense graph does not split the batch clearly either
    sustained = sustained_gap_neighbor_count(usable) if flat else None
    if sustained is not None:
        return sustained, "sustained gap"
    sparse = agreeing_views_l(usable)
    if flat and agreement >= AGREEING_VIEWS and sparse is not None and not dense_gap_sustained(usable, sparse):
        return sparse, "agreeing views"
    return dense, "dense"


def agreeing_views_l(usable: dict[int, float]) -> int | None:
    """The l agreeing views take: the largest candidate of ``usable`` ({l: eigengap score}) up to
    AGREEMENT_NEIGHBORS; None where every candidate is larger."""
    sparse = [l for l in usable if l <= AGREEMENT_NEIGHBORS]
    return max(sparse) if sparse else None


def dense_gap_sustained(usable: dict[int, float], sparse: int) -> bool:
    """Whether every candidate of ``usable`` ({l: eigengap score}) from the ``sparse`` l up to
    the dense graph (the largest l) holds the modest split (>= SUSTAINED_EIGENGAP), over a run of
    at least SUSTAINED_RUN candidates: the sustained-gap principle, whose run takes its largest l,
    with the dense graph inside the run. Then the eigengap sees structure over the whole range, and
    the dense graph stays (small agreeing text: 1.12-1.23 at every l from 10 to 30, where l 10
    clustered worse); a range shorter than the run, or one candidate under 1.1, is no such run."""
    run = [l for l in sorted(usable) if l >= sparse]
    return len(run) >= SUSTAINED_RUN and all(usable[l] >= SUSTAINED_EIGENGAP for l in run)


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


@dataclass(frozen=True)
class ComponentChoice:
    """The embedding-dimension rule's outcome: c, the branch that decided it ("clusters": k;
    "many clusters": k, above MANY_CLUSTERS; "cut": more directions cut the graph clearly less;
    "tie": lambda_k+1 ties lambda_k; "sparse graph in doubt": k + 1 beside a sparse graph), the
    normalized cut by candidate c and the bottom Laplacian eigenvalues read."""

    c: int
    rule: str
    cuts: dict[int, float]
    eigenvalues: tuple[float, ...] = ()

    def explain(self, n_clusters: int) -> str:
        """One sentence: the branch taken and the numbers that decided it."""
        k = n_clusters
        shown = ", ".join(f"{c}: {cut:.4g}" for c, cut in self.cuts.items())
        cuts = f"; normalized cut by c: {shown}" if shown else ""
        if self.rule == "many clusters":
            return f"the {k} clusters asked for (more than {MANY_CLUSTERS}: one direction more moves the cut little)"
        if self.rule == "cut":
            return (
                f"{self.c} directions: their k-means partition cuts the batch graph "
                f"{1 - self.cuts[self.c] / self.cuts[k]:.1%} less than {k}'s (the lowest cut at least "
                f"{CLEAR_NCUT_GAIN:.1%} less, and c the count with the lowest){cuts}"
            )
        values = self.eigenvalues
        if self.rule == "tie" and len(values) > k:
            return (
                f"{self.c} directions: lambda_k+1 is less than {EIGENVALUE_GAP:.0%} above lambda_k "
                f"({values[k - 1]:.4g}, {values[k]:.4g}), so c grows to the next gap that large{cuts}"
            )
        if self.rule == "sparse graph in doubt":
            return (
                f"{self.c} directions: the chosen l is sparser than the dense graph, which does not split the "
                f"batch clearly, so the sparse graph's k-way split may join two classes; at least one direction "
                f"more, grown past a tie{cuts}"
            )
        if not self.cuts:
            return f"the {k} clusters asked for (the batch is too small to compare more directions)"
        return f"the {k} clusters asked for: no more directions cut the batch graph {CLEAR_NCUT_GAIN:.1%} less{cuts}"


def batch_component_count(
    views: Sequence[np.ndarray], n_clusters: int, batch_rows: int, l: int, *, seed: int = 0, distinct: bool = True
) -> ComponentChoice:
    """:func:`component_count` on the mean l-NN graph (the training rule) of the seeded batch of
    ``batch_rows`` training rows that the choice of l reads (views (n, d_v), NaN rows missing)."""
    n = views[0].shape[0]
    rows = seeded_rows(n, max(2, min(batch_rows, n)), seed=seed, stream=5)
    neighbors = present_neighbor_lists(views, rows, max(1, min(l, len(rows) - 1)), distinct=distinct)
    if not neighbors:
        return ComponentChoice(n_clusters, "clusters", {})
    return component_count(mean_graph(neighbors, len(rows), max(1, min(l, len(rows) - 1))), n_clusters, seed=seed)


def tie_resolved_count(eigenvalues: np.ndarray, n_clusters: int) -> int:
    """The fewest directions c >= k whose subspace the eigenvalues (ascending, at least k + 1)
    determine: the first c from k with lambda_c+1 at least EIGENVALUE_GAP (relative) above
    lambda_c, or k where none within the eigenvalues given is (a flat spectrum: no c is better
    determined than k). One bar for both sides: a gap under it at k is a tie, and the count
    grows to the first gap that clears it.

    Near a tie lambda_k ~ lambda_k+1, the bottom-k eigen-subspace is ill-determined (a small
    change of the graph rotates it by a large angle; Davis-Kahan), and the loss cannot tell the
    k-th direction from the (k+1)-th: a trained network ends on an arbitrary mix of the two,
    which may miss the direction that separates two clusters. Both directions together are
    well determined when a clear gap follows them."""
    k = n_clusters
    values = np.asarray(eigenvalues, np.float64)

    def relative_gap(c: int) -> float:  # (lambda_c+1 - lambda_c) / lambda_c, 1-based c
        return float((values[c] - values[c - 1]) / max(values[c - 1], 1e-12))

    if len(values) <= k:
        return k
    return next((c for c in range(k, len(values)) if relative_gap(c) >= EIGENVALUE_GAP), k)


def component_count(w: sp.spmatrix, n_clusters: int, *, seed: int = 0, split_in_doubt: bool = False) -> ComponentChoice:
    """The embedding dimension c for k = ``n_clusters`` clusters, the branch that decided it and
    {candidate c: normalized cut}.

    The network learns the bottom eigenvectors of the batch graph's Laplacian, and users run
    k-means with k clusters on them. Two things can make the bottom k miss a direction that
    separates two clusters:

    * no eigengap at k: a split inside one class may cost the graph about as little as the
      split between two classes. For each c from k to 2k (at most one more direction per
      cluster), k-means (k clusters, unit rows) partitions the bottom c eigenvectors of w
      (m, m), and the partition is scored by its normalized cut of w. c stays k unless some c
      cuts the graph at least CLEAR_NCUT_GAIN less (relative); then the count with the lowest
      cut (ties: the fewest);
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

    Above MANY_CLUSTERS clusters c is k: one direction more moves the cut of a
    partition into that many parts far less than the bar (100 clusters: 0.3 %), and the
    k-means runs would cost seconds for nothing.
    """
    k = n_clusters
    m = w.shape[0]
    largest = min(2 * k, m - 2)
    if largest <= k or k > MANY_CLUSTERS:
        return ComponentChoice(k, "many clusters" if k > MANY_CLUSTERS else "clusters", {})
    values, vectors = bottom_laplacian_eigenpairs(w, min(largest + 1, m - 1))
    scores: dict[int, float] = {}
    with threadpool_limits(limits=1, user_api="openmp"):
        for c in range(k, largest + 1):
            z = vectors[:, :c] / np.maximum(np.linalg.norm(vectors[:, :c], axis=1, keepdims=True), 1e-12)
            labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(z)
            scores[c] = partition_ncut(w, labels, k)
    return component_choice_from(scores, values[: largest + 1], k, split_in_doubt=split_in_doubt)


def component_choice_from(
    cuts: dict[int, float], eigenvalues: np.ndarray, n_clusters: int, *, split_in_doubt: bool = False
) -> ComponentChoice:
    """The decision of :func:`component_count` from its measurements: {c: normalized cut} for c
    from k to the largest candidate, and the bottom Laplacian eigenvalues (ascending, one more than
    the largest candidate, fewer where the batch is small)."""
    k = n_clusters
    largest = max(cuts)
    chosen = choose_component_count(cuts, k)
    if chosen != k:
        rule, components = "cut", chosen
    else:
        components = min(tie_resolved_count(eigenvalues, k), largest)
        rule = "tie" if components > k else "clusters"
    doubt = min(tie_resolved_count(eigenvalues, k + 1), largest) if split_in_doubt else k
    if doubt > components:
        components, rule = doubt, "sparse graph in doubt"
    return ComponentChoice(components, rule, cuts, tuple(float(v) for v in eigenvalues))


def choose_component_count(scores: dict[int, float], n_clusters: int) -> int:
    """The cut rule of :func:`component_count` on {c: normalized cut}: k unless the lowest cut is
    at least CLEAR_NCUT_GAIN below k's; then the c with the lowest cut (ties: the smallest)."""
    if not scores:
        return n_clusters
    lowest = min(scores.values())
    if lowest > (1.0 - CLEAR_NCUT_GAIN) * scores[n_clusters]:
        return n_clusters
    return min(c for c, score in scores.items() if score == lowest)
