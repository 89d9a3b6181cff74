"""Data-aware defaults: the resolution rules on synthetic data of each kind, the per-view
preprocessing they pick, the whole-set training path they select, and end to end on a real
dataset that the old fixed defaults collapsed on."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans

from specrage_jax import SpecRaGE
from specrage_jax.config import (
    AUTO_WIDTHS,
    VIEW_NETS_UNTIL_STALL,
    ExperimentConfig,
    GraphConfig,
    OrthoConfig,
)
from specrage_jax.data.loaders import load_mat
from specrage_jax.data.preprocess import (
    auto_view_choice,
    auto_view_kind,
    fit_view_scalers,
    graph_input_views,
    is_composition,
    scaler_from_tree,
)
from specrage_jax.evaluation.metrics import clustering_accuracy
from specrage_jax.nets.state import create_state
from specrage_jax.ops.laplacian import edge_laplacian_loss, weighted_laplacian_loss
from specrage_jax.ops.objective import batch_affinities, edge_graph
from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.training import defaults as data_rules
from specrage_jax.training import missing_view_rules
from specrage_jax.training.defaults import (
    DataShape,
    budget_epochs,
    degree_normalization_rule,
    epoch_steps,
    full_batch_size,
    hidden_widths,
    resolve_defaults,
)
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
from specrage_jax.training.missing_view_rules import (
    batch_for_missing_views,
    joint_is_clearly_cleaner,
    joint_split_scores,
)
from specrage_jax.training.steps import (
    Batch,
    full_batch_epoch,
    full_batch_step,
    train_step,
)
from tests.fixed_sections import FIXED, fixed_graph, fixed_model

DEVSUITE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "devsuite"


def sparse_counts(n: int, d: int, *, seed: int, density: float = 0.03) -> np.ndarray:
    """A bag-of-words-like view: non-negative integer counts, mostly zero."""
    rng = np.random.default_rng(seed)
    return (rng.random((n, d)) < density) * rng.integers(1, 5, size=(n, d))


def clustered(n: int, k: int, d: int, *, seed: int, spread: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, d), labels (n,)): k well separated Gaussian clusters."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = rng.standard_normal((k, d)) * 3.0
    return centres[labels] + spread * rng.standard_normal((n, d)), labels


# --- per-view preprocessing --------------------------------------------------------------------


def test_auto_picks_svd_for_sparse_views_and_standard_l2_for_dense_ones():
    counts = sparse_counts(120, 300, seed=0)
    dense, _ = clustered(120, 3, 20, seed=0)
    assert auto_view_kind(counts) == "svd_l2"
    assert auto_view_kind(dense) == "standard_l2"
    assert auto_view_kind(dense[:, :1]) == "standard"  # one feature: unit rows would all be +-1
    assert auto_view_kind(dense[:, :3]) == "standard"  # on a circle or sphere outliers fold onto the data
    assert auto_view_kind(dense[:, :4]) == "standard_l2"
    assert auto_view_kind(np.zeros((120, 30))) == "standard"  # a constant view: nothing to reduce
    assert auto_view_kind(counts, sparse_below=0.01) == "standard_l2"  # the threshold is a setting
    assert auto_view_kind(counts[:, :80]) == "idf_l2"  # sparse but no wider than the SVD's rank
    assert auto_view_kind(counts[:, :80], svd_components=50) == "svd_l2"  # ... which is a setting


def test_auto_says_which_branch_chose_each_view_with_its_numbers():
    counts = sparse_counts(120, 300, seed=0)
    nonzero = f"{np.count_nonzero(counts) / counts.size:.1%} nonzero (< 10%)"
    assert auto_view_choice(counts) == ("svd_l2", f"300 features, {nonzero}, wider than 100: svd_l2")
    assert auto_view_choice(counts[:, :80])[1].endswith("at most 100 wide: idf_l2")
    assert auto_view_choice(np.zeros((120, 30)))[1] == "30 features, constant over 120 rows: standard"
    assert auto_view_choice(np.ones((120, 3)))[1] == "3 features (fewer than 4): standard"


def test_auto_maps_dense_compositions_to_their_square_roots_on_the_unit_sphere():
    """Rows of one total (proportions, normalized histograms, counts over a fixed number of draws):
    the Hellinger map, not a per-feature standardization that would inflate rare bins."""
    rng = np.random.default_rng(0)
    proportions = rng.dirichlet(np.ones(10), size=120)
    assert is_composition(proportions) and auto_view_kind(proportions) == "hellinger"
    scaler = fit_view_scalers([proportions], "auto")[0]
    rows = scaler.transform(proportions)
    np.testing.assert_allclose(rows, np.sqrt(proportions), rtol=1e-5)  # sqrt of a row summing to 1 has norm 1
    np.testing.assert_allclose(rows[:5] @ rows[:5].T, np.sqrt(proportions[:5]) @ np.sqrt(proportions[:5]).T, rtol=1e-5)
    assert np.isfinite(scaler.transform(proportions - 0.5)).all()  # a new row's negative entry: no NaN
    restored = scaler_from_tree(scaler.as_tree(), default_kind="auto")
    np.testing.assert_array_equal(restored.transform(proportions), rows)
    old_tree = {**scaler.as_tree(), "flags": np.asarray([1, 0], np.int32)}  # saved before the third flag
    assert not scaler_from_tree(old_tree, default_kind="auto").sqrt_entries
    histograms = rng.multinomial(37, np.full(20, 0.05), size=120).astype(float)  # 37 draws per row
    assert auto_view_kind(histograms) == "hellinger"
    with_missing = proportions.copy()
    with_missing[:5] = np.nan  # rows of a missing view say nothing
    assert is_composition(with_missing)
    jittered = proportions * (1.0 + 0.01 * rng.random((120, 1)))  # totals 1 % apart: not one total
    assert not is_composition(jittered) and auto_view_kind(jittered) == "standard_l2"
    signed = proportions - 0.05  # totals equal, but entries below 0
    assert not is_composition(signed)
    sparse = np.zeros((120, 300))
    sparse[np.arange(120), rng.integers(0, 300, 120)] = 1.0  # one-hot rows: one total, but sparse
    assert auto_view_kind(sparse) == "svd_l2"


def test_every_scaler_kind_can_be_set_as_data_preprocess():
    """The config accepts what the scalers fit (one list), so a kind auto picks can also be set."""
    rng = np.random.default_rng(0)
    proportions = rng.dirichlet(np.ones(10), size=40)
    for kind in ("hellinger", "idf_l2", "svd_l2", "standard_l2"):
        config = apply_overrides(ExperimentConfig(), [f"data.preprocess={kind}"])
        scaler = fit_view_scalers([proportions], config.data.preprocess, svd_components=5)[0]
        assert scaler.kind == kind and np.isfinite(scaler.transform(proportions)).all()


def test_idf_scaler_weights_rare_terms_up_and_keeps_empty_rows_empty():
    x = np.zeros((10, 4))
    x[:, 0] = 1.0  # a term in every row
    x[:2, 1] = 1.0  # a term in two rows
    x[:5, 2] = 1.0
    x[9] = 0.0  # an empty row
    (scaler,) = fit_view_scalers([x], "idf_l2")
    out = scaler.transform(x)
    assert scaler.kind == "idf_l2" and out.shape == (10, 4) and out.dtype == np.float32
    assert np.all(out[9] == 0.0)  # no centring: empty stays empty (standard_l2 would move it)
    np.testing.assert_allclose(np.linalg.norm(out[:9], axis=1), 1.0, rtol=1e-6)
    assert out[0, 1] > out[0, 2] > out[0, 0] > 0.0  # rarer term, larger weight in the same row
    assert scaler.transform(x[:3]).tolist() == out[:3].tolist()  # fitted once, applied row by row


def test_svd_scaler_reduces_to_unit_rows_and_round_trips():
    counts = sparse_counts(150, 400, seed=1)
    (scaler,) = fit_view_scalers([counts], "auto", svd_components=100)
    assert scaler.kind == "svd_l2" and scaler.in_dim == 400 and scaler.out_dim == 100
    out = scaler.transform(counts)
    assert out.shape == (150, 100) and out.dtype == np.float32
    norms = np.linalg.norm(out, axis=1)
    np.testing.assert_allclose(norms[norms > 0], 1.0, atol=1e-5)
    restored = scaler_from_tree(scaler.as_tree(), default_kind="auto")
    np.testing.assert_array_equal(restored.transform(counts), out)
    (unreduced,) = graph_input_views([scaler], [counts])
    assert unreduced.shape == (150, 400)  # the graph sees the rows before the projection


def test_short_projected_documents_take_the_graph_of_the_reduced_rows():
    def shape_of(terms: int) -> DataShape:
        counts = sparse_counts(150, 400, seed=3, density=terms / 400)
        (scaler,) = fit_view_scalers([counts], "svd_l2", svd_components=100)
        dense = clustered(150, 3, 10, seed=3)[0]
        return DataShape(
            views=(scaler.transform(counts), dense),
            n_clusters=3,
            unreduced_views=(*graph_input_views([scaler], [counts]), dense),
        )

    short, long = shape_of(8), shape_of(60)
    assert data_rules.projected_document_terms(short) <= data_rules.SHORT_DOCUMENT_TERMS
    assert data_rules.projected_document_terms(long) > data_rules.SHORT_DOCUMENT_TERMS
    assert data_rules.graph_inputs_rule(short, True)[0] == "model"
    assert data_rules.graph_inputs_rule(long, True)[0] == "unreduced"
    assert data_rules.graph_inputs_rule(long, False)[0] == "model"  # mini-batches: always the reduced rows
    nothing_projected = DataShape(views=(np.ones((4, 3)),), n_clusters=2, unreduced_views=(np.ones((4, 3)),))
    assert data_rules.projected_document_terms(nothing_projected) is None
    assert data_rules.graph_inputs_rule(nothing_projected, True)[0] == "unreduced"


def test_svd_rank_is_capped_by_rows_and_width():
    (scaler,) = fit_view_scalers([sparse_counts(30, 50, seed=2, density=0.05)], "svd_l2", svd_components=100)
    assert scaler.out_dim == 29  # below the number of rows


def test_old_scaler_records_still_load():
    tree = {"offset": np.zeros(3), "scale": np.ones(3)}
    scaler = scaler_from_tree(tree, default_kind="standard_l2")
    assert scaler.unit_rows and scaler.components is None
    np.testing.assert_allclose(np.linalg.norm(scaler.transform(np.ones((2, 3))), axis=1), 1.0, rtol=1e-6)


# --- the resolution rules ----------------------------------------------------------------------


def test_batch_steps_and_widths_follow_the_training_rows():
    assert full_batch_size(203) == 203 and full_batch_size(10_000) == 4096
    assert epoch_steps(183, 183) == 10 and budget_epochs(10) == 40  # small sets: 40 epochs of 10 whole-set steps
    per_epoch = epoch_steps(100_000, 4096)
    assert per_epoch == 25 and budget_epochs(per_epoch) * per_epoch >= 400  # an epoch is never cut short
    assert hidden_widths(200) == (512, 512, 256)
    assert hidden_widths(3000) == (256, 256, 128)  # whole-set steps grow with n: narrower nets
    assert hidden_widths(20_000) == (512, 512, 256) and hidden_widths(60_000) == (1024, 1024, 512)


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

    assert agreement(x, 2.0 * x + 1.0) == pytest.approx(1.0)  # the same neighbourhoods
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


def test_resolution_adds_a_direction_where_it_chose_a_sparse_graph_in_doubt():
    # four overlapping clusters, each of two shifted halves; the second view a noisy copy: no graph
    # splits the batch clearly (scores 1.1-1.14), the views agree, so l 10 of the dense 30
    x, _ = clustered(300, 4, 6, seed=1, spread=3.0)
    x = x + ((np.arange(300) // 4) % 2)[:, None] * np.eye(6)[0]
    noisy = x[:, ::-1] + 0.5 * np.random.default_rng(1).standard_normal(x.shape)
    config, chosen = resolve_defaults(ExperimentConfig(), _shape([x, noisy], 4))
    assert config.graph.n_neighbors == 10 and config.model.n_components >= 5
    assert chosen["graph.n_neighbors"]["rule"] == "agreeing views" and "share" in chosen["graph.n_neighbors"]["why"]
    assert chosen["model.n_components"]["rule"] == "sparse graph in doubt"
    assert "sparser than the dense graph" in chosen["model.n_components"]["why"]
    tight, _ = clustered(300, 4, 6, seed=4, spread=0.3)  # the sparse graphs fall into 4 components
    config, _ = resolve_defaults(ExperimentConfig(), _shape([tight, tight[:, ::-1]], 4))
    assert config.graph.n_neighbors < 30 and config.model.n_components == 4


def _shape(views, k, **kw):
    return DataShape(views=tuple(np.asarray(v, np.float32) for v in views), n_clusters=k, **kw)


def test_resolution_records_every_choice_and_its_reason():
    x, _ = clustered(200, 4, 6, seed=4)
    config, chosen = resolve_defaults(dataclasses.replace(ExperimentConfig()), _shape([x, x[:, ::-1]], 4))
    assert config.unresolved_fields() == []
    assert set(chosen) == {
        "train.batch_size",
        "data.graph_inputs",
        "graph.n_neighbors",
        "train.epochs",
        "train.steps_per_epoch",
        "model.view_hidden",
        "model.n_components",
        "train.view_net_steps",
        "graph.degree_normalization",
    }
    assert config.graph.degree_normalization == "none"  # 4 clusters: each view's graph as built
    assert config.model.n_components >= 4
    assert config.train.batch_size == 200 and config.train.epochs * config.train.steps_per_epoch >= 400
    assert config.train.spectral_init  # the output layers start solved
    assert config.train.view_net_steps == VIEW_NETS_UNTIL_STALL  # the whole set: view nets until the loss stalls
    assert config.graph.n_neighbors == chosen["graph.n_neighbors"]["value"]
    assert all(entry["why"] for entry in chosen.values())
    json.dumps(chosen)  # goes into metrics.json and checkpoints as it is


def test_explicit_values_win_and_presets_are_untouched():
    x, _ = clustered(200, 4, 6, seed=4)
    explicit = apply_overrides(
        ExperimentConfig(),
        ["graph.n_neighbors=7", "train.batch_size=64", "model.view_hidden=(32,)", "model.n_components=3"],
    )
    config, chosen = resolve_defaults(explicit, _shape([x], 4))
    assert (config.graph.n_neighbors, config.train.batch_size, config.model.view_hidden) == (7, 64, (32,))
    assert config.model.n_components == 3
    assert not {"graph.n_neighbors", "model.view_hidden", "model.n_components"} & set(chosen)
    assert chosen["data.graph_inputs"]["value"] == "model"  # mini-batches: the graph is per batch
    assert config.train.view_net_steps == 0 and "mini-batches" in chosen["train.view_net_steps"]["why"]
    digits = preset("digits")
    assert resolve_defaults(digits, _shape([x], 4)) == (as_resolved(digits, "raw"), {})
    assert preset("file:any.mat").unresolved_fields() and preset("file:any.mat").model.view_hidden == AUTO_WIDTHS


def test_resolution_on_tiny_many_class_and_one_view_data():
    x, _ = clustered(12, 3, 4, seed=5)
    config, _ = resolve_defaults(ExperimentConfig(), _shape([x], 3))
    assert config.train.batch_size == 12 and 1 <= config.graph.n_neighbors < 12
    many, _ = clustered(400, 40, 8, seed=6)  # 40 classes of 10 rows
    config, chosen = resolve_defaults(ExperimentConfig(), _shape([many, many * 2.0], 40))
    assert config.graph.n_neighbors <= 8  # below a class's size: at 30, most would lie in other classes
    assert config.model.n_components == 40 and "model.n_components" in chosen  # many clusters: k
    assert config.graph.degree_normalization == "samples"  # many small clusters: the normalized cut
    assert "40 clusters" in chosen["graph.degree_normalization"]["why"]
    sampled = _shape([many[:100]], 40, n_train=50_000)  # a sample standing for many rows
    config, _ = resolve_defaults(ExperimentConfig(), sampled)
    assert config.train.batch_size == 4096 and config.data.graph_inputs == "model"
    assert config.train.view_net_steps == 0  # mini-batch steps: the view nets train throughout


@pytest.mark.parametrize(("n_clusters", "expected"), [(2, "none"), (20, "none"), (21, "samples"), (100, "samples")])
def test_graphs_are_degree_normalized_only_for_many_clusters(n_clusters, expected):
    assert degree_normalization_rule(n_clusters)[0] == expected


def test_an_explicit_degree_normalization_stays_with_many_clusters():
    many, _ = clustered(400, 40, 8, seed=6)
    explicit = apply_overrides(ExperimentConfig(), ["graph.degree_normalization=none"])
    config, chosen = resolve_defaults(explicit, _shape([many, many * 2.0], 40))
    assert config.graph.degree_normalization == "none" and "graph.degree_normalization" not in chosen


def with_missing_views(views: list[np.ndarray], fraction: float, *, seed: int) -> list[np.ndarray]:
    """Copies of the views where a seeded ``fraction`` of the samples lose one random view."""
    rng = np.random.default_rng(seed)
    out = [np.array(v, np.float32) for v in views]
    chosen = np.flatnonzero(rng.random(len(out[0])) < fraction)
    for i, v in zip(chosen, rng.integers(0, len(out), len(chosen))):
        out[v][i] = np.nan
    return out


def test_the_batch_stays_for_complete_data_or_without_growth():
    x, _ = clustered(300, 3, 5, seed=7)
    m, reference, gaps = batch_for_missing_views([x, x * 2.0], 3, 100, 10, 4)
    assert m == 100 and math.isnan(reference) and gaps == {}
    incomplete = with_missing_views([x, x * 2.0], 0.5, seed=8)
    assert batch_for_missing_views(incomplete, 3, 100, 10, 1)[0] == 100


def test_the_batch_doubles_until_its_graph_splits_as_cleanly_as_complete_samples(monkeypatch):
    x, _ = clustered(1000, 3, 5, seed=9)
    views = with_missing_views([x, x * 2.0], 0.5, seed=10)
    complete = np.stack([~np.isnan(v).any(axis=1) for v in views], axis=1).all(axis=1)

    def gap(views, rows, l, n_clusters, distinct=True):  # complete rows: 1.5; a batch with missing views: m / 200
        return 1.5 if complete[rows].all() else len(rows) / 200

    monkeypatch.setattr(missing_view_rules, "batch_eigengap", gap)
    assert batch_for_missing_views(views, 3, 100, 10, 4) == (400, 1.5, {100: 0.5, 200: 1.0, 400: 2.0})
    assert batch_for_missing_views(views, 3, 100, 10, 2)[0] == 200  # the growth factor bounds it
    assert batch_for_missing_views([v[:300] for v in views], 3, 100, 10, 4)[0] == 300  # and the training rows


def test_a_preset_batch_grows_where_views_are_missing_and_the_record_says_why():
    x, _ = clustered(600, 3, 5, seed=11)
    views = with_missing_views([x, x[:, ::-1] * 2.0], 0.5, seed=12)
    explicit = apply_overrides(FIXED, ["train.batch_size=64", "graph.n_neighbors=10"])
    config, chosen = resolve_defaults(explicit, _shape(views, 3))
    assert config.train.batch_size in (64, 128, 256) and "views are missing" in chosen["train.batch_size"]["why"]
    fixed = apply_overrides(explicit, ["train.missing_view_batch_growth=1"])
    config, chosen = resolve_defaults(fixed, _shape(views, 3))
    assert config == as_resolved(fixed, "unit") and set(chosen) == {"model.output_rows"}
    complete = _shape([x, x[:, ::-1] * 2.0], 3)
    assert resolve_defaults(explicit, complete) == (as_resolved(explicit, "raw"), {})


def test_a_grown_batch_keeps_the_steps_of_one_pass_at_the_configured_batch(monkeypatch):
    x, _ = clustered(1000, 3, 5, seed=9)
    views = with_missing_views([x, x * 2.0], 0.5, seed=10)
    monkeypatch.setattr(data_rules, "batch_for_missing_views", lambda *a, **k: (400, 1.5, {100: 0.5, 400: 2.0}))
    explicit = apply_overrides(FIXED, ["train.batch_size=100", "graph.n_neighbors=10", "train.epochs=3"])
    config, chosen = resolve_defaults(explicit, _shape(views, 3))
    assert (config.train.batch_size, config.train.steps_per_epoch, config.train.epochs) == (400, 10, 3)
    assert "as many steps as on complete data" in chosen["train.steps_per_epoch"]["why"]
    set_steps = apply_overrides(explicit, ["train.steps_per_epoch=4"])
    assert resolve_defaults(set_steps, _shape(views, 3))[0].train.steps_per_epoch == 4  # as set
    budget = apply_overrides(explicit, ["train.epochs=0"])  # the step budget: 400 steps at any batch
    config, _ = resolve_defaults(budget, _shape(views, 3))
    assert config.train.steps_per_epoch == 0 and config.train.batch_size == 400  # epochs of one pass, as set
    assert config.train.epochs * math.ceil(1000 / 400) >= 400


def test_an_epoch_is_the_same_work_whether_the_epochs_are_set_or_resolved():
    x, _ = clustered(300, 3, 5, seed=9)
    shape = _shape([x, x * 2.0], 3)
    resolved, chosen = resolve_defaults(ExperimentConfig(), shape)
    assert "train.steps_per_epoch" in ExperimentConfig().unresolved_fields()
    assert (resolved.train.epochs, resolved.train.steps_per_epoch) == (40, 10)  # one batch: 10 steps an epoch
    assert chosen["train.steps_per_epoch"]["rule"] == "fewest steps"
    set_epochs = apply_overrides(ExperimentConfig(), ["train.epochs=5"])
    config, chosen = resolve_defaults(set_epochs, shape)
    assert (config.train.epochs, config.train.steps_per_epoch) == (5, 10) and "train.epochs" not in chosen
    # copying the printed choices back in trains the same steps
    copied = apply_overrides(ExperimentConfig(), [f"train.epochs={resolved.train.epochs}"])
    again = resolve_defaults(copied, shape)[0].train
    assert again.epochs * again.steps_per_epoch == resolved.train.epochs * resolved.train.steps_per_epoch == 400
    one_pass = apply_overrides(set_epochs, ["train.steps_per_epoch=0"])  # 0: one pass, as in ExperimentConfig()
    assert resolve_defaults(one_pass, shape)[0].train.steps_per_epoch == 0


def rows_as(config: ExperimentConfig, rows: str) -> ExperimentConfig:
    return dataclasses.replace(config, model=dataclasses.replace(config.model, output_rows=rows))


def as_resolved(config: ExperimentConfig, rows: str) -> ExperimentConfig:
    """``config`` with its auto embedding rows and Siamese positives resolved (own: the paper's)."""
    return dataclasses.replace(rows_as(config, rows), siamese=dataclasses.replace(config.siamese, positives="own"))


def test_embedding_rows_go_to_unit_norm_where_views_are_missing_unless_set():
    x, _ = clustered(300, 3, 5, seed=13)
    complete = [x, x[:, ::-1] * 2.0]
    incomplete = _shape(with_missing_views(complete, 0.3, seed=14), 3)
    config = apply_overrides(FIXED, ["graph.n_neighbors=10", "train.missing_view_batch_growth=1"])
    assert config.model.output_rows == "auto" and "model.output_rows" in config.unresolved_fields()
    resolved, chosen = resolve_defaults(config, incomplete)
    assert resolved.model.output_rows == "unit" and "views are missing" in chosen["model.output_rows"]["why"]
    resolved, chosen = resolve_defaults(config, _shape(complete, 3))
    assert resolved.model.output_rows == "raw" and chosen == {}
    assert resolved.unresolved_fields() == []
    # a sample of no rows (views=None) reads the flag its caller measured on every training row
    told = DataShape(views=None, n_clusters=3, n_train=300, views_missing=True)
    assert resolve_defaults(config, told)[0].model.output_rows == "unit"
    for explicit in ("raw", "unit"):
        kept = rows_as(config, explicit)
        assert resolve_defaults(kept, incomplete)[0].model.output_rows == explicit


def test_siamese_positives_are_joint_where_all_views_together_split_the_samples_clearly_more_cleanly():
    x, _ = clustered(600, 3, 5, seed=21)
    noise = np.random.default_rng(22).standard_normal((600, 50)).astype(np.float32)  # a view of no use
    assert ExperimentConfig().siamese.positives == "own"  # the rule is opt-in
    config = apply_overrides(
        FIXED, ["graph.n_neighbors=10", "train.missing_view_batch_growth=1", "siamese.positives=auto"]
    )
    assert not config.siamese.enabled
    weak = _shape(with_missing_views([noise, x], 0.5, seed=23), 3)
    joint, own = joint_split_scores(weak.views, 3, 600, 10)
    assert joint_is_clearly_cleaner(joint, own)
    resolved, chosen = resolve_defaults(config, weak)
    assert (resolved.siamese.positives, resolved.siamese.enabled) == ("joint", True)
    assert "clearly more cleanly" in chosen["siamese.positives"]["why"] and chosen["siamese.enabled"]["value"] is True
    # views that agree: each keeps its own neighbours, and the nets stay as configured
    alike = _shape(with_missing_views([x, x[:, ::-1] * 2.0], 0.5, seed=23), 3)
    resolved, chosen = resolve_defaults(config, alike)
    assert (resolved.siamese.positives, resolved.siamese.enabled) == ("own", False)
    assert "do not split" in chosen["siamese.positives"]["why"]
    # complete data: own, unrecorded; explicit values stay on incomplete data
    resolved, chosen = resolve_defaults(config, _shape([noise, x], 3))
    assert resolved.siamese.positives == "own" and "siamese.positives" not in chosen
    for explicit in ("own", "joint"):
        kept = apply_overrides(config, [f"siamese.positives={explicit}"])
        resolved, chosen = resolve_defaults(kept, weak)
        assert resolved.siamese == kept.siamese and "siamese.enabled" not in chosen


def test_joint_positives_need_enough_samples_with_every_view():
    x, _ = clustered(60, 3, 5, seed=24)
    noise = np.random.default_rng(25).standard_normal((60, 50)).astype(np.float32)
    views = with_missing_views([noise, x], 0.9, seed=26)  # few complete samples: fewer than l + 1 per cluster
    assert joint_split_scores(views, 3, 60, 5) == (-math.inf, -math.inf)
    config = apply_overrides(
        FIXED, ["graph.n_neighbors=5", "train.missing_view_batch_growth=1", "siamese.positives=auto"]
    )
    resolved, chosen = resolve_defaults(config, _shape(views, 3))
    assert resolved.siamese.positives == "own" and not resolved.siamese.enabled


# --- the whole-set path ------------------------------------------------------------------------


def test_edge_list_loss_equals_the_dense_loss():
    rng = np.random.default_rng(7)
    views = tuple(jnp.asarray(rng.standard_normal((40, 3)), jnp.float32) for _ in range(2))
    affinities = batch_affinities(views, jnp.ones(2), fixed_graph(n_neighbors=5, scale_mode="batch"))
    graph = edge_graph(affinities)
    y = jnp.asarray(rng.standard_normal((40, 4)), jnp.float32)
    alpha = jax.nn.softmax(jnp.asarray(rng.standard_normal((40, 2)), jnp.float32))
    for weights in (None, alpha):
        for mass in (False, True):
            dense = weighted_laplacian_loss(y, affinities, weights, mass_normalized=mass)
            edges = edge_laplacian_loss(y, graph.senders, graph.receivers, graph.weights, weights, mass_normalized=mass)
            np.testing.assert_allclose(edges, dense, rtol=1e-5)


@pytest.mark.parametrize("through", [True, False])
def test_full_batch_step_equals_train_step_on_the_same_batch(through):
    rng = np.random.default_rng(8)
    views = tuple(jnp.asarray(rng.standard_normal((48, 5)), jnp.float32) for _ in range(2))
    graph = fixed_graph(n_neighbors=5)

    def make():
        return create_state(
            [5, 5],
            fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,)),
            graph,
            OrthoConfig(grad_through_r_inv=through),
            learning_rate=1e-3,
            seed=0,
            view_scales=[1.0, 1.0],
        )

    reference, _ = train_step(make(), Batch(views=views), Batch(views=views, ortho_views=views if through else None))
    batch = Batch(views=views, affinities=edge_graph(batch_affinities(views, jnp.ones(2), graph)))
    fused, metrics = full_batch_step(make(), batch)
    _, reference_metrics = train_step(
        make(), Batch(views=views), Batch(views=views, ortho_views=views if through else None)
    )
    np.testing.assert_allclose(metrics["loss"], reference_metrics["loss"], rtol=1e-5)
    np.testing.assert_allclose(metrics["grad_norm"], reference_metrics["grad_norm"], rtol=1e-4)
    np.testing.assert_allclose(fused.r_inv, reference.r_inv, rtol=1e-4, atol=1e-5)
    # Adam's first step moves each parameter by about lr * sign(g): where g is near 0 that sign
    # follows the rounding of the two (equal) sums, so parameters agree to a fraction of lr.
    for a, b in zip(jax.tree.leaves(fused.params), jax.tree.leaves(reference.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-2 * 1e-3)


def test_a_whole_set_epoch_is_its_steps_one_after_another():
    """full_batch_epoch (one compiled scan, what train_loop runs) ends where as many
    full_batch_step calls end: same parameters, R^-1 and per-step losses and view weights."""
    rng = np.random.default_rng(9)
    views = tuple(jnp.asarray(rng.standard_normal((40, 4)), jnp.float32) for _ in range(2))
    graph = fixed_graph(n_neighbors=5)
    batch = Batch(views=views, affinities=edge_graph(batch_affinities(views, jnp.ones(2), graph)))

    def make():
        model = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))
        return create_state([4, 4], model, graph, OrthoConfig(), learning_rate=1e-2, seed=0, view_scales=[1.0, 1.0])

    stepped, losses, weights = make(), [], []
    for _ in range(4):
        stepped, metrics = full_batch_step(stepped, batch)
        losses.append(metrics["loss"])
        weights.append(metrics["view_weights"])
    scanned, epoch = full_batch_epoch(make(), batch, 4)
    assert epoch["loss"].shape == (4,) and epoch["view_weights"].shape == (4, 2)
    assert len(set(np.asarray(losses).tolist())) == 4  # the steps moved the state
    np.testing.assert_allclose(epoch["loss"], np.asarray(losses), rtol=1e-5)
    np.testing.assert_allclose(epoch["view_weights"], np.asarray(weights), rtol=1e-5)
    np.testing.assert_allclose(scanned.r_inv, stepped.r_inv, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(scanned.params), jax.tree.leaves(stepped.params)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


# --- end to end ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_fit():
    """A default estimator (every data-aware rule) fitted for two epochs on a sparse and a dense
    view, and its views: fitted once for the tests below."""
    views = [sparse_counts(150, 300, seed=9, density=0.06), clustered(150, 3, 10, seed=9)[0]]  # 18-term rows
    return SpecRaGE(n_clusters=3, random_state=0, config_overrides=["train.epochs=2"]).fit(views), views


def test_default_estimator_records_its_choices_and_embeds_unit_rows(default_fit):
    est, views = default_fit
    assert est.config_.unresolved_fields() == []
    assert est.resolved_defaults_["data.preprocess"]["value"] == ["svd_l2", "standard_l2"]
    assert est.config_.data.graph_inputs == "unreduced"
    embedding = est.transform(views)
    np.testing.assert_allclose(np.linalg.norm(embedding, axis=1), 1.0, rtol=1e-5)


def test_pickled_and_saved_default_estimators_transform_alike(default_fit, tmp_path):
    import pickle

    est, views = default_fit
    expected = est.transform(views)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).transform(views), expected)
    est.save(tmp_path / "model")
    loaded = SpecRaGE.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.transform(views), expected)
    assert loaded.resolved_defaults_ == est.resolved_defaults_


