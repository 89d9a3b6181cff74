"""The scikit-learn estimator: API, multi-view input forms, Pipeline / GridSearchCV, pickling,
save/load, and scikit-learn's own estimator checks.

Fitting compiles the jitted steps once per shape and configuration, so most tests share one
small fitted estimator (module fixture) and every configuration here is deliberately tiny.
"""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.svm import SVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from specrage_jax import SpecRaGE, ViewSplitter
from specrage_jax.config import AUTO_COMPONENTS
from specrage_jax.data import load_dataset, make_blobs_views
from specrage_jax.evaluation.metrics import clustering_accuracy

SMALL = dict(
    n_clusters=5, n_neighbors=5, batch_size=64, max_epochs=2, view_hidden=(32,), weighting_hidden=(8,), random_state=0
)


@pytest.fixture(scope="module")
def blobs():
    data = make_blobs_views(n_samples=300, seed=0)
    return [np.asarray(v) for v in data.views], data.labels


@pytest.fixture(scope="module")
def fitted(blobs):
    views, _ = blobs
    return SpecRaGE(**SMALL).fit(views)


def test_fit_sets_the_fitted_attributes(fitted, blobs):
    views, labels = blobs
    n = views[0].shape[0]
    assert fitted.view_dims_ == (2, 2) and fitted.n_features_in_ == 4
    assert fitted.n_components_ == 5  # n_components=None means n_clusters
    assert fitted.labels_.shape == (n,) and fitted.labels_.dtype == np.int64
    assert fitted.cluster_centers_.shape == (5, 5)
    assert fitted.n_iter_ == 2 and len(fitted.history_.epochs) == 2
    assert fitted.config_.graph.n_neighbors == 5 and fitted.config_.train.epochs == 2
    assert clustering_accuracy(labels, fitted.labels_) > 0.9  # blobs are easy even after 2 epochs


def test_transform_row_alone_equals_row_in_batch(fitted, blobs):
    views, _ = blobs
    full = fitted.transform(views)
    assert full.shape == (views[0].shape[0], 5) and full.dtype == np.float32
    for i in (0, 7, 299):
        alone = fitted.transform([v[i : i + 1] for v in views])
        np.testing.assert_array_equal(alone[0], full[i])
    order = np.random.default_rng(1).permutation(views[0].shape[0])
    np.testing.assert_array_equal(fitted.transform([v[order] for v in views]), full[order])


def test_predict_is_stable_and_matches_labels(fitted, blobs):
    views, _ = blobs
    first = fitted.predict(views)
    np.testing.assert_array_equal(first, fitted.predict(views))
    np.testing.assert_array_equal(first, fitted.labels_)
    new = [v[:10] + 0.01 for v in views]
    np.testing.assert_array_equal(fitted.predict(new), fitted.predict(new))


def test_fit_transform_and_fit_predict_agree_with_fit(fitted, blobs):
    views, _ = blobs
    est = clone(fitted)
    np.testing.assert_array_equal(est.fit_transform(views), fitted.transform(views))
    np.testing.assert_array_equal(clone(fitted).fit_predict(views), fitted.labels_)


def test_view_weights_lie_on_the_simplex(fitted, blobs):
    views, _ = blobs
    alpha = fitted.view_weights(views)
    assert alpha.shape == (views[0].shape[0], 2)
    assert np.all(alpha >= 0)
    np.testing.assert_allclose(alpha.sum(axis=1), 1.0, rtol=1e-6)


def test_score_is_the_negative_loss_and_needs_a_graph(fitted, blobs):
    views, _ = blobs
    score = fitted.score(views)
    assert np.isfinite(score) and score <= 0
    assert fitted.score(views) == score
    with pytest.raises(ValueError, match="more than n_neighbors=5 samples"):
        fitted.score([v[:5] for v in views])


def test_stacked_input_with_view_dims_equals_the_list(fitted, blobs):
    views, _ = blobs
    stacked = np.hstack(views)
    est = SpecRaGE(**SMALL, view_dims=(2, 2)).fit(stacked)
    np.testing.assert_array_equal(est.transform(stacked), fitted.transform(views))
    # a model fitted on a list accepts the stacked array too (split by the fitted widths), and back
    np.testing.assert_array_equal(fitted.transform(stacked), est.transform(views))


def test_config_overrides_reach_every_config_field(blobs):
    est = SpecRaGE(
        **SMALL, config_overrides=["ortho.grad_through_r_inv=false", "graph.symmetrize=max", "eval.kmeans_n_init=3"]
    )
    config = est.experiment_config()
    assert config.ortho.grad_through_r_inv is False and config.graph.symmetrize == "max"
    assert config.eval.kmeans_n_init == 3 and config.model.n_components == AUTO_COMPONENTS  # chosen at fit
    assert SpecRaGE(**{**SMALL, "n_components": 4}).experiment_config().model.n_components == 4
    with pytest.raises(ValueError, match="unknown field 'nope'"):
        SpecRaGE(config_overrides=["model.nope=1"]).fit(blobs[0])


