"""Configuration: ``ExperimentConfig``, its sections (one frozen dataclass per concern,
:mod:`specrage_jax.config.sections`) and the one default, ``ExperimentConfig()`` (its
data-dependent settings resolved at fit); the named datasets' presets are
:mod:`specrage_jax.presets`.

Every field is reachable from the command line as ``--set section.field=value``
(see :func:`apply_overrides`), and ``specrage train --help`` lists them all with
the help text in each field's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specrage_jax.config.fields import (
    ACTIVATIONS,
    AUTO,
    AUTO_COMPONENTS,
    AUTO_MIN_LR,
    AUTO_STEPS_PER_EPOCH,
    AUTO_VIEW_NET_STEPS,
    AUTO_WIDTHS,
    DEGREE_NORMALIZATIONS,
    FUSIONS,
    MISSING_VIEW_DEGREES,
    OUTPUT_ROWS,
    OUTPUT_SCALINGS,
    PREPROCESS_KINDS,
    SIAMESE_POSITIVES,
    VIEW_NETS_UNTIL_STALL,
)
from specrage_jax.config.sections import (
    AutoencoderConfig,
    CheckpointConfig,
    DataConfig,
    EvalConfig,
    GraphConfig,
    ModelConfig,
    OrthoConfig,
    SiameseConfig,
    TrainConfig,
)

__all__ = [
    "ACTIVATIONS",
    "AUTO",
    "AUTO_COMPONENTS",
    "AUTO_MIN_LR",
    "AUTO_STEPS_PER_EPOCH",
    "AUTO_VIEW_NET_STEPS",
    "AUTO_WIDTHS",
    "DEGREE_NORMALIZATIONS",
    "FUSIONS",
    "MISSING_VIEW_DEGREES",
    "OUTPUT_ROWS",
    "OUTPUT_SCALINGS",
    "PREPROCESS_KINDS",
    "SIAMESE_POSITIVES",
    "VIEW_NETS_UNTIL_STALL",
    "AutoencoderConfig",
    "CheckpointConfig",
    "DataConfig",
    "EvalConfig",
    "ExperimentConfig",
    "GraphConfig",
    "ModelConfig",
    "OrthoConfig",
    "SiameseConfig",
    "TrainConfig",
    "unresolved_message",
]


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything one training run needs; its sections are :mod:`specrage_jax.config.sections`.

    ``ExperimentConfig()`` is the one default: what ``SpecRaGE()`` and ``specrage train`` run
    with when nothing is set, and what ``specrage train --help`` lists. The settings whose good
    value depends on the data are left unresolved (0, -1, (0,), "auto") and
    :func:`specrage_jax.training.defaults.resolve_defaults` fills them at fit from the data's
    shape and statistics; the rest are fixed: per-sample view weights free (T 1, alpha in the
    fused output only, a weak pull of each sample's weights towards 1/V), so a view that is
    corrupted for a sample loses weight for it, the embedding's rows to unit norm, and training
    ends once the plateau schedule has lowered the learning rate twice (AUTO_MIN_LR). The named
    datasets' presets (:mod:`specrage_jax.presets`) start from a fixed base of their own.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    ortho: OrthoConfig = field(default_factory=OrthoConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    siamese: SiameseConfig = field(default_factory=SiameseConfig)
    autoencoder: AutoencoderConfig = field(default_factory=AutoencoderConfig)
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)

    @classmethod
    def auto(cls) -> ExperimentConfig:
        """The same as ``ExperimentConfig()``: the one default, what ``SpecRaGE()`` and
        ``specrage train --dataset file:PATH`` run with (kept for code that calls it)."""
        return cls()

    def unresolved_fields(self) -> list[str]:
        """The "section.field" names still waiting for the data (empty once resolved)."""
        pending = {
            "model.view_hidden": self.model.view_hidden == AUTO_WIDTHS,
            "model.n_components": self.model.n_components == AUTO_COMPONENTS,
            "graph.n_neighbors": self.graph.n_neighbors == 0,
            "graph.degree_normalization": self.graph.degree_normalization == AUTO,
            "train.epochs": self.train.epochs == 0,
            "train.batch_size": self.train.batch_size == 0,
            "train.steps_per_epoch": self.train.steps_per_epoch == AUTO_STEPS_PER_EPOCH,
            "train.view_net_steps": self.train.view_net_steps == AUTO_VIEW_NET_STEPS,
            "data.graph_inputs": self.data.graph_inputs == AUTO,
            "model.output_rows": self.model.output_rows == AUTO,
            "siamese.positives": self.siamese.positives == AUTO,  # opt-in: the default is own
        }
        return [name for name, waiting in pending.items() if waiting]


# A number to suggest for each setting that waits for the data, in the messages that refuse it.
_RESOLVED_EXAMPLES = {
    "model.n_components": ("ModelConfig", "n_components=10"),
    "model.view_hidden": ("ModelConfig", "view_hidden=(512, 512, 256)"),
    "graph.n_neighbors": ("GraphConfig", "n_neighbors=10"),
    "graph.degree_normalization": ("GraphConfig", "degree_normalization='none'"),
    "train.epochs": ("TrainConfig", "epochs=50"),
    "train.batch_size": ("TrainConfig", "batch_size=1024"),
    "train.steps_per_epoch": ("TrainConfig", "steps_per_epoch=0"),
    "train.view_net_steps": ("TrainConfig", "view_net_steps=0"),
}


def unresolved_message(name: str) -> str:
    """One line refusing the setting ``name`` ("section.field") left at its "from the data" value
    where no data is at hand to resolve it (the state, the training loop), saying how to resolve it."""
    section, example = _RESOLVED_EXAMPLES[name]
    sentinel = {
        "model.n_components": AUTO_COMPONENTS,
        "model.view_hidden": AUTO_WIDTHS,
        "train.view_net_steps": AUTO_VIEW_NET_STEPS,
        "train.steps_per_epoch": AUTO_STEPS_PER_EPOCH,
        "graph.degree_normalization": AUTO,
    }.get(name, 0)
    return (
        f"{name}={sentinel!r} means 'resolved from the data', which only SpecRaGE.fit and `specrage train` do: "
        f"give a value (e.g. {section}({example})) or resolve the configuration first with "
        f"specrage_jax.training.defaults.resolve_defaults"
    )
