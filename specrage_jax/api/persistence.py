"""How a fitted estimator is kept: its save directory read back (SpecRaGE.load), a run's or a bare
model's pipeline as an estimator, and the plain arrays a pickle stores."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from specrage_jax.api.pipeline import InferencePipeline, model_directory, pipeline_from_model
from specrage_jax.config import ExperimentConfig
from specrage_jax.data.preprocess import scaler_from_tree
from specrage_jax.evaluation.health import HealthReport
from specrage_jax.nets.state import SpecRaGEState, adam_optimizer, create_state
from specrage_jax.overrides import config_from_dict, config_to_dict
from specrage_jax.training.checkpoint import read_model, save_model
from specrage_jax.training.checkpoint_files import CheckpointError, tree_to_nested
from specrage_jax.training.loop import History
from specrage_jax.training.pretrained import pretrained_record, pretrained_trees, restore_pretrained


def _json_value(value: Any) -> Any:
    """Tuples to lists and NumPy scalars to Python ones, for the JSON metadata of a checkpoint."""
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _tree_arrays(tree: Any) -> list[np.ndarray]:
    """The leaves of a pytree as host NumPy arrays (in jax.tree order)."""
    return [np.asarray(leaf) for leaf in jax.tree.leaves(tree)]


def _with_arrays(template: Any, arrays: Sequence[np.ndarray]) -> Any:
    """``template``'s pytree structure with ``arrays`` as its leaves."""
    leaves, treedef = jax.tree.flatten(template)
    if isinstance(template, SpecRaGEState) and len(arrays) == len(leaves) - 1:
        arrays = [*arrays, leaves[-1]]  # pickled before the output map existed: its identity
    if len(leaves) != len(arrays):
        raise ValueError(f"stored model has {len(arrays)} arrays, its configuration builds {len(leaves)}")
    return jax.tree.unflatten(treedef, [jnp.asarray(a) for a in arrays])


def _rebuild_state(in_dims: Sequence[int], config: ExperimentConfig, arrays: Sequence[np.ndarray]) -> SpecRaGEState:
    template = create_state(
        in_dims,
        config.model,
        config.graph,
        config.ortho,
        learning_rate=config.train.learning_rate,
        seed=0,
        view_scales=np.ones(len(in_dims), np.float32),
    )
    return _with_arrays(template, arrays)


def load_fitted(cls: type[Any], path: str | Path) -> Any:
    """``cls.load(path)``: the estimator saved in ``path`` (see ``SpecRaGE.load``)."""
    directory = model_directory(path)
    loaded = read_model(directory)
    meta = loaded.metadata
    if "estimator" not in meta:
        return estimator_from_pipeline(cls, pipeline_from_model(loaded, directory))
    if meta["estimator"] != cls.__name__:
        raise CheckpointError(f"{path} holds a {meta['estimator']} estimator, not a {cls.__name__}")
    tuples = ("view_hidden", "weighting_hidden", "view_dims", "config_overrides")
    params: dict[str, Any] = {k: tuple(v) if k in tuples and v is not None else v for k, v in meta["params"].items()}
    if params.get("config") is not None:
        params["config"] = config_from_dict(dict(params["config"]))
    est = cls(**params)
    config = config_from_dict(meta["config"])
    extra = loaded.extra_trees
    view_dims = tuple(int(d) for d in meta["view_dims"])
    est.config_, est.seed_, est.view_dims_ = config, int(meta["seed"]), view_dims
    est.resolved_defaults_ = dict(meta.get("resolved_defaults", {}))
    est.n_features_in_, est.n_components_ = int(sum(view_dims)), int(config.model.n_components)
    est.scalers_ = tuple(
        scaler_from_tree(extra["scalers"][f"view_{v}"], default_kind=config.data.preprocess)
        for v in range(len(view_dims))
    )
    if "pretrained" not in meta:
        raise CheckpointError(
            f"{path} was saved by an earlier specrage_jax (its pre-training nets are stored "
            f"in a layout this version does not read); fit and save it again"
        )
    nets = restore_pretrained(extra.get("pretrained", {}), meta["pretrained"], config, where=str(path))
    est.autoencoders_, est.siamese_nets_ = nets.autoencoders, nets.siamese
    est.state_ = loaded.state
    est.history_ = History.from_dict(meta["history"])
    est.n_iter_ = len(est.history_.epochs)
    est.cluster_centers_ = np.asarray(extra["clusters"]["centres"], np.float32)
    est.n_clusters_ = int(est.cluster_centers_.shape[0])
    labels = extra["clusters"].get("labels")  # absent for an estimator loaded from a run and saved again
    est.labels_ = None if labels is None else np.asarray(labels, np.int64)
    est.inertia_ = None if meta.get("inertia") is None else float(meta["inertia"])
    est.health_ = None if meta.get("health") is None else HealthReport.from_dict(meta["health"])
    return est


