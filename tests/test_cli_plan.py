"""What the CLI says before it trains: the stages with their epochs and bounds, the values a named
dataset trains with in --help, and a first checkpoint right after the first epoch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specrage_jax.cli import build_parser, config_help, help_dataset, main
from specrage_jax.cli.train import default_run_dir
from specrage_jax.config import ExperimentConfig
from specrage_jax.presets import preset
from specrage_jax.runs.run_plan import format_plan, stage_plan


def test_the_plan_lists_every_stage_with_its_bound():
    stages = stage_plan(preset("infinitemnist:20000"), n_train=14400, n_views=2)
    assert [s.name for s in stages] == ["autoencoders", "Siamese nets", "SpecRaGE"]
    autoencoders, siamese, specrage = stages
    assert (autoencoders.nets, autoencoders.epochs, autoencoders.steps_per_epoch) == (2, 100, 500)
    assert siamese.steps_per_epoch == 500 and "--siamese-epochs" in siamese.bound_by
    assert (specrage.epochs, specrage.steps_per_epoch) == (25, 20) and "--epochs" in specrage.bound_by
    lines = format_plan(stages)
    assert lines[0].startswith("1. autoencoders: 2 nets x 100 epochs x 500 steps of 128 rows (100,000 steps")
    assert "144000 pairs from 14400 rows" in lines[1]
    one_pass = dataclasses.replace(
        preset("infinitemnist"), autoencoder=dataclasses.replace(preset("infinitemnist").autoencoder, steps_per_epoch=0)
    )
    assert stage_plan(one_pass, n_train=14400, n_views=2)[0].steps_per_epoch == (14400 - 720) // 128  # a pass
    tiny = stage_plan(preset("infinitemnist"), n_train=720, n_views=2)  # too few rows to hold out: passes
    assert tiny[0].steps_per_epoch == 720 // 128 and tiny[1].steps_per_epoch == 500
    assert "at most: stops once the loss of held-out rows stalls for 3 epochs" in lines[0]
    assert "held-out pairs" in lines[1]
    no_stop = dataclasses.replace(
        preset("infinitemnist"), siamese=dataclasses.replace(preset("infinitemnist").siamese, patience=0)
    )
    assert "held-out" not in format_plan(stage_plan(no_stop, n_train=14400, n_views=2))[1]
    assert "view nets" not in lines[2]  # the presets train them throughout
    frozen = dataclasses.replace(
        preset("infinitemnist:20000"),
        train=dataclasses.replace(preset("infinitemnist:20000").train, view_net_steps=100),
    )
    assert (
        "the view nets for the first 100, then the weighting net alone"
        in format_plan(stage_plan(frozen, n_train=14400, n_views=2))[2]
    )
    at_plateau = dataclasses.replace(frozen, train=dataclasses.replace(frozen.train, view_net_steps=-2))
    assert (
        "the view nets until their loss stalls, then the weighting net alone"
        in format_plan(stage_plan(at_plateau, n_train=14400, n_views=2))[2]
    )


@pytest.mark.slow  # CLI runs: ~14 s; the default suite is at its time budget
def test_stage_bounds_from_the_command_line_reach_their_stage(tmp_path, capsys):
    rng = np.random.default_rng(0)
    labels = np.arange(90) % 3
    path = tmp_path / "mine.npz"
    np.savez(path, view_0=rng.random((90, 4)) + labels[:, None], view_1=rng.random((90, 3)), labels=labels)
    code = main(
        [
            "train",
            "--dataset",
            f"file:{path}",
            "--out",
            str(tmp_path / "run"),
            "--quiet",
            "--no-figure",
            "--epochs",
            "2",
            "--autoencoder-epochs",
            "1",
            "--siamese-epochs",
            "1",
            "--set",
            "autoencoder.enabled=true",
            "--set",
            "siamese.enabled=true",
            "--set",
            "data.val_fraction=0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    plan = out[out.index("stages to train:") : out.index("file:")]
    assert "1. autoencoders: 2 nets x 1 epochs" in plan and "2. Siamese nets: 2 nets x 1 epochs" in plan
    assert "3. SpecRaGE: 2 epochs" in plan
    # the default checkpointing (after an epoch once a minute has passed) still saves the first epoch
    assert (tmp_path / "run" / "checkpoints" / "epoch_1").is_dir()


def test_help_shows_the_values_a_named_dataset_trains_with(capsys):
    assert help_dataset(["train", "--dataset", "handwritten", "--help"]) == "handwritten"
    assert help_dataset(["train", "--dataset=bdgp", "-h"]) == "bdgp"
    assert help_dataset(["train", "--dataset", "bdgp"]) is None
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "bdgp", "--help"])
    text = capsys.readouterr().out
    assert "as --dataset bdgp trains with them" in text
    assert f"model.temperature = {preset('bdgp').model.temperature} *" in text
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "file:mine.npz", "--help"])
    assert "graph.n_neighbors = chosen from the data" in capsys.readouterr().out
    assert build_parser().format_help().startswith("usage: specrage")  # builds without a dataset too
    plain = config_help(None)  # what runs when nothing is set: ExperimentConfig()
    assert "the defaults (ExperimentConfig())" in plain and "as --dataset" not in plain
    assert (
        "graph.n_neighbors = chosen from the data" in plain and "train.steps_per_epoch = chosen from the data" in plain
    )
    assert f"model.temperature = {ExperimentConfig().model.temperature}" in plain


@pytest.mark.parametrize(
    ("dataset", "seed", "expected"),
    [
        ("handwritten", 0, "runs/handwritten-seed0"),
        ("file:/data/views/3sources.mat", 2, "runs/3sources-seed2"),
        ("memmap:/data/big_views", 1, "runs/big_views-seed1"),
        ("infinitemnist:20000", 0, "runs/infinitemnist-20000-seed0"),
    ],
)
def test_the_default_run_folder_is_one_folder_named_after_the_data(dataset, seed, expected):
    assert default_run_dir(dataset, seed) == expected
