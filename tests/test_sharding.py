"""Tests for specrage_jax.training.sharding: data-parallel steps on a 'data' mesh equal the single-device
steps (global-batch semantics of the in-batch kNN graph, the QR and Eq. 4), the state stays
replicated and the batch sharded, and bad device counts / batch sizes fail clearly.

The multi-device checks run in a subprocess with 4 forced host devices (XLA reads
``--xla_force_host_platform_device_count`` only when JAX starts) and belong to the slow stage
(``-m slow``); the in-process ones use the single CPU device of the test process and run by default.
"""

from __future__ import annotations

import textwrap

import jax
import numpy as np
import pytest

from specrage_jax.training.sharding import (
    DATA_AXIS,
    check_batch_divisible,
    is_batch_sharded_on,
    is_replicated_on,
    make_data_mesh,
    replicate,
    round_batch_to_devices,
    shard_batch,
)
from specrage_jax.training.steps import Batch
from tests.simulated_devices import run_child_result

CHILD = textwrap.dedent("""
    import json
    import jax, jax.numpy as jnp, numpy as np
    import dataclasses
    from specrage_jax.config import OrthoConfig
    from specrage_jax.presets import preset_base
    from specrage_jax.training.steps import Batch, eval_loss, grad_step, ortho_step, train_step
    from specrage_jax.nets.state import create_state, embed_batch
    from specrage_jax.training import sharding as sh

    FIXED = preset_base()  # every setting fixed: the low-level API sees no data to resolve from
    MODEL = dataclasses.replace(FIXED.model, n_components=4, view_hidden=(32, 32), weighting_hidden=(16,))
    GRAPH = dataclasses.replace(FIXED.graph, n_neighbors=5)
    DIMS, M, N_DEV = (7, 5), 64, 4
    assert jax.device_count() == N_DEV, jax.devices()
    mesh = sh.make_data_mesh(N_DEV)
    rng = np.random.default_rng(0)
    pool = [tuple(rng.standard_normal((M, d)).astype(np.float32) for d in DIMS) for _ in range(10)]
    out = {"devices": [str(d) for d in mesh.devices.flat]}

    def fresh(through):
        return create_state(DIMS, MODEL, GRAPH, OrthoConfig(grad_through_r_inv=through), learning_rate=1e-3,
                            seed=0, view_scales=(3.0, 2.5))

    def run(through, place_state, place_batch):
        # grad through R^-1 (the default): 3 x (ortho_step, grad_step), then 2 x train_step;
        # constant R^-1: 3 x train_step (its separate steps are the same code path minus the QR grad)
        state, losses, cache = place_state(fresh(through)), [], []
        n_separate = 3 if through else 0
        for i in range(n_separate):
            o, g = pool[2 * i], pool[2 * i + 1]
            state = ortho_step(state, place_batch(Batch(views=o)))
            state, metrics = grad_step(state, place_batch(Batch(views=g, ortho_views=o if through else None)))
            losses.append(metrics["loss"])
        for i in range(n_separate, n_separate + (2 if through else 3)):
            o, g = pool[2 * i], pool[2 * i + 1]
            state, metrics = train_step(state, place_batch(Batch(views=o)),
                                        place_batch(Batch(views=g, ortho_views=o if through else None)))
            losses.append(metrics["loss"])
            cache.append(train_step._cache_size())
        return state, [float(x) for x in losses], metrics, cache

    def max_diff(a, b):
        return max(float(jnp.max(jnp.abs(jnp.asarray(x) - jnp.asarray(y)))) for x, y in
                   zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    for through in (True, False):
        single, l1, _, _ = run(through, lambda s: s, lambda b: jax.tree.map(jnp.asarray, b))
        multi, l4, metrics, cache = run(through, lambda s: sh.replicate(s, mesh), lambda b: sh.shard_batch(b, mesh))
        probe = Batch(views=pool[9])
        sharded_probe = sh.shard_batch(probe, mesh)
        y4, _ = embed_batch(multi, sharded_probe.views)
        r = out[str(through)] = {
            "loss_single": l1, "loss_multi": l4,
            "loss_max_abs_diff": max(abs(a - b) for a, b in zip(l1, l4)),
            "params_max_abs_diff": max_diff(single.params, multi.params),
            "opt_state_max_abs_diff": max_diff(single.opt_state, multi.opt_state),
            "r_inv_max_abs_diff": max_diff(single.r_inv, multi.r_inv),
            "r_inv_max_abs": float(jnp.max(jnp.abs(single.r_inv))),
            "eval_loss_single": float(eval_loss(single, probe)),
            "eval_loss_multi_sharded": float(eval_loss(multi, sharded_probe)),
            "predict_max_abs_diff": max_diff(embed_batch(single, probe.views)[0], y4),
            "predict_out_sharded": sh.is_batch_sharded_on(y4, mesh),
            "state_all_replicated": all(sh.is_replicated_on(x, mesh) for x in jax.tree.leaves(multi)),
            "metrics_all_replicated": all(sh.is_replicated_on(x, mesh) for x in jax.tree.leaves(metrics)),
            "batch_sharded": all(sh.is_batch_sharded_on(x, mesh) for x in jax.tree.leaves(sharded_probe)),
            "batch_shard_shapes": [list(s.data.shape) for s in sharded_probe.views[0].addressable_shards],
            "train_step_cache_sizes": cache,
        }
        if through:
            # an unsharded batch with the replicated state still works (validation batches)
            r["eval_loss_multi_unsharded_batch"] = float(eval_loss(multi, probe))
            # the negative control: what per-device (local, 16-sample) kNN graphs would give
            r["eval_loss_local_graphs"] = float(np.mean([
                eval_loss(single, Batch(views=tuple(v[j::N_DEV] for v in probe.views))) for j in range(N_DEV)]))

    wrapped = sh.data_parallel(train_step, mesh)
    state = sh.replicate(fresh(True), mesh)
    for i in range(2):
        o, g = pool[2 * i], pool[2 * i + 1]
        ortho_batch = sh.shard_batch(Batch(views=o), mesh)
        grad_batch = sh.shard_batch(Batch(views=g, ortho_views=o), mesh)
        state, _ = wrapped(state, ortho_batch, grad_batch)
    sh.assert_state_replicated(state, mesh)
    out["data_parallel_cache_size"] = wrapped._cache_size()
    out["rounded"] = [sh.round_batch_to_devices(m, mesh) for m in (62, 64, 4)]
    try:
        sh.round_batch_to_devices(3, mesh)
        out["round_error"] = None
    except ValueError as e:
        out["round_error"] = str(e)
    try:
        sh.shard_batch(Batch(views=tuple(v[:62] for v in pool[0])), mesh)
        out["indivisible_error"] = None
    except ValueError as e:
        out["indivisible_error"] = str(e)
    try:
        sh.make_data_mesh(N_DEV + 1)
        out["too_many_error"] = None
    except ValueError as e:
        out["too_many_error"] = str(e)
    # the training loop: train_loop(mesh=...) against train_loop() from the same state, seed and data
    from specrage_jax.training.loop import train_loop
    views = tuple(rng.standard_normal((200, d)).astype(np.float32) for d in DIMS)
    val = tuple(rng.standard_normal((72, d)).astype(np.float32) for d in DIMS)
    tc = dataclasses.replace(FIXED.train, epochs=2, batch_size=64, progress=False)
    fit_single, h1 = train_loop(fresh(True), views, val, tc, seed=3)
    fit_multi, h4 = train_loop(fresh(True), views, val, tc, seed=3, mesh=mesh)
    out["fit"] = {"params_max_abs_diff": max_diff(fit_single.params, fit_multi.params),
                  "r_inv_max_abs_diff": max_diff(fit_single.r_inv, fit_multi.r_inv),
                  "train_loss": [[r.train_loss for r in h.epochs] for h in (h1, h4)],
                  "state_all_replicated": all(sh.is_replicated_on(x, mesh) for x in jax.tree.leaves(fit_multi))}
    # the device-resident epoch (one compiled scan per epoch, batches gathered on the devices)
    tc_dev = dataclasses.replace(tc, data_on_device=True)
    fit_dev, h_dev = train_loop(fresh(True), views, val, tc_dev, seed=3, mesh=mesh)
    out["fit_on_device"] = {"params_max_abs_diff": max_diff(fit_single.params, fit_dev.params),
                            "r_inv_max_abs_diff": max_diff(fit_single.r_inv, fit_dev.r_inv),
                            "train_loss": [[r.train_loss for r in h.epochs] for h in (h1, h_dev)],
                            "state_all_replicated": all(sh.is_replicated_on(x, mesh) for x in jax.tree.leaves(fit_dev))}
    # incomplete data: a random view of 40 % of the samples missing; the mask is sharded with the rows
    holes = [v.copy() for v in views]
    for row in np.flatnonzero(rng.random(200) < 0.4):
        holes[int(rng.integers(0, len(DIMS)))][row] = np.nan
    fit_single_m, hm1 = train_loop(fresh(True), holes, val, tc, seed=3)
    fit_multi_m, hm4 = train_loop(fresh(True), holes, val, tc, seed=3, mesh=mesh)
    fit_dev_m, hm_dev = train_loop(fresh(True), holes, val, tc_dev, seed=3, mesh=mesh)
    out["fit_masked"] = {"params_max_abs_diff": max(max_diff(fit_single_m.params, fit_multi_m.params),
                                                    max_diff(fit_single_m.params, fit_dev_m.params)),
                         "r_inv_max_abs_diff": max(max_diff(fit_single_m.r_inv, fit_multi_m.r_inv),
                                                   max_diff(fit_single_m.r_inv, fit_dev_m.r_inv)),
                         "train_loss": [[r.train_loss for r in h.epochs] for h in (hm1, hm4, hm_dev)]}
    try:
        train_loop(fresh(True), views, val, dataclasses.replace(tc, epochs=1, batch_size=62), seed=3, mesh=mesh)
        out["fit_indivisible_error"] = None
    except ValueError as e:
        out["fit_indivisible_error"] = str(e)
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def four_devices() -> dict:
    return run_child_result(CHILD, devices=4, timeout=300)


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
@pytest.mark.parametrize("through", ["True", "False"])
def test_sharded_steps_equal_single_device(four_devices: dict, through: str) -> None:
    r = four_devices[through]
    print(
        f"grad_through_r_inv={through}: max |diff| loss {r['loss_max_abs_diff']:.2e}, params "
        f"{r['params_max_abs_diff']:.2e}, Adam state {r['opt_state_max_abs_diff']:.2e}, "
        f"R^-1 {r['r_inv_max_abs_diff']:.2e} (max |R^-1| {r['r_inv_max_abs']:.2f}), "
        f"predict {r['predict_max_abs_diff']:.2e}"
    )
    assert len(four_devices["devices"]) == 4
    assert r["loss_max_abs_diff"] < 1e-5
    assert r["params_max_abs_diff"] < 1e-5
    assert r["opt_state_max_abs_diff"] < 1e-5
    assert r["r_inv_max_abs_diff"] < 1e-5
    assert r["predict_max_abs_diff"] < 1e-5
    # every variant of the sharded evaluation equals the single-device one ...
    assert abs(r["eval_loss_multi_sharded"] - r["eval_loss_single"]) < 1e-6
    if through == "True":
        assert abs(r["eval_loss_multi_unsharded_batch"] - r["eval_loss_single"]) < 1e-6
        # ... and the comparison can tell global from per-device graphs: local 16-sample kNN graphs
        # would give a clearly different loss, so the kNN graph and loss are those of the global batch
        assert abs(r["eval_loss_local_graphs"] - r["eval_loss_single"]) > 100 * max(r["loss_max_abs_diff"], 1e-7)


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
@pytest.mark.parametrize("through", ["True", "False"])
def test_sharded_outputs_keep_their_layout(four_devices: dict, through: str) -> None:
    r = four_devices[through]
    assert r["state_all_replicated"] and r["metrics_all_replicated"]
    assert r["batch_sharded"] and r["batch_shard_shapes"] == [[16, 7]] * 4
    assert r["predict_out_sharded"]
    assert r["train_step_cache_sizes"][-1] == r["train_step_cache_sizes"][0]  # no recompiles step to step
    assert four_devices["data_parallel_cache_size"] == 1


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
def test_bad_sizes_name_the_numbers(four_devices: dict) -> None:
    msg = four_devices["indivisible_error"]
    assert msg is not None and "62" in msg and "4 devices" in msg
    msg = four_devices["too_many_error"]
    assert msg is not None and "n_devices=5" in msg and "4" in msg
    assert four_devices["rounded"] == [60, 64, 4]
    assert "batch size 3 is smaller than the 4 devices" in four_devices["round_error"]


def test_single_device_mesh_in_process() -> None:
    n = len(jax.devices())
    mesh = make_data_mesh()
    assert mesh.axis_names == (DATA_AXIS,) and mesh.devices.size == n
    for bad in (0, -1, n + 1):
        with pytest.raises(ValueError, match=f"n_devices={bad}"):
            make_data_mesh(bad)
    batch = shard_batch(Batch(views=(np.ones((6, 3), np.float32),), codes=(np.zeros((6, 2), np.float32),)), mesh)
    assert batch.ortho_views is None
    assert all(is_batch_sharded_on(x, mesh) for x in jax.tree.leaves(batch))
    tree = replicate({"a": np.arange(3.0), "b": np.zeros(())}, mesh)
    assert all(is_replicated_on(x, mesh) for x in jax.tree.leaves(tree))


def test_divisibility_and_row_checks() -> None:
    mesh = make_data_mesh(1)
    check_batch_divisible(7, mesh)
    assert round_batch_to_devices(7, mesh) == 7
    with pytest.raises(ValueError, match="same number of rows"):
        shard_batch(Batch(views=(np.ones((6, 3)), np.ones((5, 3)))), mesh)


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
def test_fit_over_a_mesh_equals_fit_on_one_device(four_devices: dict) -> None:
    """train.fit(mesh=...) (batches sharded by the loop, state replicated) follows the same
    trajectory as the single-device loop, and refuses a batch size the devices do not divide."""
    r = four_devices["fit"]
    assert r["params_max_abs_diff"] < 1e-5, r
    assert r["r_inv_max_abs_diff"] < 1e-5, r
    np.testing.assert_allclose(r["train_loss"][0], r["train_loss"][1], rtol=1e-5)
    assert r["state_all_replicated"]
    assert "batch size 62 is not divisible by the 4 devices" in four_devices["fit_indivisible_error"]


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
def test_device_resident_epoch_over_a_mesh_equals_fit_on_one_device(four_devices: dict) -> None:
    """train.data_on_device over 4 devices (data replicated, each gathered batch constrained to
    the batch sharding, the epoch one lax.scan) follows the single-device host loop."""
    r = four_devices["fit_on_device"]
    assert r["params_max_abs_diff"] < 1e-5, r
    assert r["r_inv_max_abs_diff"] < 1e-5, r
    np.testing.assert_allclose(r["train_loss"][0], r["train_loss"][1], rtol=1e-5)
    assert r["state_all_replicated"]


def test_cli_devices_option_refuses_more_devices_than_present(tmp_path, capsys) -> None:
    from specrage_jax.cli import main

    rc = main(["train", "--dataset", "blobs", "--devices", "99", "--quiet", "--out", str(tmp_path / "run")])
    assert rc == 2
    assert "n_devices=99 is not possible" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.slow  # the four-device child process: ~60 s from an empty compilation cache
def test_incomplete_data_over_a_mesh_equals_fit_on_one_device(four_devices: dict) -> None:
    """Training with missing views over 4 devices, host-gathered and device-resident batches alike
    (the (m, V) mask sharded with the rows), follows the single-device loop."""
    r = four_devices["fit_masked"]
    assert r["params_max_abs_diff"] < 1e-5, r
    assert r["r_inv_max_abs_diff"] < 1e-5, r
    np.testing.assert_allclose(r["train_loss"][0], r["train_loss"][1], rtol=1e-5)
    np.testing.assert_allclose(r["train_loss"][0], r["train_loss"][2], rtol=1e-5)
    assert np.isfinite(r["train_loss"]).all()
