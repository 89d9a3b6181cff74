"""The building blocks of the configuration sections: the field helper that carries each
setting's help text (``--help`` lists it), the value checks, and the sentinel values that mean
"resolved from the data at fit"."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def setting(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


def check_choice(section: str, name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{section}.{name} must be one of {', '.join(allowed)}; got {value!r}")


def check_positive(section: str, name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{section}.{name} must be > 0; got {value!r}")


AUTO_WIDTHS = (0,)  # model.view_hidden value resolved from the data at fit
AUTO_COMPONENTS = -1  # model.n_components value resolved from the data at fit (at least the clusters asked for)
ACTIVATIONS = ("relu", "leaky_relu", "tanh", "gelu", "none")
FUSIONS = ("weighting", "average", "linear", "concat", "attention")
OUTPUT_ROWS = ("raw", "unit")
OUTPUT_SCALINGS = ("heat", "none")
MISSING_VIEW_DEGREES = ("views", "samples", "none")  # graph.missing_view_degrees
DEGREE_NORMALIZATIONS = ("none", "samples", "auto")  # graph.degree_normalization
SIAMESE_POSITIVES = ("own", "joint")  # siamese.positives: each view's own neighbours, or all views' together
PREPROCESS_KINDS = ("auto", "standard", "minmax", "none", "l2", "standard_l2", "svd_l2", "idf_l2", "hellinger")
AUTO = "auto"  # data.preprocess value resolved per view at fit (specrage_jax.training.defaults)
AUTO_MIN_LR = 1e-5  # the defaults stop at two decades below the default rate (two plateaus); presets at 1e-8
AUTO_VIEW_NET_STEPS = -1  # train.view_net_steps resolved at fit (training.defaults)
AUTO_STEPS_PER_EPOCH = -1  # train.steps_per_epoch resolved at fit: one pass, at least a few steps (training.defaults)
VIEW_NETS_UNTIL_STALL = -2  # train.view_net_steps: the view nets train until the watched loss stalls
