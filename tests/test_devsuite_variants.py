"""experiments/devsuite_variants.py on the real files (../shared/datasets, or $SPECRAGE_TEST_DATA), and
experiments/naive_baselines.py on a small separable set."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
import devsuite_variants as dv
import naive_baselines as nb

from specrage_jax.data.loaders import load_mat


@pytest.fixture(scope="module")
def data_dir(devsuite_data_dir: str) -> str:
    return devsuite_data_dir


def row_index(rows: np.ndarray, table: np.ndarray) -> np.ndarray:
    """For every row of ``rows`` the index of an equal row of ``table`` (-1 when none)."""
    lookup = {row.tobytes(): i for i, row in enumerate(np.ascontiguousarray(table))}
    return np.array([lookup.get(row.tobytes(), -1) for row in np.ascontiguousarray(rows)])


def empty_rows(view: np.ndarray) -> np.ndarray:
    return np.flatnonzero(~np.any(view != 0, axis=1))


@pytest.mark.parametrize(("base", "per_class"), [("WebKB", 10), ("handwritten", 16)])
def test_class_size_sweep_keeps_at_most_p_rows_of_every_class(data_dir, base, per_class):
    full = dv.load_base(base, data_dir)
    variant = dv.build_variant(f"{base}@{per_class}pc", data_dir, seed=0)
    expected = np.minimum(np.bincount(full.labels), per_class)
    np.testing.assert_array_equal(np.bincount(variant.labels, minlength=full.n_classes), expected)
    # the rows are rows of the full set, each taken once, with their labels
    where = row_index(np.hstack(variant.views), np.hstack(full.views))
    assert (where >= 0).all() and np.unique(where).size == where.size
    np.testing.assert_array_equal(full.labels[where], variant.labels)
    again = dv.build_variant(f"{base}@{per_class}pc", data_dir, seed=0)
    other = dv.build_variant(f"{base}@{per_class}pc", data_dir, seed=1)
    np.testing.assert_array_equal(again.views[0], variant.views[0])
    assert not np.array_equal(other.views[0], variant.views[0])


def test_webkb_sweep_keeps_the_whole_small_class(data_dir):
    """WebKB's smallest class has 9 samples: under P = 10 it keeps all of them."""
    variant = dv.build_variant("WebKB@10pc", data_dir)
    assert sorted(np.bincount(variant.labels).tolist()) == [9, 10, 10, 10]


def test_mnist_pairs_classes_are_ordered_digit_pairs(data_dir):
    data = dv.build_variant("mnistpairs40x10", data_dir, seed=0)
    pairs, first, second, digit_labels = dv.mnist_pairs_draw(data_dir, 0, 40, 10)
    assert data.view_dims == (392, 256, 84)
    np.testing.assert_array_equal(np.bincount(data.labels), np.full(40, 10))
    assert len({tuple(p) for p in pairs.tolist()}) == 40 and pairs.min() >= 0 and pairs.max() <= 9
    np.testing.assert_array_equal(digit_labels[first], pairs[data.labels, 0])
    np.testing.assert_array_equal(digit_labels[second], pairs[data.labels, 1])
    assert np.unique(np.concatenate([first, second])).size == 2 * first.size  # no image used twice
    # the pooled view is the two images side by side: its left half pools the first image
    images, _ = dv.mnist_train(data_dir)
    pooled = data.views[0].reshape(-1, 14, 28)
    np.testing.assert_allclose(pooled[:, :, :14], dv.average_pool(images[first]).reshape(-1, 14, 14), atol=1e-6)
    np.testing.assert_allclose(pooled[:, :, 14:], dv.average_pool(images[second]).reshape(-1, 14, 14), atol=1e-6)
    # profiles: 28 row sums and 56 column sums of the same image, so both add up to its ink
    profiles = data.views[2]
    np.testing.assert_allclose(profiles[:, :28].sum(1), profiles[:, 28:].sum(1), rtol=1e-4)
    # every HOG cell with any gradient is a unit vector
    cells = np.linalg.norm(data.views[1].reshape(data.n_samples, 32, 8), axis=2)
    assert np.all((np.abs(cells - 1) < 1e-4) | (cells == 0))


