"""The pre-training stages' nets as one unit: trained in the paper's order (autoencoders, then
Siamese nets on the autoencoded views), and the one way they are saved and rebuilt, whether
into an estimator's save or pickle, a run's model, or a run's checkpoint for resume.

Saved form: ``pretrained_trees(nets)`` {stage: {"view_v": params}} (arrays) beside
``pretrained_record(nets)`` {stage: {in_dims, losses, submodule}} (JSON); the nets' codes are
never saved (recomputed bitwise equal by the same jitted forward pass).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from specrage_jax.config import AUTO, ExperimentConfig
from specrage_jax.nets.netstate import TrainedNet
from specrage_jax.overrides import config_to_dict
from specrage_jax.training import checkpoint_files as files
from specrage_jax.training import preemption
from specrage_jax.training.autoencoder import train_autoencoder
from specrage_jax.training.checkpoint_files import CheckpointError
from specrage_jax.training.siamese import (
    contrastive_pairs,
    joint_neighbor_space,
    train_siamese,
    training_row_indices,
)
from specrage_jax.training.stages import encode_views, fresh_stage_net, train_view_nets
from specrage_jax.validation import present_views

PRETRAINED_FORMAT_VERSION = 1
STAGES = ("autoencoder", "siamese")


@dataclass(frozen=True)
class PretrainedNets:
    """The pre-training stages' nets, one per view; None where the stage is disabled."""

    autoencoders: tuple[TrainedNet, ...] | None = None
    siamese: tuple[TrainedNet, ...] | None = None

    def stages(self) -> dict[str, tuple[TrainedNet, ...]]:
        """{stage: nets} of the stages that have nets, in training order."""
        found = {"autoencoder": self.autoencoders, "siamese": self.siamese}
        return {stage: nets for stage, nets in found.items() if nets}

    def model_inputs(self, views: Sequence[Any]) -> tuple[Any, ...]:
        """The network's inputs: the views through the autoencoder encoders (as given without)."""
        return tuple(views) if self.autoencoders is None else encode_views(self.autoencoders, views)

    def affinity_codes(self, inputs: Sequence[Any]) -> tuple[np.ndarray, ...] | None:
        """The Siamese codes of the network's inputs (None without Siamese nets)."""
        return None if self.siamese is None else encode_views(self.siamese, inputs)


def pretrain_nets(
    train_views: Sequence[Any], config: ExperimentConfig, *, seed: int, restored: PretrainedNets | None = None
) -> tuple[PretrainedNets, dict[str, float]]:
    """Trains the enabled stages on the training rows (views (n, d_v)) in the paper's order; a
    stage whose nets are in ``restored`` (a resumed run) is not retrained. Returns the nets and
    the seconds each stage took (training and encoding the training rows).

    A SIGTERM or SIGINT stops the stage in progress after its current step and raises
    :class:`preemption.Preempted`; a stage is not resumed mid-way (its nets train again), but the
    autoencoders, when done, are in the exception's ``completed``."""
    with preemption.watch():  # SIGTERM / SIGINT stop the stage in progress at a step boundary
        return _pretrain_stages(train_views, config, seed=seed, restored=restored or PretrainedNets())


def _pretrain_stages(
    train_views: Sequence[Any], config: ExperimentConfig, *, seed: int, restored: PretrainedNets
) -> tuple[PretrainedNets, dict[str, float]]:
    """:func:`pretrain_nets` inside its preemption watch."""
    timings: dict[str, float] = {}
    autoencoders = siamese = None
    inputs = tuple(train_views)
    if config.autoencoder.enabled:
        start = time.perf_counter()
        autoencoders = restored.autoencoders or train_view_nets(
            train_autoencoder, inputs, config.autoencoder, config, seed=seed, on_device=config.train.data_on_device
        )
        if config.siamese.enabled:
            inputs = encode_views(autoencoders, inputs)
        timings["autoencoder_seconds"] = time.perf_counter() - start
    if config.siamese.enabled:
        start = time.perf_counter()
        try:
            siamese = restored.siamese or train_siamese_nets(inputs, config, seed=seed)
        except preemption.Preempted as err:  # the autoencoders are done: a resume need not retrain them
            err.completed = PretrainedNets(autoencoders, None) if autoencoders is not None else None
            raise
        timings["siamese_seconds"] = time.perf_counter() - start
    return PretrainedNets(autoencoders, siamese), timings


