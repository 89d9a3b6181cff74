"""Missing views at inference (training on incomplete data: test_incomplete_training.py): all-NaN
rows or a mask (n, V) leave a view out of a sample's fusion (weight exactly 0, the others
renormalized); the model, predict, embed and the estimator."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from sklearn.model_selection import train_test_split

from specrage_jax import SpecRaGE
from specrage_jax.config import OrthoConfig
from specrage_jax.data import load_dataset
from specrage_jax.evaluation.metrics import kmeans_metrics
from specrage_jax.nets.embed import embed
from specrage_jax.nets.model import SpecRaGENet
from specrage_jax.nets.state import create_state, embed_batch
from tests.fixed_sections import fixed_graph, fixed_model

DIMS = (4, 3, 5)
MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0)


@pytest.fixture(scope="module")
def state():
    return create_state(
        DIMS, MODEL, fixed_graph(n_neighbors=3), OrthoConfig(), learning_rate=1e-3, seed=0, view_scales=[1.0, 1.0, 1.0]
    )


def random_views(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, d)).astype(np.float32) for d in DIMS]


def test_all_present_mask_equals_no_mask_bitwise():
    net = SpecRaGENet(DIMS, MODEL, rngs=nnx.Rngs(0))
    views = [jnp.asarray(v) for v in random_views(16)]
    mask = jnp.ones((16, 3), bool)
    fuse = jax.jit(lambda views, mask: net.fuse(views, mask))
    plain = jax.jit(lambda views: net.fuse(views))
    for a, b in zip(fuse(views, mask), plain(views)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(net(views, mask), net(views)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_missing_view_has_weight_exactly_zero_and_the_rest_renormalize():
    net = SpecRaGENet(DIMS, MODEL, rngs=nnx.Rngs(0))
    views = [jnp.asarray(v) for v in random_views(6)]
    mask = np.ones((6, 3), bool)
    mask[0, 1] = mask[2, 0] = mask[3, 0] = mask[3, 2] = False
    alpha = np.asarray(net.view_weights(views, jnp.asarray(mask)))
    assert np.all(alpha[~mask] == 0.0)
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(alpha[3], [0.0, 1.0, 0.0])
    # renormalized: the present views keep their ratio
    full = np.asarray(net.view_weights(views))
    np.testing.assert_allclose(alpha[0, [0, 2]], full[0, [0, 2]] / full[0, [0, 2]].sum(), rtol=1e-5)


def test_nan_rows_of_a_missing_view_never_reach_the_output(state):
    views = random_views(8)
    mask = np.ones((8, 3), bool)
    mask[2, 1] = False
    with_nan = [v.copy() for v in views]
    with_nan[1][2] = np.nan
    y_nan, a_nan = embed_batch(state, tuple(jnp.asarray(v) for v in with_nan), jnp.asarray(mask))
    y_val, a_val = embed_batch(state, tuple(jnp.asarray(v) for v in views), jnp.asarray(mask))
    assert np.all(np.isfinite(np.asarray(y_nan)))
    np.testing.assert_array_equal(np.asarray(y_nan), np.asarray(y_val))  # what the missing row held is irrelevant
    np.testing.assert_array_equal(np.asarray(a_nan), np.asarray(a_val))


def test_embed_treats_all_nan_rows_as_missing_and_equals_the_explicit_mask(state):
    views = random_views(10)
    with_nan = [v.copy() for v in views]
    with_nan[0][[1, 4]] = np.nan
    with_nan[2][7] = np.nan
    mask = np.ones((10, 3), bool)
    mask[[1, 4], 0] = False
    mask[7, 2] = False
    y_nan, a_nan = embed(state, with_nan)
    y_mask, a_mask = embed(state, views, mask=mask)
    np.testing.assert_array_equal(y_nan, y_mask)
    np.testing.assert_array_equal(a_nan, a_mask)
    assert np.all(a_nan[~mask] == 0.0) and np.all(np.isfinite(y_nan))
    y_full, _ = embed(state, views)
    untouched = mask.all(axis=1)
    np.testing.assert_array_equal(y_nan[untouched], y_full[untouched])  # other samples unaffected
    assert not np.allclose(y_nan[1], y_full[1])


def test_embed_rejects_partial_nan_rows_all_missing_samples_and_bad_masks(state):
    views = random_views(6)
    partial = [v.copy() for v in views]
    partial[1][3, 0] = np.nan
    with pytest.raises(ValueError, match=r"view 1 holds 1 NaN.*first bad rows: \[3\].*NaN in every feature"):
        embed(state, partial)
    gone = [v.copy() for v in views]
    for v in gone:
        v[4] = np.nan
    with pytest.raises(ValueError, match="sample 4 has every view missing"):
        embed(state, gone)
    with pytest.raises(ValueError, match="sample 2 has every view missing"):
        embed(state, views, mask=np.array([[True] * 3, [True] * 3, [False] * 3] + [[True] * 3] * 3))
    with pytest.raises(ValueError, match=r"mask must have shape \(n_samples, n_views\) = \(6, 3\)"):
        embed(state, views, mask=np.ones((6, 2), bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        embed(state, views, mask=np.ones((6, 3)))
    inf = [v.copy() for v in views]
    inf[2][:] = np.inf
    with pytest.raises(ValueError, match="view 2 holds 30 NaN or infinite"):
        embed(state, inf)


def test_estimator_mask_argument_and_nan_rows_agree():
    views = random_views(60)
    est = SpecRaGE(
        n_clusters=3,
        n_neighbors=5,
        batch_size=32,
        max_epochs=1,
        view_hidden=(16,),
        weighting_hidden=(8,),
        random_state=0,
    ).fit(views)
    mask = np.ones((60, 3), bool)
    mask[::4, 2] = False
    with_nan = [v.copy() for v in views]
    with_nan[2][::4] = np.nan
    np.testing.assert_array_equal(est.transform(with_nan), est.transform(views, mask=mask))
    np.testing.assert_array_equal(est.predict(with_nan), est.predict(views, mask=mask))
    alpha = est.view_weights(with_nan)
    assert np.all(alpha[::4, 2] == 0.0)
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, rtol=1e-6)
    assert np.isfinite(est.score(with_nan)) and est.score(with_nan) == est.score(views, mask=mask)


@pytest.mark.slow  # a full digits fit (~11 s); the masks themselves are checked by the tests above
def test_digits_clusters_survive_either_view_missing_for_30_percent_of_test_samples():
    """Train on digits once; with either view all-NaN for a seeded 30% of the test samples, test
    k-means ACC stays within 0.05 of the complete-data ACC: those samples are embedded by the
    remaining view's single-view net (model.single_view_nets, on in the data-aware defaults).
    Through the view nets' parts of the fused sum instead, missing the clean image view cost
    0.983 -> 0.914 (BUILD_NOTES.md, "Samples with one view")."""
    data = load_dataset("digits", seed=0)
    train, test = train_test_split(np.arange(data.n_samples), test_size=0.2, stratify=data.labels, random_state=0)
    est = SpecRaGE(
        n_clusters=10,
        n_neighbors=10,
        batch_size=512,
        max_epochs=20,
        temperature=250000.0,
        view_hidden=(256, 256),
        preprocess="minmax",
        random_state=0,
    )
    est.fit([v[train] for v in data.views])
    test_views, test_labels = [v[test] for v in data.views], data.labels[test]
    complete = kmeans_metrics(est.transform(test_views), test_labels, n_clusters=10, seed=0)["acc"]
    assert complete >= 0.95
    rows = np.random.default_rng(0).choice(test.size, size=int(0.3 * test.size), replace=False)
    for view in (0, 1):
        missing = [v.copy() for v in test_views]
        missing[view][rows] = np.nan
        embedding = est.transform(missing)
        assert np.all(np.isfinite(embedding))
        kept = np.eye(2)[1 - view]
        np.testing.assert_array_equal(est.view_weights(missing)[rows], np.tile(kept, (rows.size, 1)))
        degraded = kmeans_metrics(embedding, test_labels, n_clusters=10, seed=0)["acc"]
        assert degraded >= complete - 0.05, f"view {view} missing: ACC {degraded:.3f} vs {complete:.3f} complete"
