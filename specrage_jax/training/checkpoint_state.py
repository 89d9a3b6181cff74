"""A SpecRaGE state in a checkpoint: its arrays by name (:func:`state_trees`), the JSON record
of its structure (:func:`structure_record`: view dims and the model/graph/ortho configurations),
the abstract state rebuilt from that record (:func:`template_from_record`) and the state
restored from saved arrays into it (:func:`state_from_trees`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from specrage_jax.config import GraphConfig, ModelConfig, OrthoConfig
from specrage_jax.nets.state import SpecRaGEState, create_state
from specrage_jax.overrides import section_from_dict
from specrage_jax.training.checkpoint_files import CheckpointError, leaf_paths, tree_from_nested


def structure_record(state: SpecRaGEState, model_config: ModelConfig | None = None) -> dict[str, Any]:
    """What rebuilds ``state``'s structure: view dims and the model/graph/ortho configurations
    (as JSON values: tuples become lists)."""
    return json.loads(
        json.dumps(
            {
                "view_dims": list(state.model().view_dims),
                "model_config": dataclasses.asdict(model_config_of(state, model_config)),
                "graph_config": dataclasses.asdict(state.graph),
                "ortho_config": dataclasses.asdict(state.ortho_config),
            }
        )
    )


def model_config_of(state: SpecRaGEState, given: ModelConfig | None = None) -> ModelConfig:
    """The ModelConfig the state's network was built from: ``given``, else the module's ``.config``.

    Raises:
      ValueError: if neither is available, or the network built from it would not have the
        state's parameter shapes.
    """
    config = given if given is not None else getattr(state.model(), "config", None)
    if not isinstance(config, ModelConfig):
        raise ValueError("the state's network does not expose its ModelConfig; pass model_config=")
    abstract = abstract_state(state.model().view_dims, config, state.graph, state.ortho_config)
    built = [(path, leaf.shape) for path, leaf in leaf_paths(abstract.params)]
    actual = [(path, tuple(np.shape(leaf))) for path, leaf in leaf_paths(state.params)]
    if built != actual:
        raise ValueError(
            f"model_config {config} does not describe the state's network (its parameters differ, "
            f"e.g. {sorted(set(actual) ^ set(built))[:3]})"
        )
    return config


def abstract_state(
    view_dims: Sequence[int],
    model: ModelConfig,
    graph: GraphConfig,
    ortho: OrthoConfig,
    learning_rate: float | None = None,
    tx: optax.GradientTransformation | None = None,
) -> SpecRaGEState:
    """The structure of ``create_state``'s result (with ``tx``, by default Adam) with
    jax.ShapeDtypeStruct leaves (traced, not run: no initialization cost)."""
    scales = np.ones(len(view_dims), np.float32)
    return jax.eval_shape(
        lambda: create_state(
            list(view_dims), model, graph, ortho, learning_rate=learning_rate, tx=tx, seed=0, view_scales=scales
        )
    )


def template_from_record(
    record: Mapping[str, Any], *, where: Path, tx: optax.GradientTransformation | None = None
) -> SpecRaGEState:
    """The recorded state's structure with the optimizer ``tx`` (None: the default Adam), abstract
    leaves that :func:`state_from_trees` fills."""
    try:
        model = section_from_dict(ModelConfig, record["model_config"], section="model")
        graph = section_from_dict(GraphConfig, record["graph_config"], section="graph")
        ortho = section_from_dict(OrthoConfig, record["ortho_config"], section="ortho")
        return abstract_state([int(d) for d in record["view_dims"]], model, graph, ortho, tx=tx)
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: the recorded model configuration cannot be rebuilt ({err})") from None


def state_trees(state: SpecRaGEState, *, include_optimizer: bool) -> dict[str, Any]:
    """The arrays of a state, by name (the optimizer state only when asked)."""
    trees = {
        "step": state.step,
        "params": state.params,
        "ortho": state.ortho,
        "view_scales": state.view_scales,
        "output_map": state.output_map,
    }
    if include_optimizer:
        trees["opt_state"] = state.opt_state
    return trees


def state_from_trees(
    template: SpecRaGEState, saved: Mapping[str, Any], *, where: Path, learning_rate: float | None = None
) -> SpecRaGEState:
    """``template`` (real or abstract leaves) with the saved arrays in place; without a saved
    optimizer state, a fresh state of the template's optimizer (``template.tx``), at
    ``learning_rate`` where given and the optimizer holds its rate as a hyperparameter. Saved
    without an output map (saved before it existed), the output map is the identity: the
    embedding that model always gave."""
    optional = [name for name in ("output_map", "opt_state") if name in saved]
    names = ["step", "params", "ortho", "view_scales", *optional]
    targets = {name: getattr(template, name) for name in names}
    restored = tree_from_nested(targets, {name: saved[name] for name in names}, where=str(where))
    if "opt_state" not in restored:
        restored["opt_state"] = template.tx.init(restored["params"])
    if "output_map" not in restored:
        restored["output_map"] = jnp.eye(template.ortho["r_inv"].shape[0], dtype=jnp.float32)
    state = template.replace(**restored)
    if "opt_state" not in saved and learning_rate is not None and state.learning_rate is not None:
        state = state.with_learning_rate(learning_rate)
    k = template.ortho["r_inv"].shape[0]
    chex.assert_shape(state.r_inv, (k, k))
    return state
