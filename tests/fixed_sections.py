"""Configuration sections with every setting fixed: the named presets' base
(:func:`specrage_jax.presets.preset_base`), for tests that drive the low-level API (the state,
the steps, the loop) directly, where no data resolves the defaults' "from the data" values."""

from __future__ import annotations

import dataclasses
from typing import Any

from specrage_jax.config import DataConfig, ExperimentConfig, GraphConfig, ModelConfig, TrainConfig
from specrage_jax.presets import preset_base

FIXED = preset_base()


def fixed_model(**changes: Any) -> ModelConfig:
    return dataclasses.replace(FIXED.model, **changes)


def fixed_graph(**changes: Any) -> GraphConfig:
    return dataclasses.replace(FIXED.graph, **changes)


def fixed_train(**changes: Any) -> TrainConfig:
    return dataclasses.replace(FIXED.train, **changes)


def fixed_data(**changes: Any) -> DataConfig:
    return dataclasses.replace(FIXED.data, **changes)


def fixed_experiment(**sections: Any) -> ExperimentConfig:
    return dataclasses.replace(FIXED, **sections)
