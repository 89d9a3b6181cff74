"""Siamese affinity nets and autoencoder pre-embedding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from specrage_jax.config import AutoencoderConfig, ExperimentConfig, SiameseConfig
from specrage_jax.data import make_blobs_views
from specrage_jax.runs.prepare import prepare_splits, pretrain, with_n_components
from specrage_jax.training import pretrained
from specrage_jax.training.autoencoder import train_autoencoder
from specrage_jax.training.siamese import (
    SiameseStepAtMargin,
    contrastive_loss,
    contrastive_pairs,
    joint_neighbor_space,
    train_siamese,
    training_rows,
)

SMALL_SIAMESE = SiameseConfig(enabled=True, hidden=(32, 32), out_dim=4, n_positive=3, epochs=15, batch_size=128)
SMALL_AE = AutoencoderConfig(enabled=True, hidden=(32, 32), embedding_dim=3, epochs=30, batch_size=64)


def clusters(n: int = 240, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centers = rng.normal(scale=6.0, size=(3, d))
    return (centers[labels] + rng.normal(size=(n, d))).astype(np.float32), labels


def test_contrastive_pairs_are_neighbours_and_non_neighbours():
    x, _ = clusters()
    first, second, positive = contrastive_pairs(x, 3, seed=0)
    assert first.size == second.size == positive.size == 2 * 3 * x.shape[0]
    d = np.linalg.norm(x[first] - x[second], axis=1)
    assert np.all(first != second)
    # every positive is one of the anchor's 3 nearest neighbours (exact: n fits one block)
    full = np.linalg.norm(x[:, None] - x[None], axis=-1) + np.diag(np.full(x.shape[0], np.inf))
    third = np.sort(full, axis=1)[:, 2]
    assert np.all(d[positive == 1] <= third[first[positive == 1]] + 1e-4)
    assert np.all(d[positive == 0] > third[first[positive == 0]] - 1e-4)


def test_far_negatives_lie_beyond_the_anchors_median_distance_and_keep_the_positives():
    x, labels = clusters()
    first, second, positive = contrastive_pairs(x, 3, seed=0, far_negatives=True)
    assert first.size == second.size == positive.size == 2 * 3 * x.shape[0]
    full = np.linalg.norm(x[:, None] - x[None], axis=-1)
    median = np.median(full, axis=1)  # the block is the whole set (n < block_size)
    negative = positive == 0
    assert np.all(full[first[negative], second[negative]] > median[first[negative]] - 1e-4)
    # uniform non-neighbours hit the anchor's own cluster about a third of the time; far ones never here
    assert np.mean(labels[first[negative]] == labels[second[negative]]) == 0.0
    uniform = contrastive_pairs(x, 3, seed=0)
    assert np.mean(labels[uniform[0][uniform[2] == 0]] == labels[uniform[1][uniform[2] == 0]]) > 0.2
    near = positive == 1
    np.testing.assert_array_equal(np.sort(second[near]), np.sort(uniform[1][uniform[2] == 1]))
    # identical rows: none is farther than the median, so the negatives fall back to non-neighbours
    f, s, y = contrastive_pairs(np.zeros((6, 2), np.float32), 2, seed=0, far_negatives=True)
    for anchor in range(6):
        mine = f == anchor
        assert not set(s[mine & (y == 0)]) & ({anchor} | set(s[mine & (y == 1)]))


def test_the_joint_space_counts_every_view_alike_whatever_its_scale():
    a, _ = clusters(seed=1)
    b = np.random.default_rng(2).standard_normal((a.shape[0], 40)).astype(np.float32)
    space = joint_neighbor_space([a, b], seed=0)
    assert space.shape == (a.shape[0], a.shape[1] + b.shape[1])
    np.testing.assert_allclose(joint_neighbor_space([1000.0 * a, b], seed=0), space, rtol=1e-4, atol=1e-5)
    # each view's part has a median distance between rows of about 1
    for part in (space[:, : a.shape[1]], space[:, a.shape[1] :]):
        d = np.linalg.norm(part[:, None] - part[None], axis=-1)[np.triu_indices(len(part), 1)]
        assert np.median(d) == pytest.approx(1.0, rel=1e-3)  # all 240 rows are the sample


def test_joint_positives_train_each_view_on_the_samples_with_every_view(monkeypatch):
    x, _ = clusters(seed=3)
    noise = np.random.default_rng(4).standard_normal((x.shape[0], 20)).astype(np.float32)
    views = [noise.copy(), x.copy()]
    views[0][::4] = np.nan  # a quarter lack view 0, a quarter view 1
    views[1][1::4] = np.nan
    complete = np.flatnonzero(np.arange(x.shape[0]) % 4 >= 2)
    config = dataclasses.replace(ExperimentConfig(), siamese=dataclasses.replace(SMALL_SIAMESE, positives="joint"))
    seen = []

    def record(rows, siamese_config, *, pairs, **kwargs):
        seen.append((rows, pairs))
        return train_siamese(rows, siamese_config, pairs=pairs, **kwargs)

    monkeypatch.setattr(pretrained, "train_siamese", record)
    nets = pretrained.train_siamese_nets(views, config, seed=0)
    assert len(nets) == 2 and all(np.isfinite(net.encode(x)).all() for net, x in zip(nets, [noise, x]))
    space = joint_neighbor_space([noise[complete], x[complete]], seed=0)
    d = np.linalg.norm(space[:, None] - space[None], axis=-1)
    third = np.sort(d + np.diag(np.full(len(space), np.inf)), axis=1)[:, 2]  # the 3rd nearest other row
    median = np.median(d, axis=1)  # over every row, the anchor's own 0 included, as the draw counts it
    for v, (rows, (first, second, positive)) in enumerate(seen):
        np.testing.assert_array_equal(rows, [noise, x][v][complete])  # only samples with every view
        near = positive == 1  # the positives: 3 nearest neighbours in the joint space
        assert near.sum() == 3 * len(complete)
        assert np.all(d[first[near], second[near]] <= third[first[near]] + 1e-4)
        assert np.all(d[first[~near], second[~near]] > median[first[~near]] - 1e-4)  # far negatives
    own = dataclasses.replace(config, siamese=dataclasses.replace(SMALL_SIAMESE, positives="own"))
    seen.clear()
    monkeypatch.setattr(pretrained, "train_view_nets", lambda *a, **k: ("own",))
    assert pretrained.train_siamese_nets(views, own, seed=0) == ("own",) and not seen
    views[1][2::4] = views[0][3::4] = np.nan  # no sample has every view any more
    with pytest.raises(ValueError, match="siamese.positives=joint: 0 training samples have every view"):
        pretrained.train_siamese_nets(views, config, seed=0)


def test_contrastive_loss_matches_definition():
    a = np.array([[0.0, 0.0], [0.0, 0.0]], np.float32)
    b = np.array([[3.0, 4.0], [0.3, 0.4]], np.float32)
    y = np.array([1.0, 0.0], np.float32)
    # positive: d^2 = 25; negative: (1 - 0.5)^2 = 0.25
    assert float(contrastive_loss(a, b, y, 1.0)) == pytest.approx((25.0 + 0.25) / 2, rel=1e-5)


def test_siamese_learns_to_pull_positives_together():
    x, labels = clusters()
    encoder = train_siamese(x, SMALL_SIAMESE, seed=0)
    assert encoder.losses[-1] < encoder.losses[0]  # epoch means; epoch 0 already learns
    z = encoder.encode(x)
    assert z.shape == (x.shape[0], 4) and np.isfinite(z).all()
    same = labels[:, None] == labels[None, :]
    dist = np.linalg.norm(z[:, None] - z[None], axis=-1)
    assert dist[same].mean() < 0.5 * dist[~same].mean()


def test_autoencoder_reconstructs_and_encodes():
    x, _ = clusters(d=8)
    ae = train_autoencoder(x, SMALL_AE, seed=0)
    assert ae.losses[-1] < 0.2 * ae.losses[0]
    codes = ae.encode(x)
    assert codes.shape == (x.shape[0], 3) and np.isfinite(codes).all()
    np.testing.assert_allclose(ae.encode(x[:1]), codes[:1], rtol=1e-5, atol=1e-5)


def test_pretrain_replaces_views_and_adds_codes():
    data = make_blobs_views(n_samples=300, n_centers=3, seed=0)
    config = with_n_components(
        dataclasses.replace(ExperimentConfig(), siamese=SMALL_SIAMESE, autoencoder=SMALL_AE), data.n_classes
    )
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=False))
    splits = prepare_splits(data, config, seed=0)
    encoded, codes, timings = pretrain(splits, config, seed=0)
    assert [v.shape[1] for v in encoded.train] == [3, 3]  # autoencoder codes replace the views
    assert [c.shape for c in codes.test] == [(encoded.test[0].shape[0], 4)] * 2
    assert set(timings) == {"autoencoder_seconds", "siamese_seconds"}


def test_siamese_training_rows_subsample_is_seeded_distinct_and_bounded():
    x = np.arange(200, dtype=np.float32).reshape(100, 2)
    assert training_rows(x, 0, seed=0) is x
    assert training_rows(x, 500, seed=0) is x
    sub = training_rows(x, 30, seed=3)
    assert sub.shape == (30, 2)
    assert len(np.unique(sub[:, 0])) == 30  # distinct rows, drawn without replacement
    np.testing.assert_array_equal(sub, training_rows(x, 30, seed=3))
    assert not np.array_equal(sub, training_rows(x, 30, seed=4))
    with pytest.raises(ValueError, match="max_samples"):
        training_rows(x, -1, seed=0)


def counting_stage(n: int, held_out_curve: list[float]):
    """A fake stage over n items: the step records the items it trains on, the held-out loss
    follows ``held_out_curve`` epoch by epoch (then stays at its last value)."""
    import jax.numpy as jnp

    trained: set[int] = set()
    epoch = {"i": 0}

    def step(state, batch):
        trained.update(int(i) for i in np.asarray(batch[0]))
        return state, jnp.float32(1.0)

    def loss(state, batch):
        value = held_out_curve[min(epoch["i"], len(held_out_curve) - 1)]
        epoch["i"] += 1
        return jnp.float32(value)

    return step, loss, trained


def test_a_stage_stops_once_its_held_out_loss_stalls_and_never_trains_on_held_out_items():
    from specrage_jax.training.pretrain import HOLDOUT_FRACTION, EarlyStopping, run_minibatch_epochs

    n = 2000
    curve = [1.0, 0.5, 0.3, 0.299, 0.298, 0.2985, 0.1]  # stalls (< 1 % better) after epoch 3
    step, loss, trained = counting_stage(n, curve)
    run = run_minibatch_epochs(
        None, step, n, lambda idx: (idx,), batch_size=100, epochs=50, seed=0, desc="t", progress=False,
        loss=loss, stopping=EarlyStopping(patience=3, min_delta=0.01),
    )  # fmt: skip
    assert len(run.losses) == 6 and run.held_out_losses == pytest.approx(curve[:6])  # stopped after epoch 6
    held = n - len(trained)
    assert held == int(n * HOLDOUT_FRACTION)  # the held-out items were never trained on

    step, loss, trained = counting_stage(n, curve)
    run = run_minibatch_epochs(
        None, step, n, lambda idx: (idx,), batch_size=100, epochs=8, seed=0, desc="t", progress=False,
        loss=loss, stopping=EarlyStopping(patience=0, min_delta=0.01),
    )  # fmt: skip
    assert len(run.losses) == 8 and run.held_out_losses == [] and len(trained) == n  # patience 0: all, always


def test_early_stopping_settings_are_checked():
    with pytest.raises(ValueError, match="siamese.patience must be >= 0"):
        SiameseConfig(patience=-1)
    with pytest.raises(ValueError, match="autoencoder.min_delta in"):
        AutoencoderConfig(min_delta=1.0)
    with pytest.raises(ValueError, match="autoencoder.steps_per_epoch >= 0"):
        AutoencoderConfig(steps_per_epoch=-1)


def test_an_epoch_of_steps_per_epoch_batches_draws_fresh_items_each_epoch():
    from specrage_jax.training.pretrain import EarlyStopping, epoch_length, epoch_order, run_minibatch_epochs

    assert [epoch_length(1000, 100, steps) for steps in (0, 4, 10, 50)] == [10, 4, 10, 50]
    with pytest.raises(ValueError, match="steps_per_epoch must be >= 0"):
        epoch_length(1000, 100, -1)
    n, batches = 2000, []

    def step(state, batch):
        batches.append(np.asarray(batch[0]))
        return state, np.float32(1.0)

    def held_out(state, batch):
        return np.float32(1.0 / (len(batches) + 1))  # always improving: no early stop

    run = run_minibatch_epochs(
        None, step, n, lambda idx: (idx,), batch_size=50, epochs=3, seed=0, desc="t", progress=False,
        steps_per_epoch=4, loss=held_out, stopping=EarlyStopping(patience=3, min_delta=0.01),
    )  # fmt: skip
    assert len(run.losses) == 3 and len(batches) == 12  # 3 epochs of 4 steps, not of 38
    epochs = [np.concatenate(batches[i : i + 4]) for i in (0, 4, 8)]
    assert all(np.unique(e).size == 200 for e in epochs)  # without replacement within an epoch
    assert not np.array_equal(np.sort(epochs[0]), np.sort(epochs[1]))  # fresh items the next epoch
    batches.clear()  # nothing held out (no early stopping): an epoch is one pass whatever steps_per_epoch says
    run_minibatch_epochs(None, step, n, lambda idx: (idx,), batch_size=50, epochs=1, seed=0, desc="t",
                         progress=False, steps_per_epoch=4)  # fmt: skip
    assert len(batches) == n // 50
    order = epoch_order(np.arange(100), 250, np.random.default_rng(0))  # more steps than one pass
    assert [np.unique(order[s : s + 100]).size for s in (0, 100)] == [100, 100] and np.unique(order[200:]).size == 50


def test_the_autoencoder_stops_early_on_held_out_rows():
    x, _ = clusters(n=2000, d=8)
    ae = train_autoencoder(x, dataclasses.replace(SMALL_AE, epochs=200, patience=2), seed=0)
    assert 2 < len(ae.losses) < 200 and len(ae.held_out_losses) == len(ae.losses)
    assert ae.held_out_losses[-1] < 0.2 * ae.held_out_losses[0]


def assert_same_training(device, host, x: np.ndarray) -> None:
    """Two runs of a stage trained the same batches: losses, stopping epoch and codes (float32
    rounding apart)."""
    assert len(device.losses) == len(host.losses) and len(host.losses) > 2
    np.testing.assert_allclose(device.losses, host.losses, rtol=1e-4)
    np.testing.assert_allclose(device.held_out_losses, host.held_out_losses, rtol=1e-4)
    np.testing.assert_allclose(device.encode(x), host.encode(x), rtol=1e-3, atol=1e-4)


def test_the_autoencoder_on_the_device_trains_the_same_batches_as_the_host_loop():
    """train.data_on_device: one compiled scan per epoch over the device copy of the rows."""
    x, _ = clusters(n=600, d=8)
    config = dataclasses.replace(SMALL_AE, epochs=30, patience=2)
    host = train_autoencoder(x, config, seed=3)
    assert_same_training(train_autoencoder(x, config, seed=3, on_device=True), host, x)


def test_the_siamese_net_on_the_device_gathers_the_host_loops_pairs():
    """train.data_on_device: the rows and the pair indices live on the device and each epoch's
    scan gathers its pairs there, in the host loop's order."""
    x, _ = clusters(n=600, d=8)
    config = dataclasses.replace(SMALL_SIAMESE, epochs=30, patience=2)
    host = train_siamese(x, config, seed=3)
    assert_same_training(train_siamese(x, config, seed=3, on_device=True), host, x)


