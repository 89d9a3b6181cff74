"""The scikit-learn parameters of ``SpecRaGE`` as an :class:`~specrage_jax.config.ExperimentConfig`:
None leaves a setting to the data (:meth:`ExperimentConfig.auto`), anything given is used as given."""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from specrage_jax.config import ExperimentConfig
from specrage_jax.overrides import apply_overrides


def config_from_params(params: dict[str, Any]) -> ExperimentConfig:
    """The ExperimentConfig that ``SpecRaGE(**params)`` trains with (its ``config_overrides``
    applied last; what ``SpecRaGE.experiment_config`` returns).

    Raises:
      ValueError: naming the parameter or config field that is out of range.
    """
    n_clusters, n_components = params["n_clusters"], params["n_components"]
    if not is_positive_int(n_clusters):
        raise ValueError(f"n_clusters must be an integer >= 1, got {n_clusters!r}")
    if n_components is not None and not is_positive_int(n_components):
        raise ValueError(f"n_components must be None or an integer >= 1, got {n_components!r}")
    validation_fraction = params["validation_fraction"]
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in [0, 1), got {validation_fraction!r}")
    if isinstance(params["config_overrides"], str):
        raise ValueError("config_overrides must be a list of 'section.field=value' strings, not one string")
    base = ExperimentConfig.auto()
    view_hidden = params["view_hidden"]
    config = dataclasses.replace(
        base,
        model=dataclasses.replace(
            base.model,
            n_components=base.model.n_components if n_components is None else int(n_components),
            temperature=float(params["temperature"]),
            view_hidden=base.model.view_hidden if view_hidden is None else tuple(int(w) for w in view_hidden),
            weighting_hidden=tuple(int(w) for w in params["weighting_hidden"]),
        ),
        graph=dataclasses.replace(
            base.graph,
            n_neighbors=auto_int(params["n_neighbors"], "n_neighbors"),
            scale_neighbor=int(params["scale_neighbor"]),
            scale_mode=params["scale_mode"],
        ),
        train=dataclasses.replace(
            base.train,
            epochs=auto_int(params["max_epochs"], "max_epochs"),
            batch_size=auto_int(params["batch_size"], "batch_size"),
            learning_rate=float(params["learning_rate"]),
            progress=bool(params["verbose"]),
        ),
        siamese=dataclasses.replace(base.siamese, enabled=bool(params["siamese"])),
        autoencoder=dataclasses.replace(base.autoencoder, enabled=bool(params["autoencoder"])),
        data=dataclasses.replace(base.data, preprocess=params["preprocess"]),
    )
    config = apply_overrides(config, list(params["config_overrides"]))
    if config.model.n_components == 0:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, n_components=int(n_clusters)))
    return config


def is_positive_int(value: Any) -> bool:
    """An integer (Python or NumPy, not bool-like floats) of at least 1."""
    return isinstance(value, numbers.Integral) and int(value) >= 1


def auto_int(value: Any, name: str) -> int:
    """A parameter that None leaves to the data (the config's 0) or a positive integer."""
    if value is None:
        return 0
    if not is_positive_int(value):
        raise ValueError(f"{name} must be None (chosen from the data) or an integer >= 1, got {value!r}")
    return int(value)