def test_mnist_pairs_100_uses_every_ordered_pair(data_dir):
    pairs, first, _, digit_labels = dv.mnist_pairs_draw(data_dir, 0, 100, 16)
    assert sorted(a * 10 + b for a, b in pairs.tolist()) == list(range(100))
    assert first.size == 1600 and np.all(digit_labels[first] == np.repeat(pairs[:, 0], 16))


@pytest.mark.parametrize("base", ["20newsgroups", "WebKB"])
def test_hub_variant_injects_empty_single_term_and_near_duplicate_rows(data_dir, base):
    full = dv.load_base(base, data_dir)
    data = dv.build_variant(f"{base}+hubs", data_dir, seed=0)
    record = dv.hub_record(data_dir, seed=0, base=base)
    np.testing.assert_array_equal(data.labels, full.labels)
    assert len(set(record["empty"])) == data.n_views  # a different empty document in every view
    pairs = np.array(record["pairs"][0])
    assert 5 <= len(pairs) <= 8 and np.all(data.labels[pairs[:, 0]] == data.labels[pairs[:, 1]])
    for v, (before, after) in enumerate(zip(full.views, data.views)):
        # exactly one more empty row, the recorded one (WebKB's sparse views already have some)
        assert empty_rows(after).size == empty_rows(before).size + 1
        assert record["empty"][v] in empty_rows(after) and record["empty"][v] not in empty_rows(before)
        single = np.array(record["single"][v])
        assert single.size == round(0.03 * data.n_samples)
        assert np.all((after[single] != 0).sum(axis=1) == 1)
        assert np.all((before[single] != 0).sum(axis=1) >= 2)
        # the copy's nearest row is its source (ties allowed), perturbed where the source has 4+ terms
        unit = (after / np.maximum(np.linalg.norm(after, axis=1, keepdims=True), 1e-12)).astype(np.float64)
        squares = (unit**2).sum(axis=1)
        distances = np.sqrt(np.maximum(squares[:, None] + squares[None, :] - 2 * unit @ unit.T, 0))
        np.fill_diagonal(distances, np.inf)
        gaps = np.linalg.norm(unit[pairs[:, 0]] - unit[pairs[:, 1]], axis=1)
        assert np.all(gaps <= distances[pairs[:, 0]].min(axis=1) + 1e-6)
        long_enough = (before[pairs[:, 1]] != 0).sum(axis=1) >= dv.MIN_TERMS_TO_PERTURB
        assert np.all(gaps[long_enough] > 0) and np.all(gaps[~long_enough] == 0)
        # the perturbation: the same number of terms, two entries changed (one dropped, one added)
        changed = (after[pairs[:, 0]] != before[pairs[:, 1]]).sum(axis=1)
        np.testing.assert_array_equal(changed, np.where(long_enough, 2, 0))
        np.testing.assert_array_equal((after[pairs[:, 0]] != 0).sum(1), (before[pairs[:, 1]] != 0).sum(1))
        # apart from the injected rows the view is untouched
        touched = np.concatenate([pairs[:, 0], single, [record["empty"][v]]])
        keep = np.setdiff1d(np.arange(data.n_samples), touched)
        np.testing.assert_array_equal(after[keep], before[keep])


@pytest.mark.parametrize("base", ["20newsgroups", "WebKB"])
def test_copies_variant_makes_groups_of_identical_one_term_documents(data_dir, base):
    full = dv.load_base(base, data_dir)
    data = dv.build_variant(f"{base}+copies", data_dir, seed=0)
    np.testing.assert_array_equal(data.labels, full.labels)
    size = max(dv.MIN_COPY_GROUP, round(dv.COPY_GROUP_SHARE * data.n_samples))
    first = data.views[0]
    one_term = np.flatnonzero((first != 0).sum(axis=1) == 1)
    _, counts = np.unique(first[one_term], axis=0, return_counts=True)
    assert (counts >= size).sum() == dv.COPY_GROUPS  # five groups of at least ``size`` identical rows
    for before, after in zip(full.views, data.views):
        touched = np.flatnonzero(np.any(np.asarray(after) != np.asarray(before, np.float64), axis=1))
        assert touched.size <= dv.COPY_GROUPS * size
        rows = np.flatnonzero(((after != 0).sum(axis=1) == 1) & np.isin(np.arange(data.n_samples), touched))
        groups, group_sizes = np.unique(after[rows], axis=0, return_counts=True)
        assert len(groups) <= dv.COPY_GROUPS and group_sizes.max() <= size
        # the groups' documents come from more than one class: copies say nothing about the class
        assert len(np.unique(data.labels[rows])) > 1


