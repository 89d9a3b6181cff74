"""The neighbour and component rules of the defaults (``training/graph_rules.py``) on synthetic
graphs: eigengap scores, the branches of the neighbour choice and their reasons, normalized cuts
and the embedding dimension."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from specrage_jax.training.graph_probes import (
    bottom_laplacian_eigenvectors,
    eigengap_score,
    partition_ncut,
    present_neighbor_lists,
    view_neighbor_agreement,
)
from specrage_jax.training.graph_rules import (
    ComponentChoice,
    NeighborChoice,
    choose_component_count,
    choose_neighbor_count,
    class_size_neighbor_cap,
    component_count,
    dense_gap_sustained,
    eigengap_neighbor_count,
    gap_persists,
    neighbor_choice,
    sparse_split_in_doubt,
    sustained_gap_neighbor_count,
    tie_resolved_count,
)
from tests.synthetic import clustered


def test_eigengap_score_rewards_a_clean_split_and_rejects_fragments():
    assert eigengap_score(np.array([0.0, 0.1, 0.2, 0.8]), 3) == pytest.approx(4.0)
    assert eigengap_score(np.array([0.0, 0.0, 0.0, 0.5]), 3) == math.inf  # exactly k components
    assert eigengap_score(np.array([0.0, 0.0, 0.0, 0.0]), 3) == -math.inf  # more than k components
    assert eigengap_score(np.array([0.0, 0.1]), 3) == -math.inf  # too few eigenvalues


def test_neighbor_choice_keeps_the_dense_graph_unless_a_sparser_one_is_clearly_cleaner():
    assert choose_neighbor_count({5: 1.12, 10: 1.03, 30: 1.04})[0] == 30  # a weak gap: stay dense
    assert choose_neighbor_count({5: 1.57, 8: 1.28, 10: 1.1, 30: 1.09})[0] == 5  # clearly cleaner at 5 (and 8)
    # clean at one l only, gone at the next: fragments, not clusters (Handwritten, one seed's split)
    assert choose_neighbor_count({5: 1.414, 8: 1.088, 10: 1.018, 12: 1.032, 15: 1.04, 20: 1.023, 30: 1.051})[0] == 30
    assert choose_neighbor_count({5: 1.46, 10: 1.45, 30: 1.35})[0] == 30  # cleaner, but not twice the gap
    assert choose_neighbor_count({5: 1.6, 8: 1.6, 10: 1.3, 30: 1.1})[0] == 8  # ties go to the larger l
    assert choose_neighbor_count({5: 1.22, 8: 1.16, 10: 1.13, 12: 1.07})[0] == 5  # the gap shrinks gradually
    # one dip is not the end of the gap: one of the next two candidates still splits modestly (>= 1.1)
    # (faces, one seed; with the next candidate alone this went to the agreeing views' l 10, 0.418 vs 0.603)
    faces = {5: 1.709, 8: 1.098, 10: 1.316, 12: 1.098, 15: 1.259, 20: 1.012, 30: 1.041}
    assert gap_persists(faces, 5) and choose_neighbor_count(faces, 0.41)[0] == 5
    assert not gap_persists({5: 1.414, 8: 1.088, 10: 1.018, 30: 1.05}, 5)  # gone at both: fragments
    assert gap_persists({5: 1.3, 8: 1.0, 30: 1.12}, 5)  # the window reaches the dense graph itself
    # a clear gap at l 5 whose next candidates fall below a modest split (WebKB with copied views, one seed)
    webkb = {5: 1.206, 8: 1.066, 10: 1.088, 12: 1.075, 15: 1.064, 20: 1.057, 30: 1.039}
    assert not gap_persists(webkb, 5) and choose_neighbor_count(webkb, 0.14) == (30, "dense")
    assert choose_neighbor_count({5: -math.inf, 10: 1.3})[0] == 10
    assert choose_neighbor_count({}) is None


def test_a_modest_gap_sustained_over_several_sparser_graphs_takes_the_top_of_that_run():
    # digits with a 57 % class and a 3-wide informative view: no candidate reaches 1.2
    imbalanced = {5: 1.126, 8: 1.124, 10: 1.128, 12: 1.134, 15: 1.092, 20: 1.058, 30: 1.038}
    assert sustained_gap_neighbor_count(imbalanced) == 12
    assert choose_neighbor_count(imbalanced, 0.10) == (12, "sustained gap")
    # a gap at one or two l only: fragments (Handwritten, two splits): the agreeing views' l 10
    assert sustained_gap_neighbor_count({5: 1.147, 8: 1.068, 10: 1.03, 30: 1.055}) is None
    assert choose_neighbor_count({5: 1.136, 8: 1.136, 10: 1.083, 12: 1.035, 30: 1.027}, 0.56)[0] == 10
    # each must hold GAP_GAIN times the dense graph's gap, and the dense graph must not split clearly
    assert sustained_gap_neighbor_count({5: 1.15, 8: 1.15, 10: 1.15, 30: 1.09}) is None
    assert choose_neighbor_count({5: 1.15, 8: 1.15, 10: 1.15, 12: 1.15, 30: 1.21})[0] == 30
    # the longer run wins; equal runs: the denser one; one run through the gap: its top
    two = {5: 1.15, 8: 1.15, 10: 1.12, 12: 1.02, 15: 1.11, 20: 1.13, 30: 1.01}
    assert sustained_gap_neighbor_count(two) == 10
    assert sustained_gap_neighbor_count({**two, 25: 1.12}) == 25
    assert sustained_gap_neighbor_count({**two, 12: 1.11}) == 20


def test_agreeing_views_take_the_sparse_graph_where_no_graph_splits_clearly():
    flat = {5: 1.12, 8: 1.05, 10: 1.03, 12: 1.01, 15: 1.01, 20: 1.01, 30: 1.02}  # Handwritten's shape
    assert choose_neighbor_count(flat, 0.55) == (10, "agreeing views")
    assert choose_neighbor_count(flat, 0.10)[0] == 30 and choose_neighbor_count(flat)[0] == 30  # or NaN: one view
    assert choose_neighbor_count({**flat, 30: 1.25}, 0.55)[0] == 30  # the dense graph splits clearly: keep it
    assert choose_neighbor_count({5: 1.1, 8: 1.05}, 0.55)[0] == 8  # the candidates stop below 10
    assert choose_neighbor_count({12: 1.02, 15: 1.01}, 0.55)[0] == 15  # none at or below 10: dense
    assert choose_neighbor_count({5: 1.57, 8: 1.28, 10: 1.1, 30: 1.09}, 0.55)[0] == 5  # a clear gap still wins


def test_a_dense_graph_that_holds_a_modest_split_from_the_sparse_l_up_to_it_stays():
    # small agreeing text: a modest gap at every l from 10 up to the dense graph, none clearly cleaner
    text = {5: 1.06, 8: 1.16, 10: 1.18, 12: 1.16, 15: 1.15, 20: 1.13, 30: 1.12}
    assert dense_gap_sustained(text, 10) and choose_neighbor_count(text, 0.27) == (30, "dense")
    why = NeighborChoice(30, "dense", text, agreement=0.27).explain()
    assert "the views agree, but the dense graph holds the modest split itself: every l from 10" in why
    # one candidate of the range under 1.1 (Handwritten, one split: 1.09 at l 10): no run
    rising = {5: 1.07, 8: 1.02, 10: 1.09, 12: 1.13, 15: 1.16, 20: 1.13, 30: 1.15}
    assert not dense_gap_sustained(rising, 10) and choose_neighbor_count(rising, 0.56) == (10, "agreeing views")
    # a range shorter than SUSTAINED_RUN (16 rows a class, the candidates stop at 12): no run
    short = {5: 1.16, 8: 1.12, 10: 1.11, 12: 1.13}
    assert not dense_gap_sustained(short, 10) and choose_neighbor_count(short, 0.72) == (10, "agreeing views")


def test_view_neighbor_agreement_counts_the_shared_neighbours_of_the_rows_with_both_views():
    x, _ = clustered(200, 4, 6, seed=1)
    noise = np.random.default_rng(2).normal(size=(200, 6)).astype(np.float32)
    rows = np.arange(200)

    def agreement(*views: np.ndarray) -> float:
        return view_neighbor_agreement(present_neighbor_lists(views, rows, 10), 200, 10)

    assert agreement(x, 2.0 * x) == pytest.approx(1.0)  # the same neighbourhoods (a power-of-two scale is exact)
    assert agreement(x, noise) < 0.15  # unrelated views: about l / m
    assert math.isnan(agreement(x))
    gappy, scaled = x.copy(), 2.0 * x
    gappy[:50] = scaled[:50] = np.nan  # both views missing for 50 samples: the other 150 agree fully
    assert agreement(gappy, scaled) == pytest.approx(1.0)
    assert 0.15 < agreement(x, scaled) < 1.0  # view 0's neighbours include rows that view 1 lacks


def test_the_neighbor_choice_names_its_branch_and_the_scores_that_decided_it():
    x, _ = clustered(300, 3, 5, seed=3)
    choice = neighbor_choice([x], 3, 300)
    assert (choice.l, choice.rule) == choose_neighbor_count(choice.scores, choice.agreement)
    assert choice.graph is not None and choice.graph.shape == (300, 300)
    tiny = neighbor_choice([x[:6]], 3, 6)
    assert tiny.rule == "fallback" and tiny.graph is None and "no candidate" in tiny.explain()
    # each branch says what decided it, and only what is true of the numbers read
    flat = {5: 1.12, 8: 1.05, 10: 1.03, 12: 1.01, 15: 1.01, 20: 1.01, 30: 1.02}
    assert "share 55% of their 10-NN" in NeighborChoice(10, "agreeing views", flat, agreement=0.55).explain()
    assert "fewer than 25%" in NeighborChoice(30, "dense", flat, agreement=0.10).explain()
    assert "one view" in NeighborChoice(30, "dense", flat).explain()
    small = NeighborChoice(8, "dense", {5: 1.08, 8: 1.06}).explain()  # lists shorter than 10: no agreement read
    assert "too small for the views' 10-NN lists" in small and "one view" not in small
    clear_dense = NeighborChoice(30, "dense", {**flat, 30: 1.3}, agreement=0.55).explain()
    assert "splits the batch clearly itself (1.3 >= 1.2)" in clear_dense and "fewer than" not in clear_dense
    above_ten = NeighborChoice(15, "dense", {12: 1.02, 15: 1.01}, agreement=0.55).explain()
    assert "no candidate l is at most 10" in above_ten
    gap = NeighborChoice(5, "clear gap", {5: 1.57, 8: 1.28, 10: 1.1, 30: 1.09}).explain()
    assert "eigengap 1.57 >= 1.2" in gap and "l 30's 1.09" in gap


def test_eigengap_count_on_clusters_and_on_tiny_batches():
    x, _ = clustered(300, 3, 5, seed=3)
    l, scores = eigengap_neighbor_count([x], 3, 300)
    assert l in scores and set(scores) == {5, 8, 10, 12, 15, 20, 30}
    l_tiny, scores_tiny = eigengap_neighbor_count([x[:12]], 3, 12)
    assert 1 <= l_tiny < 12 and all(c <= 4 for c in scores_tiny)


def test_neighbours_stay_below_the_expected_cluster_size():
    assert class_size_neighbor_cap(400, 40) == 9 and class_size_neighbor_cap(1600, 100) == 15
    assert class_size_neighbor_cap(2000, 10) == 199 and class_size_neighbor_cap(50, 40) == 5
    x, _ = clustered(400, 40, 12, seed=7)  # 40 clusters of 10 rows
    l, scores = eigengap_neighbor_count([x], 40, 400)
    assert set(scores) == {5, 8} and l in scores


def test_normalized_cut_of_a_partition_matches_its_definition():
    rng = np.random.default_rng(0)
    w = rng.random((30, 30)) * (rng.random((30, 30)) < 0.3)
    w = (w + w.T) / 2
    labels = rng.integers(0, 3, 30)
    expected = sum(w[labels == a][:, labels != a].sum() / w[labels == a].sum() for a in range(3))
    assert partition_ncut(sp.csr_matrix(w), labels, 3) == pytest.approx(expected, rel=1e-12)
    assert partition_ncut(sp.csr_matrix(w), np.zeros(30, int), 3) == 0.0  # one part, empty others


def test_laplacian_eigenvectors_are_the_bottom_ones_by_dense_and_sparse_solvers():
    x, _ = clustered(700, 4, 5, seed=8)  # above the dense limit: ARPACK
    w = sp.csr_matrix(np.exp(-np.square(x[:, None] - x[None]).sum(-1) / 8.0))
    laplacian = np.diag(np.asarray(w.sum(1)).ravel()) - w.toarray()
    values, vectors = np.linalg.eigh(laplacian)
    found = bottom_laplacian_eigenvectors(w, 6)
    assert found.shape == (700, 6)
    rayleigh = np.diag(found.T @ laplacian @ found)
    np.testing.assert_allclose(rayleigh, values[:6], rtol=1e-5, atol=1e-8)
    small = bottom_laplacian_eigenvectors(sp.csr_matrix(w.toarray()[:100, :100]), 3)
    assert small.shape == (100, 3)


def test_component_count_keeps_k_unless_more_directions_cut_the_graph_clearly_less():
    assert choose_component_count({5: 1.0, 6: 0.97, 7: 0.96}, 5) == 5  # 4 % less: not clear
    assert choose_component_count({5: 1.0, 6: 0.86, 7: 0.85, 8: 0.80}, 5) == 8
    assert choose_component_count({5: 1.0, 6: 0.855, 7: 0.85, 8: 0.851}, 5) == 7  # the lowest cut, however close
    assert choose_component_count({5: 1.0, 6: 0.85, 7: 0.85}, 5) == 6  # ties: the fewest
    assert choose_component_count({}, 3) == 3
    x, _ = clustered(200, 4, 6, seed=9)  # clean clusters: k directions already split them
    w = sp.csr_matrix(np.exp(-np.square(x[:, None] - x[None]).sum(-1) / 2.0))
    choice = component_count(w, 4)
    assert choice.c == 4 and set(choice.cuts) == {4, 5, 6, 7, 8} and choice.rule == "clusters"
    assert "the 4 clusters asked for" in choice.explain(4)


def test_the_component_choice_explains_the_cut_it_read():
    cut = ComponentChoice(7, "cut", {5: 1.0, 6: 0.9, 7: 0.85})
    assert "7 directions" in cut.explain(5) and "15.0% less than 5's" in cut.explain(5)
    assert "5: 1, 6: 0.9, 7: 0.85" in cut.explain(5)
    assert "more than 20" in ComponentChoice(40, "many clusters", {}).explain(40)
    assert "too small" in ComponentChoice(3, "clusters", {}).explain(3)


def test_a_tie_at_k_grows_the_dimension_to_the_next_gap_that_clears_the_bar():
    # lambda_10 = 2.555 and lambda_11 = 2.561 tie (0.2 %); 2.939 is 15 % above: both directions, c = 11
    spectrum = np.array([0.0, 0.36, 0.5, 0.72, 0.9, 1.13, 1.58, 1.77, 1.92, 2.555, 2.561, 2.939, 3.1])
    assert tie_resolved_count(spectrum, 10) == 11
    assert tie_resolved_count(spectrum, 9) == 9  # 2.555 is 33 % above 1.92: no tie at 9
    flat = np.array([0.0, 8.0, 8.3, 8.33, 8.5, 8.55, 8.7, 8.8, 8.9])  # ties all along: no c is better than k
    assert tie_resolved_count(flat, 4) == 4
    assert tie_resolved_count(spectrum[:10], 10) == 10  # too few eigenvalues to see a tie
    # one bar both ways: lambda_4 5 % above lambda_3 is not a gap, lambda_5 24 % above lambda_4 is
    assert tie_resolved_count(np.array([0.0, 0.5, 1.0, 1.05, 1.3]), 3) == 4


def test_component_count_resolves_a_tie_the_cuts_do_not_see():
    # three copies of one blob, 120 degrees apart: the graph's 2nd and 3rd eigenvalues tie exactly
    # (rotation symmetry), then a clear gap. Asked for 2 clusters, the bottom 2 directions are
    # any mix of the two tied ones; the rule keeps both.
    blob = np.random.default_rng(3).normal(scale=0.6, size=(30, 2)) + [0.0, 4.0]
    turns = [np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]) for a in (0.0, 2 * np.pi / 3, 4 * np.pi / 3)]
    x = np.concatenate([blob @ r.T for r in turns])
    w = sp.csr_matrix(np.exp(-np.square(x[:, None] - x[None]).sum(-1) / 2.0))
    values = np.linalg.eigvalsh(np.diag(np.asarray(w.sum(1)).ravel()) - w.toarray())
    assert abs(values[2] - values[1]) < 1e-6 * values[1] and values[3] > 1.5 * values[2]
    assert component_count(w, 2).c == 3 and component_count(w, 2).rule == "tie"
    assert "lambda_k+1 is less than 10% above lambda_k" in component_count(w, 2).explain(2)
    assert component_count(w, 3).c == 3  # no tie at 3


def test_a_sparse_split_is_in_doubt_only_where_the_dense_graph_does_not_split_clearly():
    assert sparse_split_in_doubt(5, {5: 1.5, 8: 1.3, 30: 1.1})
    assert not sparse_split_in_doubt(30, {5: 1.5, 8: 1.3, 30: 1.1})  # the dense graph itself
    assert sparse_split_in_doubt(8, {5: 1.5, 8: 1.3, 10: 1.1, 30: -math.inf})  # 10 is the densest usable
    assert not sparse_split_in_doubt(10, {5: 1.5, 8: 1.3, 10: 1.1, 30: -math.inf})
    assert not sparse_split_in_doubt(5, {5: 1.9, 30: 1.25})  # the dense graph splits clearly too: they agree
    assert not sparse_split_in_doubt(5, {5: math.inf, 30: 1.1})  # exactly k components: k-means finds them
    assert not sparse_split_in_doubt(5, {})


def test_beside_a_sparse_graph_the_dimension_is_at_least_one_more_than_k():
    x, _ = clustered(200, 4, 6, seed=9)  # clean clusters: k directions split them, c = k alone
    w = sp.csr_matrix(np.exp(-np.square(x[:, None] - x[None]).sum(-1) / 2.0))
    assert component_count(w, 4).c == 4
    # the within-cluster eigenvalues 16.9, 17.1, 17.9, 18.4, 18.9 tie all along: no count past
    # k + 1 is better determined, so k + 1
    doubt = component_count(w, 4, split_in_doubt=True)
    assert doubt.c == 5 and doubt.rule == "sparse graph in doubt"
