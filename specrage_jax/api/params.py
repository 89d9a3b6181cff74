"""The scikit-learn parameters of ``SpecRaGE`` as an :class:`~specrage_jax.config.ExperimentConfig`.

The estimator starts from its ``config`` parameter (None: :meth:`ExperimentConfig.auto`, the
data-aware defaults); each named parameter other than None sets its field on top (:data:`NAMED_FIELDS`);
``config_overrides`` come last. Every section is a nested parameter ``config__<section>``, and every
field without a named parameter is a nested parameter ``config__<section>__<field>``
(:func:`nested_config_params`, :func:`with_nested_params`), which is how GridSearchCV reaches the
settings that have no named parameter. A field with a named parameter is reached only through it,
so that each setting has one key in ``get_params``.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np
import optax

from specrage_jax.config import ExperimentConfig
from specrage_jax.nets.state import optimizer_learning_rate
from specrage_jax.overrides import _field_types, apply_overrides

N_CLUSTERS_DEFAULT = 8  # what n_clusters=None uses (scikit-learn's KMeans default), with a warning at fit
CONFIG_PREFIX = "config__"

# The named parameters that set a configuration field: parameter -> (section, field).
NAMED_FIELDS: dict[str, tuple[str, str]] = {
    "n_components": ("model", "n_components"),
    "temperature": ("model", "temperature"),
    "view_hidden": ("model", "view_hidden"),
    "weighting_hidden": ("model", "weighting_hidden"),
    "n_neighbors": ("graph", "n_neighbors"),
    "scale_neighbor": ("graph", "scale_neighbor"),
    "scale_mode": ("graph", "scale_mode"),
    "batch_size": ("train", "batch_size"),
    "learning_rate": ("train", "learning_rate"),
    "max_epochs": ("train", "epochs"),
    "verbose": ("train", "progress"),  # always applied: the config's train.progress is not read
    "validation_fraction": ("data", "val_fraction"),
    "preprocess": ("data", "preprocess"),
    "siamese": ("siamese", "enabled"),
    "autoencoder": ("autoencoder", "enabled"),
}
_PARAMETER_OF = {field: name for name, field in NAMED_FIELDS.items()}
_POSITIVE_INTS = ("n_components", "n_neighbors", "batch_size", "max_epochs")


def base_config(config: Any) -> ExperimentConfig:
    """What the estimator starts from: its ``config`` parameter, or ``ExperimentConfig()`` for None.

    Raises:
      ValueError: ``config`` is neither None nor an ExperimentConfig.
    """
    if config is None:
        return ExperimentConfig()
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config must be None or a specrage_jax.ExperimentConfig, got {config!r}")
    return config


def n_clusters_of(n_clusters: Any) -> int:
    """The clusters k-means fits: ``n_clusters``, or :data:`N_CLUSTERS_DEFAULT` for None.

    Raises:
      ValueError: not None and not an integer >= 1.
    """
    if n_clusters is None:
        return N_CLUSTERS_DEFAULT
    if not is_positive_int(n_clusters):
        raise ValueError(
            f"n_clusters must be an integer >= 1 (or None: {N_CLUSTERS_DEFAULT}, with a warning), got {n_clusters!r}"
        )
    return int(n_clusters)


def named_value(name: str, value: Any) -> Any:
    """The configuration value of the named parameter ``name`` (not None), as the field holds it.

    Raises:
      ValueError: naming the parameter, for a value of the wrong kind.
    """
    if name in _POSITIVE_INTS:
        if not is_positive_int(value):
            raise ValueError(f"{name} must be None (the config's value) or an integer >= 1, got {value!r}")
        return int(value)
    if name in ("view_hidden", "weighting_hidden"):
        return tuple(int(w) for w in value)
    if name in ("temperature", "learning_rate", "validation_fraction"):
        return float(value)
    if name == "scale_neighbor":
        return int(value)
    if name in ("siamese", "autoencoder", "verbose"):
        return bool(value)
    return value


def config_from_params(params: dict[str, Any]) -> ExperimentConfig:
    """The ExperimentConfig that ``SpecRaGE(**params)`` trains with (what
    ``SpecRaGE.experiment_config`` returns): ``config`` (None: the data-aware defaults), the named
    parameters other than None on top, ``config_overrides`` last; ``model.n_components`` 0 becomes
    the number of clusters. An ``optimizer`` that holds an injected learning rate sets
    ``train.learning_rate`` to it (the optimizer is the rate's one source; the plateau schedule
    starts there).

    Raises:
      ValueError: naming the parameter or config field that is out of range; an ``optimizer``
        that is not an optax GradientTransformation, or given with ``learning_rate``.
    """
    n_clusters = n_clusters_of(params["n_clusters"])
    if isinstance(params["config_overrides"], str):
        raise ValueError("config_overrides must be a list of 'section.field=value' strings, not one string")
    config = base_config(params.get("config"))
    changes: dict[str, dict[str, Any]] = {}
    for name, (section, field) in NAMED_FIELDS.items():
        if params.get(name) is not None:
            changes.setdefault(section, {})[field] = named_value(name, params[name])
    for section, fields in changes.items():
        config = dataclasses.replace(config, **{section: dataclasses.replace(getattr(config, section), **fields)})
    config = apply_overrides(config, list(params["config_overrides"]))
    if not 0.0 <= config.data.val_fraction < 1.0:
        raise ValueError(f"validation_fraction must be in [0, 1) (data.val_fraction), got {config.data.val_fraction!r}")
    if config.model.n_components == 0:
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, n_components=n_clusters))
    rate = optimizer_rate(params.get("optimizer"), params.get("learning_rate"))
    if rate is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, learning_rate=rate))
    return config


def optimizer_rate(optimizer: Any, learning_rate: Any) -> float | None:
    """The injected learning rate of the estimator's ``optimizer`` (None: no optimizer, or one
    that keeps its rate to itself).

    Raises:
      ValueError: ``optimizer`` is neither None nor an optax GradientTransformation; both
        ``optimizer`` and ``learning_rate`` are given (the rate belongs inside the optimizer).
    """
    if optimizer is None:
        return None
    if not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(
            f"optimizer must be None (Adam at learning_rate) or an optax.GradientTransformation, got {optimizer!r}"
        )
    if learning_rate is not None:
        raise ValueError(
            "SpecRaGE takes learning_rate (for the default Adam) or optimizer (holding its own rate), not both: "
            "build the optimizer with the rate, e.g. optax.adamw(learning_rate=...)"
        )
    return optimizer_learning_rate(optimizer)


def nested_config_params(config: ExperimentConfig) -> dict[str, Any]:
    """``config``'s sections and fields as scikit-learn nested parameters: ``config__graph`` (the
    GraphConfig), ``config__graph__bandwidth_factor`` (its field), ... The fields of
    :data:`NAMED_FIELDS` are left out: their named parameters set them."""
    params: dict[str, Any] = {}
    for section in dataclasses.fields(config):
        values = getattr(config, section.name)
        params[f"{CONFIG_PREFIX}{section.name}"] = values
        for field in dataclasses.fields(values):
            if (section.name, field.name) not in _PARAMETER_OF:
                params[f"{CONFIG_PREFIX}{section.name}__{field.name}"] = getattr(values, field.name)
    return params


def with_nested_params(config: ExperimentConfig, nested: dict[str, Any]) -> ExperimentConfig:
    """``config`` (frozen) with ``nested`` set: keys "section" (a whole section) or "section__field"
    (``config__`` already stripped), values coerced to the field's type.

    Raises:
      ValueError: an unknown section or field (listing the known ones); a field that a named
        parameter sets (naming it); a value the section rejects.
    """
    sections = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for key, value in nested.items():
        section, _, name = key.partition("__")
        if section not in sections:
            raise ValueError(f"invalid parameter {CONFIG_PREFIX}{key}: config sections are {', '.join(sections)}")
        if name:
            sections[section] = _with_field(sections[section], section, name, value)
        elif isinstance(value, type(sections[section])):
            sections[section] = value
        else:
            raise ValueError(f"{CONFIG_PREFIX}{section} must be a {type(sections[section]).__name__}, got {value!r}")
    return dataclasses.replace(config, **sections)


def _with_field(values: Any, section: str, name: str, value: Any) -> Any:
    """The config section ``values`` with its field ``name`` set to ``value`` (coerced).

    Raises:
      ValueError: an unknown field (listing the known ones); a field that a named parameter sets.
    """
    key = f"{CONFIG_PREFIX}{section}__{name}"
    hints = _field_types(type(values))
    if name not in hints:
        raise ValueError(f"invalid parameter {key}: fields of config section {section!r} are {', '.join(hints)}")
    parameter = _PARAMETER_OF.get((section, name))
    if parameter is not None:
        raise ValueError(f"{key} is set through {parameter}: set_params({parameter}=...) instead")
    return dataclasses.replace(values, **{name: _coerced(value, hints[name])})


def _coerced(value: Any, hint: Any) -> Any:
    """NumPy scalars and lists (what a parameter grid holds) as the field's Python type, so the
    configuration stays JSON-able and compares equal; anything else as given (the section checks it)."""
    if hint is bool and isinstance(value, (bool, np.bool_)):
        return bool(value)
    if hint is int and isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    if hint is float and isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    if hint is str and isinstance(value, str):
        return str(value)
    if str(hint).startswith("tuple") and isinstance(value, (list, tuple, np.ndarray)):
        return tuple(int(v) for v in value)
    return value


def is_positive_int(value: Any) -> bool:
    """An integer (Python or NumPy, not bool-like floats) of at least 1."""
    return isinstance(value, numbers.Integral) and int(value) >= 1
