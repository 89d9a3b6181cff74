"""Views unrelated to the others: left out of the fit (``data.unrelated_views=leave_out``).

Multi-view clustering rests on the views sharing one structure. A view that shares nothing
with any other view and has no cluster structure of its own (a sensor that records noise, a
column block of random features) still enters the mean of the views' kNN graphs, and its
near-random graph moves the eigen-directions the loss is minimized by. Measured on Handwritten
(views 0 and 2) with a third view of Gaussian noise: 0.954 -> 0.802 with the default estimator
(BUILD_NOTES, "Views unrelated to the others").

A view is unrelated when all three hold, on a seeded batch of the training rows:

* **no shared neighbourhoods**: for every other view, the number of entries its
  AGREEMENT_NEIGHBORS-NN lists share with that view's lists lies less than INDEPENDENCE_Z
  standard deviations above what they share when the other view's samples are relabelled at
  random (:func:`neighbor_overlap_z`): within chance;
* **where a relation would show**: two other views share theirs at z_others >= INDEPENDENCE_Z,
  beyond chance, so the batch shows a relation at all. On a few dozen rows related views look
  independent too (20newsgroups subsampled to 45 rows: every pair under 3), and so does any pair
  of two views: with two views nothing is left out. One bar for both tests, three sigma: a
  relation is a z at or above it, none a z below it. A bar scaled down with the other views'
  relation (a third of their z) kept noisy views on small subsamples that cost their fit more
  than they gave (BUILD_NOTES, "Views unrelated to the others");
* **no structure of its own**: its own kNN graph splits the batch into k groups no more cleanly
  than the best of the other views' graphs does, nor than SUSTAINED_EIGENGAP (lambda_k+1 /
  lambda_k, the bar below which the neighbour rule reads no modest gap either), at any candidate
  l. This keeps a narrow, informative view whose neighbours the other (noisier) views do not
  share: such a view splits into k groups more cleanly than any of them.

A view is also left out, whatever it shares, when its own graph shows **no cluster structure
beside a clear split**: its best eigengap over the candidate l stays under SUSTAINED_EIGENGAP
while a kept view's graph splits the batch clearly (at least CLEAR_EIGENGAP, the neighbour
rule's bar for a clear split), and only where the views' own graphs read unambiguously: no kept
view holds a modest split between the two bars. Two views that are each other's noisy copy
share their neighbourhoods with each other, so the first test keeps both, and together they
outvote an informative view in the mean graph; the eigengap of their own graphs shows that
their shared neighbourhoods hold no k groups. A view with a modest split of its own says the
weaker views may carry part of the classes, and then every view stays: the 3-wide informative
view of digits and Handwritten beside two noise-padded wide ones, where leaving out the weaker
wide view cost 0.02-0.2 (BUILD_NOTES, "Views unrelated to the others").

The rule needs complete training data and at least three views, and always keeps two views, so
the fit stays multi-view. Views that share nothing go first (two other views relate, so two
always stay); then views without structure, the least structured first, while more than two
remain.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specrage_jax.training.graph_probes import (
    NeighborLists,
    bottom_normalized_spectrum,
    eigengap_score,
    mean_graph,
    present_neighbor_lists,
)
from specrage_jax.training.graph_rules import (
    AGREEMENT_NEIGHBORS,
    CLEAR_EIGENGAP,
    NEIGHBOR_CANDIDATES,
    SUSTAINED_EIGENGAP,
)

INDEPENDENCE_Z = 3.0  # shared neighbour-list entries within this many standard deviations of chance
NULL_PERMUTATIONS = 100  # relabellings of a view's rows that give the overlap of unrelated views


@dataclass(frozen=True)
class ViewRelation:
    """What the rule read for one view: the largest overlap z against any other view, the
    largest between two other views, the best eigengap score of its own graph over the
    candidate l and the best of the other views' own graphs."""

    view: int
    overlap_z: float
    others_z: float
    own_eigengap: float
    others_eigengap: float = math.nan

    @property
    def shares_nothing(self) -> bool:
        """Tests 1 and 2: two other views share their neighbours beyond chance, and this view's
        share with every other view stays within chance."""
        return self.others_z >= INDEPENDENCE_Z and self.overlap_z < INDEPENDENCE_Z

    @property
    def structure_bar(self) -> float:
        """The eigengap score its own graph must reach to be kept: the best other view's, at least
        SUSTAINED_EIGENGAP."""
        return SUSTAINED_EIGENGAP if math.isnan(self.others_eigengap) else max(SUSTAINED_EIGENGAP, self.others_eigengap)

    @property
    def unrelated(self) -> bool:
        return self.shares_nothing and self.own_eigengap < self.structure_bar

    @property
    def rule(self) -> str:
        """The branch that leaves the view out: "unrelated view" or "no structure"."""
        return "unrelated view" if self.unrelated else "no structure"

    def reason(self) -> str:
        """Why the view is left out, in words, with the numbers read."""
        if not self.unrelated:
            return (
                f"its own kNN graph shows no k groups (eigengap {self.own_eigengap:.3f} at best, below "
                f"{SUSTAINED_EIGENGAP:g}) while another view's splits the rows clearly "
                f"({self.others_eigengap:.3f}, at least {CLEAR_EIGENGAP:g}) and no view holds a modest split "
                "between the two"
            )
        return (
            f"its {AGREEMENT_NEIGHBORS}-NN lists share no more entries with any other view's than chance "
            f"(overlap z {self.overlap_z:.1f} at most, below {INDEPENDENCE_Z:g}), while two other views share "
            f"theirs at z {self.others_z:.1f} "
            f"and its own kNN graph splits the rows less cleanly than the other views' "
            f"(eigengap {self.own_eigengap:.3f} at best, below {self.structure_bar:.3f})"
        )