@pytest.mark.parametrize("base", ["20newsgroups", "WebKB"])
def test_short_variant_cuts_every_sparse_document_to_a_subset_of_its_terms(data_dir, base):
    full = dv.load_base(base, data_dir)
    data = dv.build_variant(f"{base}+short", data_dir, seed=0)
    np.testing.assert_array_equal(data.labels, full.labels)
    assert data.view_dims == full.view_dims
    for before, after in zip(full.views, data.views):
        before = np.asarray(before.toarray() if hasattr(before, "toarray") else before, np.float64)
        if np.count_nonzero(before) >= dv.SPARSE_VIEW_BELOW * before.size:  # a dense view stays as it is
            np.testing.assert_array_equal(after, before)
            continue
        kept_terms = (after != 0).sum(axis=1)
        np.testing.assert_array_equal(kept_terms, np.minimum((before != 0).sum(axis=1), dv.SHORT_TERMS))
        # every kept entry is the document's own, with its value; nothing is added
        np.testing.assert_array_equal(after[after != 0], before[after != 0])
    assert any(((np.asarray(v) != 0).sum(axis=1) > dv.SHORT_TERMS).any() for v in full.views)  # something was cut


def test_noise_view_variant_adds_view_0_with_its_columns_shuffled(data_dir):
    full = dv.load_base("handwritten", data_dir)
    data = dv.build_variant("handwritten+noise", data_dir, seed=0)
    np.testing.assert_array_equal(data.labels, full.labels)
    assert data.view_dims == (*full.view_dims, full.view_dims[0]) and data.view_names[-1] == "noise"
    for before, after in zip(full.views, data.views):
        np.testing.assert_array_equal(after, before)
    source, noise = np.asarray(full.views[0], np.float64), data.views[-1]
    # every column keeps its values, in another order, each column its own
    np.testing.assert_array_equal(np.sort(noise, axis=0), np.sort(source, axis=0))
    assert np.mean(np.all(noise == source, axis=1)) < 0.01
    assert not np.array_equal(np.argsort(noise[:, 0]), np.argsort(noise[:, 1]))
    np.testing.assert_array_equal(dv.build_variant("handwritten+noise", data_dir, seed=0).views[-1], noise)


def test_imbalanced_narrow_variant(data_dir):
    data = dv.build_variant("handwritten-imbalanced-narrow", data_dir, seed=0)
    counts = np.bincount(data.labels)
    np.testing.assert_array_equal(counts, [200, 70, 46, 35])
    np.testing.assert_allclose(counts / counts.sum(), [0.57, 0.20, 0.13, 0.10], atol=0.01)
    assert data.view_dims == (3, 400, 400)
    full = load_mat(Path(data_dir) / "handwritten.mat")
    views = dict(zip(full.view_names, full.views))
    assert views["mor"].shape[1] == 6 and views["zer"].shape[1] == 47 and views["kar"].shape[1] == 64
    # Handwritten holds 6 samples duplicated in every view, so a row is found by value, not uniquely
    rows = row_index(np.hstack([data.views[1][:, :47], data.views[2][:, :64]]), np.hstack([views["zer"], views["kar"]]))
    assert (rows >= 0).all()
    np.testing.assert_array_equal(data.views[0], views["mor"][rows, :3])
    np.testing.assert_array_equal(data.views[2][:, :64], views["kar"][rows])
    np.testing.assert_array_equal(np.sort(np.unique(full.labels[rows], return_counts=True)[1]), np.sort(counts))
    # the noise columns are centred and scaled to the view's mean feature standard deviation
    noise = data.views[1][:, 47:]
    assert abs(noise.std() / views["zer"][rows].std(axis=0).mean() - 1) < 0.02 and abs(noise.mean()) < 0.1 * noise.std()