def train_siamese_nets(views: Sequence[Any], config: ExperimentConfig, *, seed: int) -> tuple[TrainedNet, ...]:
    """One Siamese net per view (n, d_v), its positives by ``config.siamese.positives`` (auto is
    resolved by :func:`training.defaults.resolve_defaults`; left unresolved, it reads own).

    Joint: every view's net trains on the samples that have every view (the same seeded
    ``max_samples`` of them for every view), each paired with its ``n_positive`` nearest
    neighbours under all views together (:func:`training.siamese.joint_neighbor_space`) and as
    many negatives farther than its median joint distance; the other samples' rows are only
    encoded.

    Raises:
      ValueError: joint positives with too few samples that have every view.
    """
    if config.siamese.positives in ("own", AUTO):
        return train_view_nets(
            train_siamese, views, config.siamese, config, seed=seed, on_device=config.train.data_on_device
        )
    siamese = config.siamese
    present = present_views(views)
    complete = np.flatnonzero(present.all(axis=1))
    if complete.size <= siamese.n_positive + 1:
        raise ValueError(
            f"siamese.positives=joint: {complete.size} training samples have every view, too few for "
            f"{siamese.n_positive} positives each; set siamese.positives=own"
        )
    keep = training_row_indices(complete.size, siamese.max_samples, seed=seed)
    complete = complete if keep is None else complete[keep]
    rows = [np.asarray(x[complete], np.float32) for x in views]  # a streamed view reads these rows
    space = joint_neighbor_space(rows, seed=seed)
    return tuple(
        train_siamese(
            x,
            siamese,
            seed=seed + v,
            progress=config.train.progress,
            name=f"view {v}",
            on_device=config.train.data_on_device,
            pairs=contrastive_pairs(
                space, siamese.n_positive, seed=seed + v, block_size=siamese.pair_block, far_negatives=True
            ),
        )
        for v, x in enumerate(rows)
    )


def pretrained_trees(nets: PretrainedNets) -> dict[str, dict[str, Any]]:
    """{stage: {"view_v": parameters}} of every stage that has nets."""
    return {
        stage: {f"view_{v}": net.state.params for v, net in enumerate(found)} for stage, found in nets.stages().items()
    }


def pretrained_record(nets: PretrainedNets) -> dict[str, dict[str, Any]]:
    """{stage: {in_dims, losses, submodule}}: what rebuilds the nets around their parameters."""
    return {
        stage: {
            "in_dims": [net_in_dim(net) for net in found],
            "losses": [list(net.losses) for net in found],
            "submodule": found[0].submodule,
        }
        for stage, found in nets.stages().items()
    }


def restore_pretrained(
    trees: Mapping[str, Any], record: Mapping[str, Any], config: ExperimentConfig, *, where: str
) -> PretrainedNets:
    """The nets :func:`pretrained_trees` and :func:`pretrained_record` describe, rebuilt for
    ``config`` (parameters as nested dicts of arrays or as trees).

    Raises:
      CheckpointError: naming ``where`` and the stage and view whose parameters do not fit.
    """
    found: dict[str, tuple[TrainedNet, ...]] = {}
    for stage, info in record.items():
        if stage not in STAGES:
            raise CheckpointError(f"{where}: unknown pre-training stage {stage!r}")
        nets = []
        for v, (in_dim, losses) in enumerate(zip(info["in_dims"], info["losses"])):
            template = fresh_stage_net(stage, int(in_dim), config)
            saved = files.tree_to_nested(trees[stage][f"view_{v}"])
            params = files.tree_from_nested(template.params, saved, where=f"{where} ({stage} view {v})")
            nets.append(
                TrainedNet(state=template.replace(params=params), losses=tuple(losses), submodule=info["submodule"])
            )
        found[stage] = tuple(nets)
    return PretrainedNets(autoencoders=found.get("autoencoder"), siamese=found.get("siamese"))


def net_in_dim(net: TrainedNet) -> int:
    """Input width of a pre-trained net: the rows of its first kernel, the encoder's in an
    autoencoder (its decoder's first kernel, earlier in path order, reads the codes)."""
    kernels = [
        (jax.tree_util.keystr(path), leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(net.state.params)[0]
        if "kernel" in jax.tree_util.keystr(path)
    ]
    if net.submodule is not None:
        kernels = [(path, leaf) for path, leaf in kernels if net.submodule in path]
    first = min(kernels, key=lambda item: _layer_order(item[0]))[1]
    return int(first.shape[0])


def _layer_order(path: str) -> tuple[int, ...]:
    """Sort key of a parameter path by the layer numbers in it ("['layers'][0]['kernel']" -> (0,))."""
    return tuple(int(n) for n in re.findall(r"\[(\d+)\]", path))


def save_pretrained_nets(directory: str | Path, nets: PretrainedNets, config: ExperimentConfig) -> Path:
    """Writes the nets (a run's checkpoint for resume) with the configuration they were trained with."""
    record = {
        "format": "specrage_jax",
        "kind": "pretrained",
        "format_version": PRETRAINED_FORMAT_VERSION,
        "library_version": files.library_version(),
        "config": config_to_dict(config),
        "stages": pretrained_record(nets),
    }
    return files.save_trees(directory, {"arrays": pretrained_trees(nets)}, record, overwrite=True)


def load_pretrained_nets(directory: str | Path, config: ExperimentConfig) -> PretrainedNets:
    """The nets :func:`save_pretrained_nets` wrote, rebuilt for ``config``.

    Raises:
      CheckpointError: missing, damaged, or saved for another configuration.
    """
    path = Path(directory)
    record = files.read_record(path)
    files.check_compatible(record, kind="pretrained", max_version=PRETRAINED_FORMAT_VERSION, where=path)
    saved = record.get("config", {})
    for section in STAGES:
        if saved.get(section) != json.loads(json.dumps(config_to_dict(config)[section])):
            raise CheckpointError(f"{path}: the pre-trained nets were saved with another {section} configuration")
    arrays = files.restore_items(path, ["arrays"], record).get("arrays", {})
    return restore_pretrained(arrays, record["stages"], config, where=str(path))