@pytest.mark.slow  # a default fit of a real dataset: ~60 s; the default_fit checks above run the same rules
@pytest.mark.skipif(not (DEVSUITE / "WebKB.mat").is_file(), reason="needs ../shared/datasets/devsuite/WebKB.mat")
def test_defaults_cluster_webkb_above_its_naive_baseline():
    """WebKB (203 web pages, 3 views, classes of 9 to 107): the old fixed defaults put 200 of the
    203 rows in one cluster (ACC = the majority class, 0.527); the best naive baseline is 0.677."""
    data = load_mat(DEVSUITE / "WebKB.mat")
    embedding = SpecRaGE(n_clusters=4, n_components=4, random_state=0).fit_transform(list(data.views))
    predicted = KMeans(n_clusters=4, n_init=10, random_state=0).fit_predict(embedding)
    assert clustering_accuracy(data.labels, predicted) >= 0.677
    assert np.bincount(predicted, minlength=4).max() < 0.8 * len(predicted)  # no collapse


def test_cli_resolves_prints_and_records_the_defaults_of_a_file_dataset(tmp_path, capsys):
    from specrage_jax.api.pipeline import load_pipeline
    from specrage_jax.cli import main

    x, labels = clustered(180, 3, 6, seed=11)
    path = tmp_path / "mine.npz"
    np.savez(path, view_0=x, view_1=sparse_counts(180, 120, seed=11), labels=labels)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--dataset",
                f"file:{path}",
                "--out",
                str(out),
                "--quiet",
                "--no-figure",
                "--set",
                "train.epochs=2",
                "--set",
                "checkpoint.every_epochs=0",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "settings chosen from the data" in printed and "graph.n_neighbors = " in printed
    line = next(line for line in printed.splitlines() if line.startswith("  graph.n_neighbors = "))
    assert any(f"({rule}: " in line for rule in ("clear gap", "sustained gap", "agreeing views", "dense"))
    metrics = json.loads((out / "metrics.json").read_text())
    resolved = metrics["resolved_defaults"]
    assert resolved["data.preprocess"]["value"] == ["standard_l2", "svd_l2"]
    assert (
        "view 1: 120 features" in resolved["data.preprocess"]["why"]
        and "wider than 100: svd_l2" in resolved["data.preprocess"]["why"]
    )
    assert resolved["graph.n_neighbors"]["rule"] in line and resolved["model.n_components"]["rule"]
    assert metrics["config"]["graph"]["n_neighbors"] == resolved["graph.n_neighbors"]["value"] > 0
    assert metrics["config"]["train"]["epochs"] == 2 and "train.epochs" not in resolved  # explicit wins
    pipeline = load_pipeline(out)
    assert pipeline.scalers[0].components is None and pipeline.scalers[1].components is not None
    y = SpecRaGE.load(out).transform([x, sparse_counts(180, 120, seed=11)])
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("value", [1.5, -0.5, float("nan")])
def test_view_dropout_outside_its_range_is_refused(value):
    with pytest.raises(ValueError, match="graph.view_dropout"):
        GraphConfig(view_dropout=value)
