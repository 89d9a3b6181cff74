"""The estimator's parameters: every configuration field without a named parameter as a nested
scikit-learn parameter (``config__<section>__<field>``) that set_params, clone and GridSearchCV
handle, one key per setting, the ``config`` parameter as the base the named parameters refine, the
n_clusters default, and the ``optimizer`` parameter (an optax transformation) through fit, clone,
save and pickle."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import optax
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

from specrage_jax import ExperimentConfig, SpecRaGE, preset
from specrage_jax.api.params import CONFIG_PREFIX, NAMED_FIELDS
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


def test_every_config_field_without_a_named_parameter_is_a_nested_parameter():
    params = SpecRaGE().get_params(deep=True)
    config = ExperimentConfig()
    named = set(NAMED_FIELDS.values())
    for section in dataclasses.fields(config):
        values = getattr(config, section.name)
        assert params[f"config__{section.name}"] == values
        for field in dataclasses.fields(values):
            key = f"config__{section.name}__{field.name}"
            if (section.name, field.name) in named:  # its named parameter sets it
                assert key not in params
            else:
                assert params[key] == getattr(values, field.name)
    assert "config__train__progress" not in params and "config__graph__n_neighbors" not in params
    assert set(SpecRaGE().get_params(deep=False)) <= set(params)


def field_of(key: str) -> tuple[str, str] | None:
    """The configuration field (section, field) that the get_params key ``key`` sets; None for a
    parameter that sets no one field (a whole section, ``config``, ``n_clusters``, ...)."""
    if key in NAMED_FIELDS:
        return NAMED_FIELDS[key]
    section, _, field = key.removeprefix(CONFIG_PREFIX).partition("__")
    return (section, field) if key.startswith(CONFIG_PREFIX) and field else None


@pytest.mark.parametrize("config", [None, preset("digits")])
def test_each_setting_has_one_key(config):
    fields = [field_of(key) for key in SpecRaGE(config=config).get_params(deep=True)]
    fields = [field for field in fields if field is not None]
    repeated = sorted({field for field in fields if fields.count(field) > 1})
    assert not repeated, f"settings reachable under two keys: {repeated}"
    assert set(NAMED_FIELDS.values()) <= set(fields)


def test_set_params_builds_new_frozen_configs_and_clone_round_trips():
    est = SpecRaGE(n_clusters=3).set_params(config__graph__bandwidth_factor=1.0, config__model__fusion="average")
    first = est.config
    assert first.graph.bandwidth_factor == 1.0 and first.model.fusion == "average"
    assert first.graph.n_neighbors == ExperimentConfig().graph.n_neighbors  # the rest: the defaults
    est.set_params(config__graph__scale_sample_batches=np.int64(7))  # a parameter grid's NumPy scalar
    assert est.config.graph.scale_sample_batches == 7 and type(est.config.graph.scale_sample_batches) is int
    assert first.graph.scale_sample_batches == 8  # the earlier config is untouched (frozen; a new copy was made)
    assert est.experiment_config().graph.scale_sample_batches == 7
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy.config == est.config
    assert pickle.loads(pickle.dumps(est)).get_params() == est.get_params()
    assert est.set_params(config__graph=first.graph).config.graph == first.graph  # a whole section


@pytest.mark.parametrize(
    "params, match",
    [
        ({"config__graph__nope": 1}, "config__graph__nope: fields of config section 'graph' are n_neighbors"),
        ({"config__nope__n_neighbors": 1}, "config__nope__n_neighbors: config sections are model, graph"),
        ({"config__graph__bandwidth_factor": -1.0}, "graph.bandwidth_factor must be > 0"),
        ({"config__graph": 3}, "config__graph must be a GraphConfig"),
    ],
)
def test_set_params_refuses_unknown_or_invalid_settings(params, match):
    with pytest.raises(ValueError, match=match):
        SpecRaGE().set_params(**params)


@pytest.mark.parametrize(("key", "parameter"), [(f"config__{s}__{f}", name) for name, (s, f) in NAMED_FIELDS.items()])
def test_set_params_refuses_a_nested_key_of_a_named_parameter(key, parameter):
    est = SpecRaGE(n_neighbors=5)
    with pytest.raises(ValueError, match=f"{key} is set through {parameter}"):
        est.set_params(**{key: 3})
    assert est.config is None and est.n_neighbors == 5  # left as it was


def test_a_named_parameter_refines_the_config():
    # a preset as the base, refined by a named parameter; the estimator stays quiet unless verbose
    config = SpecRaGE(n_clusters=10, config=preset("digits"), n_neighbors=15).experiment_config()
    assert config.graph.n_neighbors == 15 and config.model.temperature == preset("digits").model.temperature
    assert config.data.preprocess == "minmax" and config.train.progress is False
    # config_overrides still come last
    overridden = SpecRaGE(config=preset("digits"), config_overrides=["graph.n_neighbors=12"]).experiment_config()
    assert overridden.graph.n_neighbors == 12
    with pytest.raises(ValueError, match="config must be None or a specrage_jax.ExperimentConfig"):
        SpecRaGE(config={"graph": {}}).experiment_config()


def test_grid_search_applies_named_and_nested_settings(blobs):
    # two neighbour counts (named) and a bandwidth factor off the default's 2 (nested): four fits in all
    grid = {"n_neighbors": [5, 10], "config__graph__bandwidth_factor": [1.0]}
    scoring = {
        "loss": lambda est, x, y=None: est.score(x),
        # what the fitted estimator trained with, read back from its resolved configuration
        "n_neighbors": lambda est, x, y=None: est.config_.graph.n_neighbors,
        "bandwidth": lambda est, x, y=None: est.config_.graph.bandwidth_factor,
    }
    search = GridSearchCV(SpecRaGE(**FAST), grid, cv=2, scoring=scoring, refit=False).fit(blobs)
    results = search.cv_results_
    assert len(results["params"]) == 2
    np.testing.assert_array_equal(results["mean_test_n_neighbors"], results["param_n_neighbors"])
    np.testing.assert_array_equal(results["mean_test_bandwidth"], results["param_config__graph__bandwidth_factor"])
    assert list(results["mean_test_n_neighbors"]) == [5, 10] and set(results["mean_test_bandwidth"]) == {1.0}
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
