"""Training on incomplete data: samples that miss whole views (all-NaN rows or a mask (n, V)).

Per batch, each view's kNN graph and sigma use only the rows that have the view; each view's loss
term is averaged over its present pairs; the fusion uses a sample's present views. Checked
against NumPy references, at the edge of too few present rows, through fit, the estimator,
save/load and resume; complete data takes the complete-data computation unchanged.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax import SpecRaGE
from specrage_jax.config import GraphConfig, OrthoConfig
from specrage_jax.data.incomplete import mean_impute, remove_views_at_random
from specrage_jax.nets.state import create_state
from specrage_jax.training.batches import missing_view_mask
from specrage_jax.training.checkpoint import TrainingCheckpointer
from specrage_jax.training.loop import train_loop
from specrage_jax.training.steps import Batch, grad_step, ortho_step, train_step
from tests.experiment_scripts import load_experiment
from tests.fixed_sections import fixed_experiment, fixed_graph, fixed_model, fixed_train
from tests.synthetic import points

MODEL = fixed_model(n_components=3, view_hidden=(16,), weighting_hidden=(8,), temperature=1.0)
GRAPH = fixed_graph(n_neighbors=5, scale_mode="batch", weight_entropy=0.01)


def small_state(graph: GraphConfig = GRAPH):
    return create_state([2, 2], MODEL, graph, OrthoConfig(), learning_rate=1e-3, seed=0)


def clustered_views(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])[labels] + rng.normal(size=(n, 2))
    return [x.astype(np.float32), (x @ np.array([[0.0, -1.0], [1.0, 0.0]])).astype(np.float32)]


def drop_views(views: list[np.ndarray], fraction: float, seed: int) -> list[np.ndarray]:
    """All-NaN rows for a random view of ``fraction`` of the samples (each keeps one view)."""
    rng = np.random.default_rng(seed)
    n = len(views[0])
    out = [v.copy() for v in views]
    chosen = np.flatnonzero(rng.random(n) < fraction)
    which = rng.integers(0, len(views), len(chosen))
    for i, v in zip(chosen, which):
        out[v][i] = np.nan
    return out


def test_a_step_on_a_batch_with_a_view_on_fewer_than_l_plus_one_rows_is_finite():
    views = clustered_views(32, 0)
    mask = np.ones((32, 2), bool)
    mask[3:, 1] = False  # view 1 on three rows only: each has two present neighbours, l = 5
    batch = Batch(views=tuple(jnp.asarray(np.where(mask[:, v, None], x, 0)) for v, x in enumerate(views)), mask=mask)
    state, metrics = train_step(small_state(), batch, batch)
    assert np.isfinite(float(metrics["loss"])) and np.isfinite(float(metrics["grad_norm"]))
    leaves = jax.tree.leaves(state.params)
    assert all(np.isfinite(np.asarray(p)).all() for p in leaves)
    weights = np.asarray(metrics["view_weights"])
    assert weights[1] < 0.5  # rows without view 1 weigh it 0


def masked_batch(views: list[np.ndarray], mask: np.ndarray, filler: float) -> Batch:
    """The views with the rows ``mask`` marks missing set to ``filler``, and the mask."""
    rows = tuple(jnp.asarray(np.where(mask[:, v, None], x, np.float32(filler))) for v, x in enumerate(views))
    return Batch(views=rows, mask=jnp.asarray(mask))


def test_the_gradient_through_r_inv_uses_the_ortho_batch_mask():
    """ortho_step then grad_step (with ortho_views and ortho_mask) equals train_step, and the
    values behind a missing row of the orthogonalization batch change nothing."""
    state_of = lambda: create_state(  # noqa: E731
        [2, 2], MODEL, GRAPH, OrthoConfig(grad_through_r_inv=True), learning_rate=1e-3, seed=0
    )
    rng = np.random.default_rng(12)
    ortho_mask, grad_mask = rng.random((32, 2)) < 0.7, rng.random((32, 2)) < 0.7
    ortho_mask[:, 0] |= ~ortho_mask.any(axis=1)
    grad_mask[:, 0] |= ~grad_mask.any(axis=1)
    ortho_views, grad_views = clustered_views(32, 13), clustered_views(32, 14)
    grad_batch = masked_batch(grad_views, grad_mask, 0.0)
    results = []
    for filler in (0.0, 1e3):  # what a missing row holds must not matter
        ortho_batch = masked_batch(ortho_views, ortho_mask, filler)
        fused, _ = train_step(state_of(), ortho_batch, grad_batch)
        split = ortho_step(state_of(), ortho_batch)
        split, _ = grad_step(split, grad_batch._replace(ortho_views=ortho_batch.views, ortho_mask=ortho_batch.mask))
        for a, b in zip(jax.tree.leaves(fused.params), jax.tree.leaves(split.params)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        results.append(fused)
    for a, b in zip(jax.tree.leaves(results[0].params), jax.tree.leaves(results[1].params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(results[0].r_inv), np.asarray(results[1].r_inv), rtol=1e-5, atol=1e-6)


def test_fit_builds_masks_only_for_incomplete_data():
    views = clustered_views(40, 0)
    assert missing_view_mask(views, what="train_views")[1] is None
    filled, mask = missing_view_mask(drop_views(views, 0.5, 1), what="train_views")
    assert mask is not None and (~mask).sum() > 0 and mask.any(axis=1).all()
    assert all(np.isfinite(x).all() for x in filled)
    assert all(not x[~mask[:, v]].any() for v, x in enumerate(filled))


TRAIN = fixed_train(epochs=4, batch_size=32, progress=False)


def test_fit_on_incomplete_data_trains_and_weights_missing_views_zero():
    train, val = drop_views(clustered_views(96, 0), 0.5, 2), drop_views(clustered_views(40, 1), 0.5, 3)
    state, history = train_loop(small_state(), train, val, TRAIN, seed=0)
    assert all(np.isfinite(r.train_loss) and np.isfinite(r.val_loss) for r in history.epochs)
    from specrage_jax.nets.embed import embed

    y, alpha = embed(state, train)
    assert np.isfinite(y).all()
    missing = np.stack([np.isnan(x).all(axis=1) for x in train], axis=1)
    assert (alpha[missing] == 0).all() and np.allclose(alpha.sum(axis=1), 1.0)


def test_resume_with_masks_equals_the_uninterrupted_run(tmp_path):
    train, val = drop_views(clustered_views(96, 0), 0.4, 4), drop_views(clustered_views(40, 1), 0.4, 5)
    full, history_full = train_loop(small_state(), train, val, TRAIN, seed=0)
    with TrainingCheckpointer(tmp_path / "ck", every_epochs=1, keep=3, model_config=MODEL) as ckpt:
        train_loop(small_state(), train, val, TRAIN, seed=0, checkpointer=ckpt)
        restored = ckpt.restore(2, small_state())
    state, history = train_loop(restored.state, train, val, TRAIN, seed=0, resume=restored.progress)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(full.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(state.r_inv), np.asarray(full.r_inv))
    strip = [dataclasses.replace(r, seconds=0.0) for r in history.epochs]
    assert strip == [dataclasses.replace(r, seconds=0.0) for r in history_full.epochs]


ESTIMATOR = {"n_clusters": 3, "n_neighbors": 5, "max_epochs": 3, "view_hidden": (16,), "random_state": 0}


def test_estimator_trains_on_nan_rows_and_on_a_mask_alike_and_survives_save_load(tmp_path):
    complete = clustered_views(120, 6)
    incomplete = drop_views(complete, 0.5, 7)
    mask = np.stack([~np.isnan(x).all(axis=1) for x in incomplete], axis=1)
    by_nan = SpecRaGE(**ESTIMATOR).fit(incomplete)
    by_mask = SpecRaGE(**ESTIMATOR).fit(complete, mask=mask)
    np.testing.assert_array_equal(by_nan.transform(incomplete), by_mask.transform(complete, mask))
    weights = by_nan.view_weights(incomplete)
    assert (weights[~mask] == 0).all()
    by_nan.save(tmp_path / "model")
    loaded = SpecRaGE.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.transform(incomplete), by_nan.transform(incomplete))


@pytest.mark.slow  # three pre-training stages end to end; tests/test_pretrain.py checks the joint pairs
def test_a_weak_view_gets_joint_siamese_nets_that_survive_save_load(tmp_path):
    """One view of pure noise, one of clusters, half the samples on one view: the samples with
    both views split far more cleanly under the two together than under the mean of the views'
    own graphs, so under ``siamese.positives=auto`` the estimator trains Siamese nets on the
    joint neighbours (``siamese`` not asked for)."""
    clean = clustered_views(150, 8)[0]
    noise = np.random.default_rng(9).normal(size=(150, 30)).astype(np.float32)
    views = drop_views([noise, clean], 0.5, 10)
    rule = ["siamese.positives=auto", "siamese.hidden=(16,)", "siamese.epochs=2"]
    est = SpecRaGE(**ESTIMATOR, config_overrides=rule).fit(views)
    assert est.resolved_defaults_["siamese.positives"]["value"] == "joint"
    assert est.siamese_nets_ is not None and len(est.siamese_nets_) == 2
    embedded = est.transform(views)
    assert np.isfinite(embedded).all()
    est.save(tmp_path / "model")
    np.testing.assert_array_equal(SpecRaGE.load(tmp_path / "model").transform(views), embedded)
    own = SpecRaGE(**ESTIMATOR).fit(views)  # the default: each view's own neighbours, no nets asked for
    assert own.siamese_nets_ is None and "siamese.positives" not in own.resolved_defaults_


def test_complete_data_with_an_all_true_mask_is_bitwise_the_complete_fit():
    views = clustered_views(120, 8)
    plain = SpecRaGE(**ESTIMATOR).fit(views)
    masked = SpecRaGE(**ESTIMATOR).fit(views, mask=np.ones((120, 2), bool))
    np.testing.assert_array_equal(plain.transform(views), masked.transform(views))
    np.testing.assert_array_equal(plain.labels_, masked.labels_)


def test_score_takes_incomplete_data_as_nan_rows_or_a_mask():
    complete = clustered_views(120, 15)
    incomplete = drop_views(complete, 0.4, 16)
    mask = np.stack([~np.isnan(x).all(axis=1) for x in incomplete], axis=1)
    model = SpecRaGE(**ESTIMATOR).fit(complete)
    by_nan = model.score(incomplete)
    assert np.isfinite(by_nan)
    assert model.score(complete, mask=mask) == by_nan  # values behind a masked row are ignored
    assert by_nan != model.score(complete)  # and the graph is the present rows' graph
    assert model.score(complete, mask=np.ones((120, 2), bool)) == model.score(complete)
    for x in incomplete:
        x[5] = np.nan
    with pytest.raises(ValueError, match="X: sample 5 has every view missing"):
        model.score(incomplete)


def test_the_estimator_names_a_view_present_on_too_few_training_rows():
    views = clustered_views(60, 9)
    views[1][4:] = np.nan  # view 1 on four samples only
    with pytest.raises(ValueError, match=r"view 1 is present on only \d of the \d+ training rows"):
        SpecRaGE(**ESTIMATOR).fit(views)


def test_the_estimator_names_a_training_sample_with_no_view():
    views = clustered_views(60, 10)
    for x in views:
        x[7] = np.nan
    with pytest.raises(ValueError, match="X: sample 7 has every view missing"):
        SpecRaGE(**ESTIMATOR).fit(views)


def test_remove_views_at_random_keeps_a_view_per_sample_and_is_seeded():
    views = [points(200, 3, 11), points(200, 4, 12), points(200, 2, 13)]
    out, present = remove_views_at_random(views, 0.5, seed=3)
    assert (~present.all(axis=1)).sum() == 100 and present.any(axis=1).all()
    for v, x in enumerate(out):
        assert np.isnan(x[~present[:, v]]).all() and np.array_equal(x[present[:, v]], views[v][present[:, v]])
    again, present_again = remove_views_at_random(views, 0.5, seed=3)
    np.testing.assert_array_equal(present, present_again)
    assert not np.array_equal(present, remove_views_at_random(views, 0.5, seed=4)[1])
    assert (present.sum(axis=1) >= 1).all() and (present[~present.all(axis=1)].sum(axis=1) <= 2).all()


def test_mean_impute_fills_missing_rows_with_the_fit_rows_present_mean():
    views, present = remove_views_at_random([points(50, 3, 14), points(50, 2, 15)], 0.6, seed=0)
    fit_rows = np.arange(30)
    filled = mean_impute(views, fit_rows)
    for v, x in enumerate(filled):
        expected = views[v][fit_rows][present[fit_rows, v]].mean(axis=0)
        np.testing.assert_allclose(x[~present[:, v]], np.broadcast_to(expected, x[~present[:, v]].shape), rtol=1e-6)
        np.testing.assert_array_equal(x[present[:, v]], views[v][present[:, v]])


@pytest.mark.slow  # four short trainings and an exact SE: ~30 s
def test_the_incomplete_data_script_writes_every_method_and_the_figure(tmp_path):
    import json

    module = load_experiment("incomplete", module_name="incomplete_script")
    tiny = ["--set", "model.view_hidden=32,32", "--set", "train.epochs=2", "--set", "train.steps_per_epoch=3"]
    module.main(["--datasets", "blobs", "--fractions", "0.5", "--out", str(tmp_path), *tiny])
    result = json.loads((tmp_path / "incomplete_blobs.json").read_text())
    cells = {r["fraction"]: r for r in result["runs"]}
    assert set(cells) == {0.0, 0.5}
    assert set(module.METHODS) <= set(cells[0.5])
    assert cells[0.5]["complete_samples"] == pytest.approx(0.5, abs=0.01)
    assert cells[0.5]["complete_only"]["n_train"] < cells[0.5]["specrage"]["n_train"]
    for method in module.METHODS:
        assert 0.0 <= cells[0.5][method]["acc"] <= 1.0
    assert "kmeans_by_views" not in cells[0.0]["specrage"]
    assert set(cells[0.5]["specrage"]["kmeans_by_views"]) == {"views 0+1", "views 0", "views 1"}
    assert (tmp_path / "incomplete_blobs.png").stat().st_size > 1000
    # the figure is redrawn from the JSON alone, with the supervised reference where it was run
    (tmp_path / "incomplete_blobs.png").unlink()
    (tmp_path / "incomplete_blobs_supervised.json").write_text(json.dumps({"acc_mean_by_fraction": {"0.0": 1.0}}))
    assert module.supervised_reference(tmp_path, "blobs") == {0.0: 1.0}
    module.main(["--datasets", "blobs", "--plot-only", "--out", str(tmp_path)])
    assert (tmp_path / "incomplete_blobs.png").stat().st_size > 1000
    assert json.loads((tmp_path / "incomplete_blobs.json").read_text())["runs"] == result["runs"]
    # every method of a cell is clustered on the rows the incomplete data calls for
    auto = module.preset_config("blobs", 3)
    present = np.ones((10, 2), bool)
    assert module.same_rows_for_every_method(auto, present).model.output_rows == "raw"
    present[3, 1] = False
    assert module.same_rows_for_every_method(auto, present).model.output_rows == "unit"
    unit = module.preset_config("blobs", 3, ["model.output_rows=raw"])
    assert module.same_rows_for_every_method(unit, present).model.output_rows == "raw"  # as set


def test_a_run_embeds_unit_rows_where_views_are_missing_and_raw_rows_otherwise():
    """The experiment path (CLI, scripts) resolves ``model.output_rows`` auto from the training
    split; a model whose config was never resolved embeds raw rows, as trained."""
    from specrage_jax.data import MultiViewData
    from specrage_jax.nets.embed import embed
    from specrage_jax.runs.prepare import prepare_splits, preset_config, resolve_run_defaults

    views = clustered_views(200, 12)
    labels = np.arange(200) % 3
    for dropped, rows in ((False, "raw"), (True, "unit")):
        data = MultiViewData(
            views=drop_views(views, 0.4, 13) if dropped else views, labels=labels, name="toy", view_names=("a", "b")
        )
        config = preset_config("blobs", 3, ["train.missing_view_batch_growth=1"])
        splits = prepare_splits(data, config, seed=0)
        resolved, chosen = resolve_run_defaults(config, splits, 3, seed=0)
        assert resolved.model.output_rows == rows and ("model.output_rows" in chosen) == dropped
    state = create_state([2, 2], MODEL, GRAPH, OrthoConfig(), learning_rate=1e-3, seed=0)
    assert state.model().config.output_rows == "auto"
    y_auto, _ = embed(state, views)
    y_raw, _ = embed(state, views, rows="raw")
    np.testing.assert_array_equal(y_auto, y_raw)
    assert not np.allclose(np.linalg.norm(y_raw, axis=1), 1.0)


def test_the_shared_training_path_names_a_sparse_view_in_either_scale_mode():
    """train_model (the estimator's and the CLI's path) checks coverage itself, so per-batch
    sigma (no global scale estimate) is refused alike."""
    from specrage_jax.training.initial_state import train_model

    views = clustered_views(60, 11)
    views[0][3:] = np.nan  # view 0 on three samples
    for mode in ("batch", "global"):
        config = fixed_experiment(
            model=MODEL, graph=dataclasses.replace(GRAPH, scale_mode=mode), train=dataclasses.replace(TRAIN, epochs=1)
        )
        with pytest.raises(ValueError, match=r"view 0 is present on only 3 of the 60 training rows"):
            train_model(views, [v[:0] for v in views], config, seed=0)


def test_the_supervised_reference_scores_every_test_sample_once_by_its_group_of_views(tmp_path):
    import json

    module = load_experiment("incomplete_ceiling", module_name="incomplete_ceiling_script")
    module.main(
        ["--datasets", "blobs", "--fractions", "0.5", "--seeds", "0", "--max-train", "50", "--out", str(tmp_path)]
    )
    result = json.loads((tmp_path / "incomplete_blobs_supervised.json").read_text())
    cells = {r["fraction"]: r for r in result["runs"]}
    assert set(cells) == {0.0, 0.5}
    assert list(cells[0.0]["groups"]) == ["views 0+1"]
    assert set(cells[0.5]["groups"]) == {"views 0+1", "views 0", "views 1"}
    n_test = cells[0.0]["groups"]["views 0+1"]["n_test"]
    assert sum(g["n_test"] for g in cells[0.5]["groups"].values()) == n_test
    assert all(g["n_train"] <= 50 for g in cells[0.5]["groups"].values())
    overall = sum(g["acc"] * g["n_test"] for g in cells[0.5]["groups"].values()) / n_test
    assert cells[0.5]["acc"] == pytest.approx(overall)
    assert cells[0.0]["acc"] > 0.9  # labelled, well-separated blobs
    assert result["acc_mean_by_fraction"] == {"0.0": cells[0.0]["acc"], "0.5": cells[0.5]["acc"]}


def test_a_runs_metrics_score_each_group_of_test_samples_only_where_views_are_missing():
    from specrage_jax.data import MultiViewData
    from specrage_jax.runs.evaluate import evaluate_state
    from specrage_jax.runs.prepare import prepare_splits, preset_config, resolve_run_defaults
    from specrage_jax.validation import present_views

    views = clustered_views(200, 12)
    labels = np.arange(200) % 3
    for dropped in (False, True):
        data = MultiViewData(
            views=drop_views(views, 0.4, 13) if dropped else views, labels=labels, name="toy", view_names=("a", "b")
        )
        config = preset_config("blobs", 3, ["train.missing_view_batch_growth=1", "graph.scale_mode=batch"])
        splits = prepare_splits(data, config, seed=0)
        resolved, _ = resolve_run_defaults(config, splits, 3, seed=0)
        state = create_state([2, 2], resolved.model, resolved.graph, OrthoConfig(), learning_rate=1e-3, seed=0)
        metrics = evaluate_state(state, splits, resolved, seed=0).metrics
        if not dropped:
            assert "kmeans_by_views" not in metrics  # complete data: the record is as before
            continue
        groups = metrics["kmeans_by_views"]
        present = present_views(splits.test)
        assert set(groups) == {"views 0+1", "views 0", "views 1"}
        assert groups["views 0"]["n"] == int((present[:, 0] & ~present[:, 1]).sum())
        assert sum(g["n"] for g in groups.values()) == len(splits.test_labels)
        overall = sum(g["n"] * g["acc"] for g in groups.values()) / len(splits.test_labels)
        assert overall == pytest.approx(metrics["kmeans"]["acc"])


# --- view dropout ------------------------------------------------------------------------------


def test_one_view_kept_at_random_keeps_one_of_a_samples_own_views_at_the_rate():
    from specrage_jax.training.steps import one_view_kept_at_random

    rng = np.random.default_rng(40)
    mask = rng.random((6000, 3)) < 0.6
    mask[:, 2] |= ~mask.any(axis=1)
    several = mask.sum(axis=1) >= 2
    key = jax.random.key(3)
    np.testing.assert_array_equal(np.asarray(one_view_kept_at_random(jnp.asarray(mask), 0.0, key)), mask)
    every = np.asarray(one_view_kept_at_random(jnp.asarray(mask), 1.0, key))
    assert not (every & ~mask).any()  # only views the sample has
    assert (every.sum(axis=1) == 1)[several].all()
    np.testing.assert_array_equal(every[~several], mask[~several])  # one-view samples as they were
    half = np.asarray(one_view_kept_at_random(jnp.asarray(mask), 0.5, key))
    changed = (half != mask).any(axis=1)
    assert not changed[~several].any()
    assert abs(changed[several].mean() - 0.5) < 0.03
    complete = mask.all(axis=1) & changed  # the view kept is uniform over the sample's views
    np.testing.assert_allclose(half[complete].mean(axis=0), 1 / 3, atol=0.04)


def test_a_view_dropped_fusion_is_the_fusion_of_a_sample_that_has_only_the_kept_view():
    state = small_state()
    model = state.model()
    views = [jnp.asarray(v) for v in clustered_views(20, 41)]
    mask = jnp.asarray(np.ones((20, 2), bool))
    fewer = np.ones((20, 2), bool)
    fewer[:8, 1] = False
    fewer[8:12, 0] = False
    y_all, y, alpha = model.fuse_with_fewer_views(views, mask, jnp.asarray(fewer))
    y_fewer, _ = model.fuse(views, jnp.asarray(fewer))
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_fewer), rtol=1e-6, atol=1e-6)
    full, full_alpha = model.fuse(views, mask)
    np.testing.assert_allclose(np.asarray(y_all), np.asarray(full), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(alpha), np.asarray(full_alpha), rtol=1e-6)
    assert not np.allclose(np.asarray(y)[:12], np.asarray(full)[:12])  # the dropped samples moved
    assert np.asarray(alpha)[:12].min() > 0  # the weights stay those of every view the sample has


@pytest.mark.slow  # two estimator fits
def test_view_dropout_changes_the_gradient_steps_only_where_views_are_missing():
    on, off = (dataclasses.replace(GRAPH, view_dropout=rate) for rate in (0.5, 0.0))
    views = clustered_views(32, 42)
    complete = Batch(views=tuple(jnp.asarray(v) for v in views))
    mask = np.ones((32, 2), bool)
    mask[:8, 1] = False
    incomplete = masked_batch(views, mask, 0.0)

    def stepped(graph: GraphConfig, batch: Batch):
        return train_step(small_state(graph), batch, batch)[0].params

    def same(a, b) -> bool:
        return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

    assert same(stepped(on, complete), stepped(off, complete))
    assert not same(stepped(on, incomplete), stepped(off, incomplete))
    # a whole-set step: R^-1 from every view, the loss on the view-dropped fusion
    from specrage_jax.training.steps import full_batch_step

    whole_on, _ = full_batch_step(small_state(on), incomplete)
    whole_off, _ = full_batch_step(small_state(off), incomplete)
    np.testing.assert_array_equal(np.asarray(whole_on.r_inv), np.asarray(whole_off.r_inv))
    assert not same(whole_on.params, whole_off.params)
    # validation measures every sample through all its views
    from specrage_jax.training.steps import eval_loss

    assert float(eval_loss(small_state(on), incomplete)) == float(eval_loss(small_state(off), incomplete))
