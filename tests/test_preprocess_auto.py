"""The per-view preprocessing ``data.preprocess=auto`` picks, the scalers it builds and the graph
inputs it leaves for the short-documents rule."""

from __future__ import annotations

import numpy as np

from specrage_jax.config import ExperimentConfig
from specrage_jax.data.preprocess import (
    auto_view_choice,
    auto_view_kind,
    fit_view_scalers,
    graph_input_views,
    is_composition,
    scaler_from_tree,
)
from specrage_jax.overrides import apply_overrides
from specrage_jax.training import defaults as data_rules
from specrage_jax.training.defaults import DataShape
from tests.synthetic import clustered, sparse_counts


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
