"""specrage_jax: SpecRaGE (multi-view spectral representation learning) in JAX/Flax.

The scikit-learn estimator::

    from specrage_jax import SpecRaGE
    labels = SpecRaGE(n_clusters=10, random_state=0).fit_predict([x1, x2])

The training state, the jitted steps and the training loop are importable directly (the
optimizer is any optax transformation, ``create_state(..., tx=...)``)::

    from specrage_jax import create_state, ortho_step, grad_step, train_loop, fit_output_map, Batch
"""

from typing import Any

from specrage_jax.api.estimator import SpecRaGE
from specrage_jax.config import (
    DataConfig,
    EvalConfig,
    ExperimentConfig,
    GraphConfig,
    ModelConfig,
    OrthoConfig,
    TrainConfig,
)
from specrage_jax.data.views import ViewSplitter
from specrage_jax.evaluation.health import DegenerateEmbeddingWarning
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import SpecRaGEState, create_state, embed_batch
from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.training.checkpoint import LoadedModel, TrainingCheckpointer, load_model, save_model
from specrage_jax.training.checkpoint_files import CheckpointError, CheckpointWarning
from specrage_jax.training.loop import History, train_loop
from specrage_jax.training.output_map import fit_output_map
from specrage_jax.training.steps import Batch, eval_loss, grad_step, ortho_step, train_step
from specrage_jax.validation import InputTypeError
from specrage_jax.version import __version__

__all__ = [
    "__version__",
    # the scikit-learn estimator
    "SpecRaGE",
    "ViewSplitter",
    # configuration: frozen dataclasses, the per-dataset presets, "section.field=value" overrides
    "ExperimentConfig",
    "ModelConfig",
    "GraphConfig",
    "OrthoConfig",
    "TrainConfig",
    "DataConfig",
    "EvalConfig",
    "preset",
    "apply_overrides",
    # the training state, the jitted steps, the training loop, inference on a state
    "SpecRaGEState",
    "create_state",
    "Batch",
    "ortho_step",
    "grad_step",
    "train_step",
    "eval_loss",
    "train_loop",
    "History",
    "fit_output_map",
    "embed",
    "embed_batch",
    # checkpoints
    "save_model",
    "load_model",
    "LoadedModel",
    "TrainingCheckpointer",
    # warnings and errors
    "DegenerateEmbeddingWarning",
    "CheckpointWarning",
    "CheckpointError",
    "InputTypeError",
]

# Names the package no longer exports because scikit-learn uses them for something else.
_RENAMED = {
    "fit": "train_loop (the training loop on a state; SpecRaGE.fit is the estimator's)",
    "predict": "embed_batch (one batch's embedding and view weights; SpecRaGE.predict gives cluster labels)",
}


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        raise AttributeError(f"specrage_jax.{name} was renamed: use specrage_jax.{_RENAMED[name]}")
    raise AttributeError(f"module 'specrage_jax' has no attribute {name!r}")
