"""Tests for specrage_jax.training.schedule (plateau policy) and specrage_jax.config (overrides, field listing)."""

from __future__ import annotations

import dataclasses

import pytest

from specrage_jax.api.params import base_config
from specrage_jax.cli import config_help
from specrage_jax.config import AUTO_WIDTHS, ExperimentConfig
from specrage_jax.overrides import apply_overrides, config_from_dict, config_to_dict, describe_fields
from specrage_jax.presets import PRESET_BASE, preset, preset_base
from specrage_jax.training.schedule import PlateauState, plateau_update, should_stop


def run_plateau(losses, *, lr=1.0, factor=0.1, patience=2):
    """Feeds the losses one epoch at a time; returns the learning rate after each epoch and the last state."""
    plateau, rates = PlateauState(), []
    for loss in losses:
        plateau, lr = plateau_update(plateau, loss, lr, factor=factor, patience=patience)
        rates.append(lr)
    return rates, plateau


def test_improving_loss_keeps_learning_rate():
    rates, plateau = run_plateau([5.0, 4.0, 3.0, 2.0, 1.0])
    assert rates == [1.0] * 5
    assert plateau == PlateauState(best=1.0, bad_epochs=0)


def test_drop_only_after_more_than_patience_bad_epochs():
    # Epoch 0 sets best = 1; epochs 1, 2 are bad (patience 2: no drop yet); epoch 3 is the third: drop.
    rates, plateau = run_plateau([1.0, 1.0, 1.5, 1.0], patience=2)
    assert rates == pytest.approx([1.0, 1.0, 1.0, 0.1])
    assert plateau.bad_epochs == 0  # the counter resets with the drop
    assert plateau.best == 1.0


def test_counter_resets_after_a_drop_and_after_an_improvement():
    # Drop at epoch 3; the next drop needs another 3 bad epochs (4, 5, 6) -> at epoch 6.
    rates, _ = run_plateau([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], patience=2)
    assert rates == pytest.approx([1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 0.01])
    # An improvement at epoch 3 resets the count: no drop within the next two bad epochs.
    rates, plateau = run_plateau([1.0, 1.0, 1.0, 0.5, 0.5, 0.5], patience=2)
    assert rates == pytest.approx([1.0] * 6)
    assert plateau == PlateauState(best=0.5, bad_epochs=2)


def test_improvement_below_relative_threshold_counts_as_bad():
    plateau, lr = plateau_update(
        PlateauState(best=1.0, bad_epochs=0), 1.0 - 1e-6, 1.0, factor=0.1, patience=0, rel_threshold=1e-4
    )
    assert lr == pytest.approx(0.1)
    assert plateau.best == 1.0
    plateau, lr = plateau_update(
        PlateauState(best=1.0, bad_epochs=0), 0.99, 1.0, factor=0.1, patience=0, rel_threshold=1e-4
    )
    assert lr == 1.0 and plateau.best == 0.99


def test_should_stop_after_five_drops_from_1e_3():
    lr, stops = 1e-3, []
    for _ in range(5):
        stops.append(should_stop(lr, 1e-8))
        lr *= 0.1
    assert stops == [False] * 5
    assert lr != 1e-8  # floating point: 1e-3 * 0.1**5 is not exactly 1e-8
    assert should_stop(lr, 1e-8)
    assert not should_stop(1.1e-8, 1e-8)
    assert should_stop(1e-9, 1e-8)


def test_apply_overrides_parses_each_field_type():
    base = ExperimentConfig()
    config = apply_overrides(
        base,
        [
            "model.view_hidden=64,32",
            "model.n_components=7",
            "model.temperature=2.5",
            "model.hidden_activation=gelu",
            "ortho.grad_through_r_inv=false",
            "graph.include_self=True",
            "graph.symmetrize=max",
            "train.learning_rate=3e-4",
            "model.weighting_hidden=(8)",
        ],
    )
    assert config.model.view_hidden == (64, 32)
    assert config.model.n_components == 7 and isinstance(config.model.n_components, int)
    assert config.model.temperature == 2.5 and isinstance(config.model.temperature, float)
    assert config.model.hidden_activation == "gelu"
    assert config.ortho.grad_through_r_inv is False
    assert config.graph.include_self is True
    assert config.graph.symmetrize == "max"
    assert config.train.learning_rate == pytest.approx(3e-4)
    assert config.model.weighting_hidden == (8,)
    # Untouched fields keep their defaults; the input is not mutated.
    assert config.graph.n_neighbors == base.graph.n_neighbors
    assert base.ortho.grad_through_r_inv is True and base.model.view_hidden == AUTO_WIDTHS


