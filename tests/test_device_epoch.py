"""The device-resident epoch (train.data_on_device): one compiled scan per epoch trains on the
same batches, in the same order, as the host loop, and refuses what it cannot do."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from specrage_jax.config import OrthoConfig
from specrage_jax.nets.state import create_state
from specrage_jax.training.batches import batch_indices
from specrage_jax.training.device_epoch import put_training_data, train_epoch_on_device
from specrage_jax.training.loop import train_loop
from tests.fixed_sections import fixed_graph, fixed_model, fixed_train
from tests.test_train import clustered_views

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,))


def state(through: bool = True):
    return create_state(
        [2, 2],
        MODEL,
        fixed_graph(n_neighbors=5),
        OrthoConfig(grad_through_r_inv=through),
        learning_rate=1e-3,
        seed=0,
        view_scales=[1.0, 1.0],
    )


def max_abs_diff(a, b) -> float:
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def with_missing_views(views: list[np.ndarray], seed: int) -> list[np.ndarray]:
    """A random view of 40 % of the samples set to NaN (missing)."""
    rng = np.random.default_rng(seed)
    out = [v.copy() for v in views]
    rows = np.flatnonzero(rng.random(len(views[0])) < 0.4)
    for row, v in zip(rows, rng.integers(0, 2, rows.size)):
        out[v][row] = np.nan
    return out


# the constant-R^-1 variants compile a second pair of programs (~30 s each): slow stage
SLOW = pytest.mark.slow


@pytest.mark.parametrize("through", [True, pytest.param(False, marks=SLOW)])
@pytest.mark.parametrize("missing", [False, True])
def test_fit_on_device_follows_the_host_loop(through: bool, missing: bool) -> None:
    train, val = clustered_views(300, 0), clustered_views(60, 1)
    if missing:  # incomplete data: the mask travels with the data into the scanned epoch
        train, val = with_missing_views(train, 2), with_missing_views(val, 3)
    config = fixed_train(epochs=3, batch_size=64, progress=False)
    host, h_host = train_loop(state(through), train, val, config, seed=5)
    dev, h_dev = train_loop(
        state(through), train, val, fixed_train(epochs=3, batch_size=64, progress=False, data_on_device=True), seed=5
    )
    assert max_abs_diff(host.params, dev.params) < 1e-5
    assert max_abs_diff(host.r_inv, dev.r_inv) < 1e-5
    np.testing.assert_allclose([r.train_loss for r in h_host.epochs], [r.train_loss for r in h_dev.epochs], rtol=1e-5)
    np.testing.assert_allclose(
        [r.view_weights for r in h_host.epochs], [r.view_weights for r in h_dev.epochs], rtol=1e-5
    )
    assert h_dev.steps == h_host.steps == 3 * 5


def test_epoch_with_graph_codes_uses_the_codes() -> None:
    """Codes replace the views in the kNN graph: other codes, another loss."""
    train = clustered_views(128, 0)
    rng = np.random.default_rng(0)
    idx = batch_indices(128, 64, 2, rng), batch_indices(128, 64, 2, rng)
    codes = [rng.normal(size=(128, 4)).astype(np.float32) for _ in range(2)]
    _, plain = train_epoch_on_device(state(), put_training_data(train), *idx)
    _, coded = train_epoch_on_device(state(), put_training_data(train, codes), *idx)
    assert plain.losses.shape == (2,) and plain.view_weights.shape == (2, 2)
    assert np.all(np.isfinite(plain.losses)) and np.all(np.isfinite(coded.losses))
    assert not np.allclose(plain.losses, coded.losses)


def test_out_of_range_indices_are_refused() -> None:
    data = put_training_data(clustered_views(64, 0))
    idx = np.arange(64).reshape(1, 64)
    with pytest.raises(ValueError, match=r"grad_idx: row indices must lie in \[0, 64\)"):
        train_epoch_on_device(state(), data, idx, idx + 1)


def test_streamed_views_are_refused(tmp_path) -> None:
    from specrage_jax.data.lazy import MemmapRows
    from specrage_jax.data.stream import open_views_memmap, write_views_memmap

    train = clustered_views(120, 0)
    write_views_memmap(tmp_path / "c", iter([tuple(train)]), 120)
    source = open_views_memmap(tmp_path / "c")
    streamed = [MemmapRows.all_rows(source, v) for v in range(2)]
    with pytest.raises(ValueError, match="data_on_device needs the training views in memory"):
        train_loop(
            state(),
            streamed,
            clustered_views(40, 1),
            fixed_train(epochs=1, batch_size=64, progress=False, data_on_device=True),
            seed=0,
        )
