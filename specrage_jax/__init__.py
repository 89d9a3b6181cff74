"""specrage_jax: SpecRaGE (multi-view spectral representation learning) in JAX/Flax.

The scikit-learn estimator::

    from specrage_jax import SpecRaGE
    labels = SpecRaGE(n_clusters=10, random_state=0).fit_predict([x1, x2])

The jitted steps are importable directly::

    from specrage_jax import create_state, ortho_step, grad_step, Batch
"""

from specrage_jax.api.estimator import SpecRaGE
from specrage_jax.config import (
    DataConfig,
    EvalConfig,
    ExperimentConfig,
    GraphConfig,
    ModelConfig,
    OrthoConfig,
    TrainConfig,
    preset,
)
from specrage_jax.data.views import ViewSplitter
from specrage_jax.nets.embed import embed
from specrage_jax.nets.model import OrthoWeight, SpecRaGENet
from specrage_jax.nets.state import SpecRaGEState, create_state, predict
from specrage_jax.overrides import apply_overrides
from specrage_jax.training.checkpoint import LoadedModel, TrainingCheckpointer, load_model, save_model
from specrage_jax.training.checkpoint_files import CheckpointError
from specrage_jax.training.loop import History, fit
from specrage_jax.training.steps import (
    Batch,
    eval_loss,
    grad_step,
    ortho_step,
    train_step,
)
from specrage_jax.version import __version__

__all__ = [
    "__version__",
    "Batch",
    "CheckpointError",
    "LoadedModel",
    "TrainingCheckpointer",
    "load_model",
    "save_model",
    "DataConfig",
    "EvalConfig",
    "ExperimentConfig",
    "GraphConfig",
    "History",
    "ModelConfig",
    "OrthoConfig",
    "OrthoWeight",
    "SpecRaGE",
    "SpecRaGENet",
    "SpecRaGEState",
    "TrainConfig",
    "ViewSplitter",
    "apply_overrides",
    "create_state",
    "embed",
    "eval_loss",
    "fit",
    "grad_step",
    "ortho_step",
    "predict",
    "preset",
    "train_step",
]