def test_data_on_device_reaches_both_pre_training_stages(monkeypatch):
    seen: dict[str, bool] = {}

    def recording(stage, trainer):
        def train(*args, **kwargs):
            seen[stage] = kwargs.get("on_device", False)
            return trainer(*args, **kwargs)

        return train

    monkeypatch.setattr(pretrained, "train_autoencoder", recording("autoencoder", pretrained.train_autoencoder))
    monkeypatch.setattr(pretrained, "train_siamese", recording("siamese", pretrained.train_siamese))
    x, _ = clusters(n=200, d=8)
    config = dataclasses.replace(
        ExperimentConfig(),
        siamese=dataclasses.replace(SMALL_SIAMESE, epochs=1),
        autoencoder=dataclasses.replace(SMALL_AE, epochs=1),
    )
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, progress=False, data_on_device=True))
    pretrained.pretrain_nets([x, x[:, :5]], config, seed=0)
    assert seen == {"autoencoder": True, "siamese": True}


@pytest.mark.parametrize("stage", ["autoencoder", "siamese"])
def test_a_stage_on_the_device_refuses_rows_streamed_from_disk(stage):
    class Rows:  # stands in for a streamed view's row source
        shape = (10, 4)

    train, config = (train_autoencoder, SMALL_AE) if stage == "autoencoder" else (train_siamese, SMALL_SIAMESE)
    with pytest.raises(ValueError, match="view 1 in memory"):
        train(Rows(), config, seed=0, name="view 1", on_device=True)  # type: ignore[arg-type]


def test_siamese_steps_at_one_margin_are_one_static_argument():
    """The device epoch takes the step as a static argument: steps at one margin must compare and
    hash alike (one compiled scan for every net), steps at another margin must not."""
    assert SiameseStepAtMargin(1.0) == SiameseStepAtMargin(1.0)
    assert hash(SiameseStepAtMargin(1.0)) == hash(SiameseStepAtMargin(1.0))
    assert SiameseStepAtMargin(1.0) != SiameseStepAtMargin(0.5)
