"""The estimator's parameters: every configuration field as a nested scikit-learn parameter
(``config__<section>__<field>``) that set_params, clone and GridSearchCV handle, the ``config``
parameter as the base the named parameters refine, the n_clusters default, and the ``optimizer``
parameter (an optax transformation) through fit, clone, save and pickle."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import optax
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from specrage_jax import ExperimentConfig, SpecRaGE, preset
from specrage_jax.data import make_blobs_views
from specrage_jax.nets.state import adam_optimizer

# small and fast: 4 clusters of 2-D blobs, one short epoch, tiny networks, fixed k
FAST = dict(
    n_clusters=4, n_components=4, batch_size=64, max_epochs=1, view_hidden=(16,), weighting_hidden=(8,), random_state=0
)

ADAMW = optax.adamw(1e-3, weight_decay=0.5)  # one instance: fits with it share compiled steps


@pytest.fixture(scope="module")
def blobs():
    data = make_blobs_views(n_samples=160, n_centers=4, seed=0)
    return [np.asarray(v) for v in data.views]


def test_every_config_field_is_a_nested_parameter():
    params = SpecRaGE().get_params(deep=True)
    config = ExperimentConfig.auto()
    for section in dataclasses.fields(config):
        assert params[f"config__{section.name}"] == getattr(config, section.name)
        for field in dataclasses.fields(getattr(config, section.name)):
            if (section.name, field.name) != ("train", "progress"):  # verbose sets it
                assert params[f"config__{section.name}__{field.name}"] == getattr(
                    getattr(config, section.name), field.name
                )
    assert "config__train__progress" not in params
    assert set(SpecRaGE().get_params(deep=False)) <= set(params)


def test_set_params_builds_new_frozen_configs_and_clone_round_trips():
    est = SpecRaGE(n_clusters=3).set_params(config__graph__bandwidth_factor=1.0, config__model__fusion="average")
    first = est.config
    assert first.graph.bandwidth_factor == 1.0 and first.model.fusion == "average"
    assert first.graph.n_neighbors == ExperimentConfig.auto().graph.n_neighbors  # the rest: the defaults
    est.set_params(config__graph__n_neighbors=np.int64(7))  # a parameter grid's NumPy scalar
    assert est.config.graph.n_neighbors == 7 and type(est.config.graph.n_neighbors) is int
    assert first.graph.n_neighbors == 0  # the earlier config is untouched (frozen; a new copy was made)
    assert est.experiment_config().graph.n_neighbors == 7
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy.config == est.config
    assert est.set_params(config__graph=first.graph).config.graph == first.graph  # a whole section


@pytest.mark.parametrize(
    "params, match",
    [
        ({"config__graph__nope": 1}, "config__graph__nope: fields of config section 'graph' are n_neighbors"),
        ({"config__nope__n_neighbors": 1}, "config__nope__n_neighbors: config sections are model, graph"),
        ({"config__train__progress": True}, "verbose parameter"),
        ({"config__model__temperature": -1.0}, "model.temperature must be > 0"),
        ({"config__graph": 3}, "config__graph must be a GraphConfig"),
    ],
)
def test_set_params_refuses_unknown_or_invalid_settings(params, match):
    with pytest.raises(ValueError, match=match):
        SpecRaGE().set_params(**params)


def test_a_named_parameter_takes_precedence_and_a_conflicting_nested_one_is_refused():
    with pytest.raises(ValueError, match="config__graph__n_neighbors=10 is shadowed by n_neighbors=5"):
        SpecRaGE(n_neighbors=5).set_params(config__graph__n_neighbors=10)
    assert SpecRaGE(n_neighbors=5).set_params(config__graph__n_neighbors=5).experiment_config().graph.n_neighbors == 5
    # a preset as the base, refined by a named parameter; the estimator stays quiet unless verbose
    config = SpecRaGE(n_clusters=10, config=preset("digits"), n_neighbors=15).experiment_config()
    assert config.graph.n_neighbors == 15 and config.model.temperature == preset("digits").model.temperature
    assert config.data.preprocess == "minmax" and config.train.progress is False
    # config_overrides still come last
    overridden = SpecRaGE(config=preset("digits"), config_overrides=["graph.n_neighbors=12"]).experiment_config()
    assert overridden.graph.n_neighbors == 12
    with pytest.raises(ValueError, match="config must be None or a specrage_jax.ExperimentConfig"):
        SpecRaGE(config={"graph": {}}).experiment_config()


def test_grid_search_applies_nested_settings(blobs):
    # two neighbour counts and a temperature far from the default's 1: four fits in all
    grid = {"config__graph__n_neighbors": [5, 10], "config__model__temperature": [50.0]}
    scoring = {
        "loss": lambda est, x, y=None: est.score(x),
        # what the fitted estimator trained with, read back from its resolved configuration
        "n_neighbors": lambda est, x, y=None: est.config_.graph.n_neighbors,
        "temperature": lambda est, x, y=None: est.config_.model.temperature,
    }
    search = GridSearchCV(SpecRaGE(**FAST), grid, cv=2, scoring=scoring, refit=False).fit(blobs)
    results = search.cv_results_
    assert len(results["params"]) == 2
    np.testing.assert_array_equal(results["mean_test_n_neighbors"], results["param_config__graph__n_neighbors"])
    np.testing.assert_array_equal(results["mean_test_temperature"], results["param_config__model__temperature"])
    assert list(results["mean_test_n_neighbors"]) == [5, 10] and set(results["mean_test_temperature"]) == {50.0}
    assert np.isfinite(results["mean_test_loss"]).all()


def test_n_clusters_left_out_warns_and_fits_eight(blobs, tmp_path):
    est = SpecRaGE(**{**FAST, "n_clusters": None, "config": preset("blobs")})
    with pytest.warns(UserWarning, match="n_clusters not given; k-means fits 8 clusters"):
        est.fit(blobs)
    assert est.n_clusters_ == 8 and est.cluster_centers_.shape == (8, 4)
    assert est.config_.graph.n_neighbors == preset("blobs").graph.n_neighbors  # the config parameter's
    loaded = SpecRaGE.load(est.save(tmp_path / "model"))
    assert loaded.get_params() == est.get_params() and loaded.n_clusters_ == 8
    np.testing.assert_array_equal(loaded.predict(blobs), est.predict(blobs))


def test_an_optimizer_parameter_sets_the_rate_and_clones():
    chained = optax.chain(optax.clip_by_global_norm(1.0), optax.inject_hyperparams(optax.adam)(learning_rate=2e-3))
    assert SpecRaGE(optimizer=chained).experiment_config().train.learning_rate == 2e-3  # its injected rate
    assert SpecRaGE(optimizer=ADAMW).experiment_config() == SpecRaGE().experiment_config()  # keeps its rate
    est = SpecRaGE(n_clusters=3, optimizer=ADAMW)
    copy = clone(est)
    assert copy.optimizer == ADAMW and copy.get_params() == est.get_params()
    assert SpecRaGE().get_params()["optimizer"] is None
    with pytest.raises(ValueError, match="learning_rate .* or optimizer .* not both"):
        SpecRaGE(optimizer=ADAMW, learning_rate=1e-2).experiment_config()
    with pytest.raises(ValueError, match="optimizer must be None .* or an optax.GradientTransformation"):
        SpecRaGE(optimizer="adamw").experiment_config()


def test_an_estimator_fits_with_its_optimizer_reproducibly_and_keeps_it_through_clone(blobs, tmp_path):
    est = SpecRaGE(**FAST, optimizer=ADAMW).fit(blobs)
    embedding = est.transform(blobs)
    assert est.state_.tx is ADAMW
    assert all(np.isnan(r.learning_rate) for r in est.history_.epochs)  # its own rate: no plateau schedule
    default = SpecRaGE(**FAST).fit(blobs)
    assert default.state_.tx is adam_optimizer()
    assert np.abs(embedding - default.transform(blobs)).max() > 1e-4
    again = clone(est).fit(blobs)  # fitted a second time, from the clone's copy of the optimizer
    assert again.optimizer == ADAMW
    np.testing.assert_array_equal(again.transform(blobs), embedding)
    # a saved or pickled estimator is for inference: its optimizer is the default Adam, the embedding bitwise kept
    loaded = SpecRaGE.load(est.save(tmp_path / "model"))
    assert loaded.optimizer is None and loaded.state_.tx is adam_optimizer()
    np.testing.assert_array_equal(loaded.transform(blobs), embedding)
    unpickled = pickle.loads(pickle.dumps(est.set_params(optimizer=None)))  # optax's closures do not pickle
    assert unpickled.state_.tx is adam_optimizer()
    np.testing.assert_array_equal(unpickled.transform(blobs), embedding)


def test_constructor_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        SpecRaGE(10)  # type: ignore[misc]
    assert SpecRaGE(n_components=10).n_components == 10