def test_latent_classes_are_seeded_and_separable_in_the_latent_space():
    """The generated many-class sets: the shapes and labels they promise, the same views for a
    seed and other views for another, and each view carrying its class (class means differ far
    more than the noise moves a row)."""
    data = dv.build_variant("latent40x10", "/unused", seed=0)
    assert data.view_dims == (200, 100, 60) and data.n_samples == 400
    np.testing.assert_array_equal(np.bincount(data.labels), np.full(40, 10))
    assert all(view.dtype == np.float32 and np.isfinite(view).all() for view in data.views)
    again = dv.build_variant("latent40x10", "/unused", seed=0)
    other = dv.build_variant("latent40x10", "/unused", seed=1)
    np.testing.assert_array_equal(again.views[2], data.views[2])
    assert not np.array_equal(other.views[2], data.views[2])
    relu = data.views[0]
    assert np.mean(relu < -3 * dv.LATENT_VIEWS[0][2]) < 0.005  # ReLU features plus noise: rarely far below 0
    for view in data.views:
        means = np.stack([view[data.labels == c].mean(0) for c in range(40)])
        within = np.mean([view[data.labels == c].var(0).sum() for c in range(40)])
        assert means.var(0).sum() > 0.5 * within  # the class carries a large share of each view's variance
    assert dv.build_variant("latent100x16", "/unused").n_samples == 1600


def test_registry_names_and_unknown_name():
    assert {"20newsgroups@10pc", "handwritten@16pc", "digits@10pc", "mnistpairs40x10", "mnistpairs100x16"} <= set(
        dv.VARIANTS
    )
    assert {"20newsgroups+hubs", "BBC4view+hubs", "WebKB+hubs", "handwritten-imbalanced-narrow"} <= set(dv.VARIANTS)
    assert {"20newsgroups+copies", "BBC4view+copies", "WebKB+copies"} <= set(dv.VARIANTS)
    assert {"20newsgroups+short", "BBC4view+short", "WebKB+short"} <= set(dv.VARIANTS)
    assert {"handwritten+noise", "BBC4view+noise"} <= set(dv.VARIANTS)
    with pytest.raises(KeyError, match="unknown variant"):
        dv.build_variant("nope", "/nonexistent")


def test_naive_baselines_separate_a_separable_set():
    """Three well separated classes whose views have very different scales: standardized
    concatenation finds them on every seed, and the entry has baselines.json's layout."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    view_a = centres[labels] + rng.normal(0, 0.5, (60, 2))
    view_b = 1000.0 * (np.eye(3)[labels] + rng.normal(0, 0.05, (60, 3)))
    entry = nb.naive_baselines([view_a, view_b], labels, 3)
    assert entry["n"] == 60 and entry["k"] == 3 and entry["dims"] == [2, 3]
    assert list(entry["baselines"]) == list(nb.BASELINE_ORDER)
    best = entry["baselines"]["concat_kmeans/std"]
    assert best["ACC"] == 1.0 and best["NMI"] == pytest.approx(1.0) and best["ARI"] == pytest.approx(1.0)
    assert [row["seed"] for row in best["per_seed"]] == [0, 1, 2, 3, 4]
    assert {"ACC", "ACC_std", "NMI", "NMI_std", "ARI", "ARI_std", "per_seed", "seconds"} <= set(best)
    assert entry["baselines"]["se_mean_graph/std"]["ACC"] == 1.0
    assert nb.best_baseline(entry)[1]["ACC"] == 1.0


@pytest.mark.slow  # one default fit of 400 rows in 40 classes: ~20 s
def test_default_estimator_on_forty_classes_of_ten_reaches_its_naive_baseline():
    """The many-small-classes regime with nothing set: the generated 40 x 10 set (no files) gets a
    neighbour count below the class size and degree-normalized graphs, and k-means on its embedding
    reaches 0.95 of the best naive baseline committed for it."""
    import json

    from sklearn.cluster import KMeans

    from specrage_jax import SpecRaGE
    from specrage_jax.evaluation.metrics import clustering_accuracy

    baselines = json.loads(
        (Path(__file__).resolve().parents[1] / "experiments/results/devsuite_variants_baselines.json").read_text()
    )
    bar = max(entry["ACC"] for entry in baselines["latent40x10"]["baselines"].values())
    data = dv.build_variant("latent40x10", "/unused", seed=0)
    est = SpecRaGE(n_clusters=40, random_state=0)
    embedding = est.fit_transform(list(data.views))
    assert est.resolved_defaults_["graph.degree_normalization"]["value"] == "samples"
    assert est.resolved_defaults_["graph.n_neighbors"]["value"] < 10
    predicted = KMeans(n_clusters=40, n_init=10, random_state=0).fit_predict(embedding)
    assert clustering_accuracy(data.labels, predicted) >= 0.95 * bar