def test_pickle_and_joblib_round_trips_give_identical_output(fitted, blobs, tmp_path):
    views, _ = blobs
    expected = fitted.transform(views)
    unpickled = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(unpickled.transform(views), expected)
    np.testing.assert_array_equal(unpickled.predict(views), fitted.predict(views))
    assert unpickled.score(views) == fitted.score(views)
    joblib.dump(fitted, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").transform(views), expected)
    # pickling must not disturb the original
    np.testing.assert_array_equal(fitted.transform(views), expected)


def test_save_load_gives_identical_output(fitted, blobs, tmp_path):
    views, _ = blobs
    fitted.save(tmp_path / "model")
    loaded = SpecRaGE.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.transform(views), fitted.transform(views))
    np.testing.assert_array_equal(loaded.predict(views), fitted.predict(views))
    np.testing.assert_array_equal(loaded.labels_, fitted.labels_)
    assert loaded.get_params() == fitted.get_params()
    assert loaded.score(views) == fitted.score(views)
    with pytest.raises(FileExistsError):
        fitted.save(tmp_path / "model")


def test_save_load_and_pickle_keep_the_pretraining_stages(blobs, tmp_path):
    views, _ = blobs
    est = SpecRaGE(
        **SMALL,
        autoencoder=True,
        siamese=True,
        config_overrides=[
            "autoencoder.epochs=1",
            "autoencoder.hidden=16",
            "autoencoder.embedding_dim=4",
            "siamese.epochs=1",
            "siamese.hidden=16",
        ],
    ).fit(views)
    expected = est.transform(views)
    est.save(tmp_path / "model")
    loaded = SpecRaGE.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.transform(views), expected)
    assert loaded.score(views) == est.score(views)  # the Siamese codes build the graph
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).transform(views), expected)


def test_pipeline_and_cross_val_score_with_the_view_splitter(blobs):
    views, labels = blobs
    stacked = np.hstack(views)
    pipe = make_pipeline(ViewSplitter((2, 2)), SpecRaGE(**SMALL), SVC())
    scores = cross_val_score(pipe, stacked, labels, cv=2)
    assert scores.shape == (2,) and scores.min() > 0.9


def test_view_splitter_splits_by_columns():
    x = np.arange(12.0).reshape(2, 6)
    parts = ViewSplitter((1, 2, 3)).fit(x).transform(x)
    assert [p.shape for p in parts] == [(2, 1), (2, 2), (2, 3)]
    np.testing.assert_array_equal(np.hstack(parts), x)
    with pytest.raises(ValueError, match=r"view_dims=\[2, 2\] add up to 4"):
        ViewSplitter((2, 2)).fit(x)


@pytest.mark.slow  # a grid search of fits: ~13 s; the default suite is at its time budget
def test_grid_search_selects_parameters_on_digits():
    """Pipeline(ViewSplitter, SpecRaGE, SVC) under GridSearchCV on the
    two-view digits, test accuracy well above chance (0.1)."""
    data = load_dataset("digits", seed=0)
    x, y = np.hstack(data.views), data.labels
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, stratify=y, random_state=0)
    pipe = Pipeline(
        [
            ("views", ViewSplitter(data.view_dims)),
            (
                "specrage",
                SpecRaGE(
                    n_clusters=10,
                    batch_size=256,
                    max_epochs=5,
                    temperature=250000.0,
                    view_hidden=(128, 128),
                    preprocess="minmax",
                    random_state=0,
                ),
            ),
            ("svc", SVC()),
        ]
    )
    search = GridSearchCV(pipe, {"specrage__n_neighbors": [10, 20]}, cv=2).fit(x_train, y_train)
    assert search.best_params_["specrage__n_neighbors"] in (10, 20)
    assert search.score(x_test, y_test) >= 0.8


# --- scikit-learn's estimator checks ---------------------------------------------------------

# Every check that applies to a 2-D array passes (a 2-D array is one view) with the default
# constructor, n_clusters left out (8 clusters, with a warning at each fit): the data-aware
# defaults resolve on the checks' 10- to 30-row datasets. The checks do not exercise
# list-of-views input; the tests above do. check_array_api_input is skipped by scikit-learn itself
# unless SCIPY_ARRAY_API=1 is set.
EXPECTED_FAILED_CHECKS: dict[str, str] = {}

CHECKED = SpecRaGE()


@pytest.mark.slow  # many default fits, most on a new shape: its 20 slowest checks took 129 s, cache empty
@pytest.mark.filterwarnings("ignore:SpecRaGE. n_clusters not given")
@parametrize_with_checks([CHECKED], expected_failed_checks=lambda estimator: EXPECTED_FAILED_CHECKS)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