def test_later_override_wins():
    config = apply_overrides(ExperimentConfig(), ["graph.n_neighbors=5", "graph.n_neighbors=9"])
    assert config.graph.n_neighbors == 9


@pytest.mark.parametrize(
    "item, named",
    [
        ("modle.n_components=3", "modle"),
        ("model.n_compnents=3", "n_compnents"),
        ("n_components=3", "n_components"),
    ],
)
def test_apply_overrides_names_unknown_key(item, named):
    with pytest.raises(ValueError, match=named):
        apply_overrides(ExperimentConfig(), [item])


@pytest.mark.parametrize(
    "item", ["model.n_components=three", "ortho.refine=maybe", "model.view_hidden=a,b", "graph.n_neighbors"]
)
def test_apply_overrides_rejects_bad_values(item):
    with pytest.raises(ValueError):
        apply_overrides(ExperimentConfig(), [item])


def test_describe_fields_lists_every_field():
    config = ExperimentConfig()
    rows = describe_fields(config)
    keys = [key for key, _, _ in rows]
    expected = [
        f"{section.name}.{f.name}"
        for section in dataclasses.fields(config)
        for f in dataclasses.fields(getattr(config, section.name))
    ]
    assert keys == expected
    assert len(set(keys)) == len(keys) > 20
    assert all(help_text for _, _, help_text in rows)
    values = dict((key, value) for key, value, _ in rows)
    assert values["model.view_hidden"] == repr(AUTO_WIDTHS)
    changed = apply_overrides(config, ["graph.n_neighbors=11"])
    assert dict((k, v) for k, v, _ in describe_fields(changed))["graph.n_neighbors"] == "11"


def test_every_field_is_reachable_from_an_override():
    config = ExperimentConfig()
    for section in dataclasses.fields(config):
        sub = getattr(config, section.name)
        for f in dataclasses.fields(sub):
            value = getattr(sub, f.name)
            text = ",".join(str(v) for v in value) if isinstance(value, tuple) else str(value)
            round_trip = getattr(apply_overrides(config, [f"{section.name}.{f.name}={text}"]), section.name)
            assert getattr(round_trip, f.name) == value, f"{section.name}.{f.name}"
            assert type(getattr(round_trip, f.name)) is type(value), f"{section.name}.{f.name}"


def test_a_record_without_a_newer_field_loads_as_the_code_that_wrote_it_ran():
    """A field missing from a saved record predates it: it takes the presets' fixed value (the
    behaviour before the field), not the one default's "from the data" or newly-on value."""
    record = config_to_dict(ExperimentConfig())
    for section, name in (("model", "single_view_nets"), ("graph", "weight_entropy"), ("train", "view_net_steps")):
        del record[section][name]
    loaded = config_from_dict(record)
    assert loaded.model.single_view_nets is False and ExperimentConfig().model.single_view_nets is True
    assert loaded.graph.weight_entropy == 0.0 and loaded.train.view_net_steps == 0
    assert loaded.graph.n_neighbors == 0  # a field the record has keeps its recorded value
    assert config_from_dict(config_to_dict(ExperimentConfig())) == ExperimentConfig()


def test_one_default_for_the_sections_the_estimator_the_cli_and_the_presets_base():
    """``ExperimentConfig()`` is what runs when nothing is set: each section's own defaults, the
    estimator's base and the plain --help agree with it; the presets start from a named base."""
    default = ExperimentConfig()
    for section in dataclasses.fields(default):
        assert type(getattr(default, section.name))() == getattr(default, section.name), section.name
    assert base_config(None) == default == ExperimentConfig.auto()
    assert preset("file:mine.npz") == default
    listed = {
        line.split(" = ")[0].strip()
        for line in config_help(None).splitlines()
        if line.startswith("  ") and not line.startswith("   ") and " = " in line
    }
    assert listed == {key for key, _, _ in describe_fields(default)}
    base = preset_base()
    assert base.unresolved_fields() == ["model.output_rows"]  # the base leaves only the rows to the run
    changed = {
        f"{section}.{name}"
        for section in PRESET_BASE
        for name in PRESET_BASE[section]
        if getattr(getattr(base, section), name) != getattr(getattr(default, section), name)
    }
    assert changed == {f"{section}.{name}" for section, names in PRESET_BASE.items() for name in names}
