"""Settings as text: section.field=value overrides (the CLI's --set, the estimator's
config_overrides), the field listing of --help, and the JSON round trip of a configuration."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from typing import Any

from specrage_jax.config import ExperimentConfig
from specrage_jax.presets import PRESET_BASE


def _parse_value(text: str, annotation: Any) -> Any:
    hint = annotation if not isinstance(annotation, str) else eval(annotation, vars(typing), {})  # noqa: S307
    origin = typing.get_origin(hint)
    if hint is bool:
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true/false, got {text!r}")
    if hint is int:
        return int(text)
    if hint is float:
        return float(text)
    if hint is str:
        return text
    if origin is tuple:
        (item_type, _ellipsis) = typing.get_args(hint)
        parts = [p for p in text.replace("(", "").replace(")", "").split(",") if p.strip()]
        return tuple(item_type(p.strip()) for p in parts)
    if origin in (typing.Union, types.UnionType):
        raise ValueError(f"unsupported field type {hint}")
    raise ValueError(f"unsupported field type {hint}")


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def apply_overrides(config: ExperimentConfig, overrides: Sequence[str]) -> ExperimentConfig:
    """Returns ``config`` with each ``"section.field=value"`` applied.

    Raises:
      ValueError: naming the unknown section or field, or the value that does not parse.
    """
    sections = {f.name: f for f in dataclasses.fields(config)}
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects section.field=value, got {item!r}")
        section, dot, name = key.strip().partition(".")
        if not dot or section not in sections:
            raise ValueError(f"unknown config section in {item!r}; sections: {', '.join(sections)}")
        current = getattr(config, section)
        hints = _field_types(type(current))
        if name not in hints:
            raise ValueError(f"unknown field {name!r} in section {section!r}; fields: {', '.join(hints)}")
        try:
            value = _parse_value(text, hints[name])
        except ValueError as err:
            raise ValueError(f"--set {key}: cannot parse {text!r}: {err}") from err
        config = dataclasses.replace(config, **{section: dataclasses.replace(current, **{name: value})})
    return config


def describe_fields(config: ExperimentConfig) -> list[tuple[str, str, str]]:
    """(key, current value, help) for every config field, for --help and logs."""
    rows = []
    for section in dataclasses.fields(config):
        sub = getattr(config, section.name)
        for f in dataclasses.fields(sub):
            rows.append((f"{section.name}.{f.name}", repr(getattr(sub, f.name)), f.metadata.get("help", "")))
    return rows


def config_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    """The configuration as plain JSON-able values (tuples become lists); inverse: :func:`config_from_dict`."""
    return dataclasses.asdict(config)


def section_from_dict(cls: type, values: dict[str, Any], *, section: str = "") -> Any:
    """One config section rebuilt from :func:`config_to_dict` output (lists back to tuples).

    Fields missing from ``values`` (a record written before the field existed) take the value
    that behaves as the code that wrote it did: the presets' fixed base (:data:`PRESET_BASE`) for
    the settings ``ExperimentConfig()`` leaves to the data or turns on, else the default. An
    unknown field is an error.

    Raises:
      ValueError: naming the section and the unknown field, or the value the section rejects.
    """
    name = section or cls.__name__
    if not isinstance(values, dict):
        raise ValueError(f"config section {name!r} must be a mapping, got {type(values).__name__}")
    hints = _field_types(cls)
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ValueError(f"config section {name!r}: unknown fields {unknown}; known: {', '.join(hints)}")
    kwargs = {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}
    before_the_field = {key: value for key, value in PRESET_BASE.get(section, {}).items() if key in hints}
    return cls(**{**before_the_field, **kwargs})


def config_from_dict(values: dict[str, Any]) -> ExperimentConfig:
    """An ExperimentConfig from :func:`config_to_dict` output; missing sections take defaults."""
    sections = {f.name: f for f in dataclasses.fields(ExperimentConfig)}
    unknown = sorted(set(values) - set(sections))
    if unknown:
        raise ValueError(f"unknown config sections {unknown}; known: {', '.join(sections)}")
    hints = _field_types(ExperimentConfig)
    return ExperimentConfig(**{key: section_from_dict(hints[key], value, section=key) for key, value in values.items()})