def shared_neighbor_entries(left: np.ndarray, right: np.ndarray) -> int:
    """How many entries two (q, l) neighbour lists of the same rows have in common, row by row."""
    return int(np.sum(left[:, :, None] == right[:, None, :]))


def neighbor_overlap_z(
    left: np.ndarray, right: np.ndarray, *, permutations: int = NULL_PERMUTATIONS, seed: Sequence[int] = (0,)
) -> float:
    """How far the entries two views' neighbour lists of the same m rows (left, right: (m, l)
    row indices) share lie above chance, in standard deviations of what unrelated views share:
    (shared - mean) / std over ``permutations`` seeded relabellings of the right view's rows
    (which sample is which, shuffled; its lists' own structure kept). About 0 for unrelated views.
    The binomial null (p = l / (m - 1) per entry) has too small a variance for kNN lists: 10.0
    against the relabellings' 12.4 on 432 rows of blobs beside a view of noise."""
    observed = shared_neighbor_entries(left, right)
    rng = np.random.default_rng(list(seed))
    null = []
    for _ in range(permutations):
        order = rng.permutation(left.shape[0])  # row i of the relabelled view is row order[i], its neighbours renamed
        null.append(shared_neighbor_entries(left, np.argsort(order)[right[order]]))
    spread = float(np.std(null))
    return (observed - float(np.mean(null))) / spread if spread > 0 else math.inf


def own_eigengap(neighbors: NeighborLists, v: int, m: int, n_clusters: int) -> float:
    """The best eigengap score (:func:`~specrage_jax.training.graph_probes.eigengap_score`) of view
    v's own l-NN graph over the candidates l (up to a third of the batch and its neighbour lists);
    +inf for a graph in exactly k components, -inf where no candidate fits."""
    available = neighbors[v][2].shape[1]
    scores = [
        eigengap_score(bottom_normalized_spectrum(mean_graph([neighbors[v]], m, l), n_clusters + 1), n_clusters)
        for l in NEIGHBOR_CANDIDATES
        if l <= min(m // 3, available)
    ]
    return max(scores, default=-math.inf)


def view_relations(views: Sequence[np.ndarray], n_clusters: int, *, seed: int = 0) -> tuple[ViewRelation, ...]:
    """One :class:`ViewRelation` per view of complete training rows ``views`` (m, d_v each, as the
    graph sees them: the caller's batch); empty with fewer than three views or a batch too small
    for the candidate graphs. The relations are the data's, read from float64 kNN lists whose
    ties fall by rounding, not by row order."""
    m = views[0].shape[0]
    l = max((c for c in NEIGHBOR_CANDIDATES if c <= m // 3), default=0)
    if len(views) < 3 or l < AGREEMENT_NEIGHBORS or n_clusters >= m - 1:
        return ()
    # Complete rows: indices are batch rows. The float64 search, not the loss's: in float32 rows
    # tied at a distance are ranked by row index, an order every view shares, so the views' lists
    # overlap by row order (WebKB's link view: z 0.2-4.1 over four row orders and seeds 0-4, -0.3-1.7 here).
    neighbors = present_neighbor_lists(views, np.arange(m), l, as_trained=False)
    lists = [idx[:, :AGREEMENT_NEIGHBORS] for _, _, idx in neighbors]
    n_views = len(views)
    z = np.full((n_views, n_views), -math.inf)
    for a in range(n_views):
        for b in range(a + 1, n_views):
            z[a, b] = z[b, a] = neighbor_overlap_z(lists[a], lists[b], seed=(seed, a, b))
    relations = []
    for v in range(n_views):
        others = [w for w in range(n_views) if w != v]
        relations.append(
            ViewRelation(
                view=v,
                overlap_z=float(z[v, others].max()),
                others_z=float(max(z[a, b] for a in others for b in others if a < b)),
                own_eigengap=math.nan,
            )
        )
    gaps = [own_eigengap(neighbors, v, m, n_clusters) for v in range(n_views)]
    return tuple(
        dataclasses.replace(
            r, own_eigengap=gaps[r.view], others_eigengap=max(g for w, g in enumerate(gaps) if w != r.view)
        )
        for r in relations
    )


def unrelated_views(relations: Sequence[ViewRelation]) -> tuple[int, ...]:
    """The views the rule leaves out, ascending: the unrelated ones (two other views relate, so at
    least two stay); then, where the kept views' own graphs read unambiguously (each splits the
    batch clearly or shows no k groups: none holds a modest split between SUSTAINED_EIGENGAP and
    CLEAR_EIGENGAP) and one splits clearly, those without structure, the lowest own eigengap
    first, while more than two views remain."""
    unrelated = [r.view for r in relations if r.unrelated]
    if len(unrelated) >= len(relations) - 1:  # measured relations never come to this; built ones may
        return ()
    kept = sorted((r for r in relations if r.view not in unrelated), key=lambda r: (r.own_eigengap, r.view))
    modest = any(SUSTAINED_EIGENGAP <= r.own_eigengap < CLEAR_EIGENGAP for r in kept)
    clear = any(r.own_eigengap >= CLEAR_EIGENGAP for r in kept)
    structureless = [r.view for r in kept if r.own_eigengap < SUSTAINED_EIGENGAP] if clear and not modest else []
    return tuple(sorted([*unrelated, *structureless[: len(kept) - 2]]))