def estimator_from_pipeline(cls: type[Any], pipeline: InferencePipeline) -> Any:
    """An estimator of class ``cls`` over a run's (or a bare model's) inference pipeline."""
    meta = pipeline.model.metadata
    config = pipeline.config
    centres = pipeline.centres
    n_clusters = int(centres.shape[0]) if centres is not None else int(config.model.n_components)
    seed = meta.get("seed")
    est = cls(n_clusters=n_clusters, random_state=seed)
    est.config_, est.seed_, est.view_dims_ = config, seed, pipeline.input_dims
    est.resolved_defaults_ = dict(meta.get("resolved_defaults", {}))
    est.n_features_in_ = int(sum(pipeline.input_dims))
    est.n_components_ = int(pipeline.model.state.r_inv.shape[0])
    est.scalers_, est.autoencoders_, est.siamese_nets_ = (
        pipeline.scalers,
        pipeline.nets.autoencoders,
        pipeline.nets.siamese,
    )
    est.state_ = pipeline.model.state
    est.history_ = History.from_dict(meta["history"]) if "history" in meta else History()
    est.n_iter_ = len(est.history_.epochs)
    est.cluster_centers_ = centres
    est.n_clusters_ = n_clusters
    est.labels_ = None  # a run's model does not keep its training rows' labels
    est.inertia_ = None
    est.health_ = HealthReport.from_dict(meta["health"]) if "health" in meta else None
    return est


def save_fitted(est: Any, path: str | Path, *, overwrite: bool = False) -> Path:
    """``est.save(path)``: writes the fitted estimator ``est`` to the directory ``path`` (see
    ``SpecRaGE.save``); the optimizer is left out (a loaded estimator has ``optimizer=None``)."""
    params = {key: _json_value(value) for key, value in est.get_params(deep=False).items()}
    params["optimizer"] = None  # an optax transformation is code, not JSON: loaded, it is None
    if isinstance(est.config, ExperimentConfig):
        params["config"] = config_to_dict(est.config)
    if not isinstance(est.random_state, (numbers.Integral, type(None))):
        params["random_state"] = None  # a RandomState is not JSON; seed_ records what was drawn
    metadata = {
        "estimator": type(est).__name__,
        "params": params,
        "config": config_to_dict(est.config_),
        "resolved_defaults": getattr(est, "resolved_defaults_", {}),
        "view_dims": list(est.view_dims_),
        "seed": est.seed_,
        "inertia": est.inertia_,
        "health": None if getattr(est, "health_", None) is None else est.health_.as_dict(),
        "history": est.history_.as_dict(),
        "pretrained": pretrained_record(est._pretrained()),
    }
    extra = {
        "scalers": {f"view_{v}": s.as_tree() for v, s in enumerate(est.scalers_)},
        "clusters": {"centres": est.cluster_centers_, "labels": est.labels_},
    }
    if est._pretrained().stages():
        extra["pretrained"] = pretrained_trees(est._pretrained())
    return save_model(
        path,
        est.state_,
        metadata=metadata,
        extra_trees=extra,
        model_config=est.config_.model,
        overwrite=overwrite,
    )


# --- pickling: store plain arrays + configs, rebuild the networks on load -------------------------
# (No flax object is pickled, so a pickle does not depend on nnx internals.)


def pickled_state(est: Any, state: dict[str, Any]) -> dict[str, Any]:
    """``est.__getstate__``: ``state`` (a copy of ``est.__dict__``) with a fitted estimator's
    training state as plain arrays (its optimizer state a fresh default Adam's) and its
    pre-training nets as nested arrays and their record."""
    if "state_" in state:
        fitted = state["state_"]
        if fitted.tx is not adam_optimizer():  # unpickled, the state holds a fresh default Adam, as loaded
            fitted = fitted.replace(opt_state=adam_optimizer().init(fitted.params))
        state["state_"] = _tree_arrays(fitted)
        nets = est._pretrained()
        trees = {
            stage: {view: tree_to_nested(params) for view, params in found.items()}
            for stage, found in pretrained_trees(nets).items()
        }
        state["autoencoders_"] = state["siamese_nets_"] = None
        state["_pretrained"] = (trees, pretrained_record(nets))
    return state


def unpickled_state(state: dict[str, Any]) -> dict[str, Any]:
    """What ``__setstate__`` restores from a pickled ``state`` (:func:`pickled_state`): the networks
    rebuilt from their arrays and configuration (``state`` itself when it holds no fit)."""
    if "state_" in state:
        config: ExperimentConfig = state["config_"]
        state = dict(state)
        trees, record = state.pop("_pretrained")
        nets = restore_pretrained(trees, record, config, where="pickled SpecRaGE")
        state["autoencoders_"], state["siamese_nets_"] = nets.autoencoders, nets.siamese
        in_dims = tuple(s.out_dim for s in state["scalers_"] if not s.left_out)
        if nets.autoencoders is not None:
            in_dims = tuple(config.autoencoder.embedding_dim for _ in in_dims)
        state["state_"] = _rebuild_state(in_dims, config, state["state_"])
    return state
