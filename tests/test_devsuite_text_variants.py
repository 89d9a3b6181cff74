"""experiments/devsuite_text_variants.py: the helpers on small arrays, the builders on the real
files (../shared/datasets, or $SPECRAGE_TEST_DATA; skipped when absent)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_selection import f_classif

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import devsuite_text_variants as tv
import devsuite_variants as dv


@pytest.fixture(scope="module")
def data_dir(devsuite_data_dir: str) -> str:
    return devsuite_data_dir


def test_registered_beside_the_other_variants():
    assert {"BBC4view+agree3", "translations6", "WikipediaArticles-imbalanced-narrow"} <= set(dv.VARIANTS)
    assert list(dv.VARIANTS)[-3:] == list(tv.TEXT_VARIANTS)


def test_vocabulary_map_drops_merges_and_permutes():
    target, width = tv.vocabulary_map(20000, np.random.default_rng(0))
    assert abs(np.mean(target < 0) - tv.DROP_SHARE) < 0.01
    used, counts = np.unique(target[target >= 0], return_counts=True)
    np.testing.assert_array_equal(used, np.arange(width))  # every new word has a source word
    assert abs(np.sum(counts - 1) / target.size - tv.MERGE_SHARE) < 0.01  # the merged words
    assert abs(width / target.size - (1 - tv.DROP_SHARE - tv.MERGE_SHARE)) < 0.01


def test_translated_view_thins_recodes_and_weights():
    rng = np.random.default_rng(1)
    source = (rng.random((50, 300)) < 0.1).astype(float) * rng.integers(1, 4, (50, 300))
    view = tv.translated_view(source, rng)
    assert view.shape[0] == 50 and 0.6 * 300 < view.shape[1] < 0.8 * 300
    assert view.min() >= 0 and np.allclose(np.linalg.norm(view, axis=1), 1, atol=1e-5)
    np.testing.assert_allclose(tv.tfidf(np.eye(3) * 2), np.eye(3))


def test_helpers_counts_f_statistic_and_sizes():
    np.testing.assert_array_equal(tv.as_counts(np.array([[0, 0.5, 1.5]])), [[0, 1, 3]])
    np.testing.assert_array_equal(tv.as_counts(np.array([[0, 2.0, 7.0]])), [[0, 2, 7]])
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(3), 30)
    x = rng.normal(size=(90, 4)) + labels[:, None] * np.array([0, 1, 0, 3])
    np.testing.assert_allclose(tv.f_statistic(x, labels), f_classif(x, labels)[0], rtol=1e-8)
    rows, new = tv.sized_rows(np.repeat([0, 1, 2], [5, 20, 10]), (8, 4), rng)
    assert np.bincount(new).tolist() == [8, 4] and rows.size == np.unique(rows).size == 12
    assert np.all((rows[:8] >= 5) & (rows[:8] < 25)) and np.all(rows[8:] >= 25)  # largest class first


def assert_seeded(name: str, data_dir: str):
    """The variant is the same for a seed and differs for another; returns the seed-0 build."""
    data = dv.build_variant(name, data_dir, seed=0)
    again = dv.build_variant(name, data_dir, seed=0)
    other = dv.build_variant(name, data_dir, seed=1)
    for a, b in zip(data.views, again.views):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(data.labels, again.labels)
    assert data.view_dims != other.view_dims or not np.array_equal(data.views[0], other.views[0])
    return data


def test_agree3_is_a_small_raw_count_draw_of_three_bbc_views(data_dir):
    data = assert_seeded("BBC4view+agree3", data_dir)
    assert data.n_samples == 170 and data.n_views == 3
    assert np.bincount(data.labels).tolist() == [34] * 5
    full = dv.load_base("BBC4view", data_dir)
    chosen = [full.view_names.index(name) for name in data.view_names]
    assert data.view_dims == tuple(full.view_dims[v] for v in chosen)
    for view in data.views:
        assert np.all(view == np.round(view)) and view.min() == 0 and view.max() > 1
    # the rows are BBC4view rows: each first view's row is found in the full view
    lookup = {row.tobytes(): i for i, row in enumerate(full.views[chosen[0]])}
    rows = np.array([lookup.get(row.tobytes(), -1) for row in data.views[0]])
    assert (rows >= 0).all()
    np.testing.assert_array_equal(full.labels[rows], data.labels)
    overlap = tv.neighbor_overlap(data.views)
    assert overlap[np.triu_indices(3, 1)].min() > 0.2


def test_translations6_are_five_recodings_of_1200_citeseer_documents(data_dir):
    data = assert_seeded("translations6", data_dir)
    assert data.n_samples == 1200 and data.n_views == 5
    assert np.bincount(data.labels).tolist() == [200] * 6
    assert all(2000 < width < 3000 for width in data.view_dims)
    for view in data.views:
        assert view.min() >= 0 and np.allclose(np.linalg.norm(view, axis=1), 1, atol=1e-5)
        assert np.count_nonzero(view) < 0.02 * view.size


def test_wikipedia_imbalanced_narrow_shapes_and_informative_columns(data_dir):
    data = assert_seeded("WikipediaArticles-imbalanced-narrow", data_dir)
    assert data.view_dims == (3, 400, 400) and data.n_samples == sum(tv.NARROW_WIKI_SIZES)
    assert np.bincount(data.labels).tolist() == list(tv.NARROW_WIKI_SIZES)
    full = dv.load_base("WikipediaArticles", data_dir)
    lookup = {row.tobytes(): i for i, row in enumerate(full.views[0])}
    rows = np.array([lookup.get(row.tobytes(), -1) for row in data.views[1][:, :128]])
    assert (rows >= 0).all() and np.unique(rows).size == rows.size
    topics = full.views[1][rows]
    scores = tv.f_statistic(topics, data.labels)
    columns = [int(np.flatnonzero(np.all(topics == data.views[0][:, [j]], axis=0))[0]) for j in range(3)]
    assert sorted(scores[columns]) == sorted(np.sort(scores)[-3:])
