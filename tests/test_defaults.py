"""Data-aware defaults: the resolution of every setting and its record, batches where views are
missing, explicit values and presets, and end to end on a real dataset and through the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.cluster import KMeans

from specrage_jax import SpecRaGE
from specrage_jax.config import (
    AUTO_WIDTHS,
    VIEW_NETS_UNTIL_STALL,
    ExperimentConfig,
    GraphConfig,
)
from specrage_jax.data.loaders import load_mat
from specrage_jax.evaluation.metrics import clustering_accuracy
from specrage_jax.overrides import apply_overrides
from specrage_jax.presets import preset
from specrage_jax.training import defaults as data_rules
from specrage_jax.training import missing_view_rules
from specrage_jax.training.defaults import (
    DataShape,
    budget_epochs,
    degree_normalization_rule,
    epoch_steps,
    full_batch_size,
    hidden_widths,
    resolve_defaults,
)
from specrage_jax.training.missing_view_rules import (
    batch_for_missing_views,
    joint_is_clearly_cleaner,
    joint_split_scores,
)
from tests.fixed_sections import FIXED
from tests.synthetic import clustered, sparse_counts

DEVSUITE = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "devsuite"


# --- the resolution rules ----------------------------------------------------------------------


def test_batch_steps_and_widths_follow_the_training_rows():
    assert full_batch_size(203) == 203 and full_batch_size(10_000) == 4096
    assert epoch_steps(183, 183) == 10 and budget_epochs(10) == 40  # small sets: 40 epochs of 10 whole-set steps
    per_epoch = epoch_steps(100_000, 4096)
    assert per_epoch == 25 and budget_epochs(per_epoch) * per_epoch >= 400  # an epoch is never cut short
    assert hidden_widths(200) == (512, 512, 256)
    assert hidden_widths(3000) == (256, 256, 128)  # whole-set steps grow with n: narrower nets
    assert hidden_widths(20_000) == (512, 512, 256) and hidden_widths(60_000) == (1024, 1024, 512)


def test_resolution_adds_a_direction_where_it_chose_a_sparse_graph_in_doubt():
    # four overlapping clusters, each of two shifted halves; the second view a noisy copy: no graph
    # splits the batch clearly (scores 1.1-1.14), the views agree, so l 10 of the dense 30
    x, _ = clustered(300, 4, 6, seed=1, spread=3.0)
    x = x + ((np.arange(300) // 4) % 2)[:, None] * np.eye(6)[0]
    noisy = x[:, ::-1] + 0.5 * np.random.default_rng(1).standard_normal(x.shape)
    config, chosen = resolve_defaults(ExperimentConfig(), _shape([x, noisy], 4))
    assert config.graph.n_neighbors == 10 and config.model.n_components >= 5
    assert chosen["graph.n_neighbors"]["rule"] == "agreeing views" and "share" in chosen["graph.n_neighbors"]["why"]
    assert chosen["model.n_components"]["rule"] == "sparse graph in doubt"
    assert "sparser than the dense graph" in chosen["model.n_components"]["why"]
    tight, _ = clustered(300, 4, 6, seed=4, spread=0.3)  # the sparse graphs fall into 4 components
    config, _ = resolve_defaults(ExperimentConfig(), _shape([tight, tight[:, ::-1]], 4))
    assert config.graph.n_neighbors < 30 and config.model.n_components == 4


def _shape(views, k, **kw):
    return DataShape(views=tuple(np.asarray(v, np.float32) for v in views), n_clusters=k, **kw)


def test_resolution_records_every_choice_and_its_reason():
    x, _ = clustered(200, 4, 6, seed=4)
    config, chosen = resolve_defaults(dataclasses.replace(ExperimentConfig()), _shape([x, x[:, ::-1]], 4))
    assert config.unresolved_fields() == []
    assert set(chosen) == {
        "train.batch_size",
        "data.graph_inputs",
        "graph.n_neighbors",
        "train.epochs",
        "train.steps_per_epoch",
        "model.view_hidden",
        "model.n_components",
        "train.view_net_steps",
        "graph.degree_normalization",
    }
    assert config.graph.degree_normalization == "none"  # 4 clusters: each view's graph as built
    assert config.model.n_components >= 4
    assert config.train.batch_size == 200 and config.train.epochs * config.train.steps_per_epoch >= 400
    assert config.train.spectral_init  # the output layers start solved
    assert config.train.view_net_steps == VIEW_NETS_UNTIL_STALL  # the whole set: view nets until the loss stalls
    assert config.graph.n_neighbors == chosen["graph.n_neighbors"]["value"]
    assert all(entry["why"] for entry in chosen.values())
    json.dumps(chosen)  # goes into metrics.json and checkpoints as it is


def test_explicit_values_win_and_presets_are_untouched():
    x, _ = clustered(200, 4, 6, seed=4)
    explicit = apply_overrides(
        ExperimentConfig(),
        ["graph.n_neighbors=7", "train.batch_size=64", "model.view_hidden=(32,)", "model.n_components=3"],
    )
    config, chosen = resolve_defaults(explicit, _shape([x], 4))
    assert (config.graph.n_neighbors, config.train.batch_size, config.model.view_hidden) == (7, 64, (32,))
    assert config.model.n_components == 3
    assert not {"graph.n_neighbors", "model.view_hidden", "model.n_components"} & set(chosen)
    assert chosen["data.graph_inputs"]["value"] == "model"  # mini-batches: the graph is per batch
    assert config.train.view_net_steps == 0 and "mini-batches" in chosen["train.view_net_steps"]["why"]
    digits = preset("digits")
    assert resolve_defaults(digits, _shape([x], 4)) == (as_resolved(digits, "raw"), {})
    assert preset("file:any.mat").unresolved_fields() and preset("file:any.mat").model.view_hidden == AUTO_WIDTHS


def test_resolution_on_tiny_many_class_and_one_view_data():
    x, _ = clustered(12, 3, 4, seed=5)
    config, _ = resolve_defaults(ExperimentConfig(), _shape([x], 3))
    assert config.train.batch_size == 12 and 1 <= config.graph.n_neighbors < 12
    many, _ = clustered(400, 40, 8, seed=6)  # 40 classes of 10 rows
    config, chosen = resolve_defaults(ExperimentConfig(), _shape([many, many * 2.0], 40))
    assert config.graph.n_neighbors <= 8  # below a class's size: at 30, most would lie in other classes
    assert config.model.n_components == 40 and "model.n_components" in chosen  # many clusters: k
    assert config.graph.degree_normalization == "samples"  # many small clusters: the normalized cut
    assert "40 clusters" in chosen["graph.degree_normalization"]["why"]
    sampled = _shape([many[:100]], 40, n_train=50_000)  # a sample standing for many rows
    config, _ = resolve_defaults(ExperimentConfig(), sampled)
    assert config.train.batch_size == 4096 and config.data.graph_inputs == "model"
    assert config.train.view_net_steps == 0  # mini-batch steps: the view nets train throughout


@pytest.mark.parametrize(("n_clusters", "expected"), [(2, "none"), (20, "none"), (21, "samples"), (100, "samples")])
def test_graphs_are_degree_normalized_only_for_many_clusters(n_clusters, expected):
    assert degree_normalization_rule(n_clusters)[0] == expected


def test_an_explicit_degree_normalization_stays_with_many_clusters():
    many, _ = clustered(400, 40, 8, seed=6)
    explicit = apply_overrides(ExperimentConfig(), ["graph.degree_normalization=none"])
    config, chosen = resolve_defaults(explicit, _shape([many, many * 2.0], 40))
    assert config.graph.degree_normalization == "none" and "graph.degree_normalization" not in chosen


def with_missing_views(views: list[np.ndarray], fraction: float, *, seed: int) -> list[np.ndarray]:
    """Copies of the views where a seeded ``fraction`` of the samples lose one random view."""
    rng = np.random.default_rng(seed)
    out = [np.array(v, np.float32) for v in views]
    chosen = np.flatnonzero(rng.random(len(out[0])) < fraction)
    for i, v in zip(chosen, rng.integers(0, len(out), len(chosen))):
        out[v][i] = np.nan
    return out


def test_the_batch_stays_for_complete_data_or_without_growth():
    x, _ = clustered(300, 3, 5, seed=7)
    m, reference, gaps = batch_for_missing_views([x, x * 2.0], 3, 100, 10, 4)
    assert m == 100 and math.isnan(reference) and gaps == {}
    incomplete = with_missing_views([x, x * 2.0], 0.5, seed=8)
    assert batch_for_missing_views(incomplete, 3, 100, 10, 1)[0] == 100


def test_the_batch_doubles_until_its_graph_splits_as_cleanly_as_complete_samples(monkeypatch):
    x, _ = clustered(1000, 3, 5, seed=9)
    views = with_missing_views([x, x * 2.0], 0.5, seed=10)
    complete = np.stack([~np.isnan(v).any(axis=1) for v in views], axis=1).all(axis=1)

    def gap(views, rows, l, n_clusters, distinct=True):  # complete rows: 1.5; a batch with missing views: m / 200
        return 1.5 if complete[rows].all() else len(rows) / 200

    monkeypatch.setattr(missing_view_rules, "batch_eigengap", gap)
    assert batch_for_missing_views(views, 3, 100, 10, 4) == (400, 1.5, {100: 0.5, 200: 1.0, 400: 2.0})
    assert batch_for_missing_views(views, 3, 100, 10, 2)[0] == 200  # the growth factor bounds it
    assert batch_for_missing_views([v[:300] for v in views], 3, 100, 10, 4)[0] == 300  # and the training rows


def test_a_preset_batch_grows_where_views_are_missing_and_the_record_says_why():
    x, _ = clustered(600, 3, 5, seed=11)
    views = with_missing_views([x, x[:, ::-1] * 2.0], 0.5, seed=12)
    explicit = apply_overrides(FIXED, ["train.batch_size=64", "graph.n_neighbors=10"])
    config, chosen = resolve_defaults(explicit, _shape(views, 3))
    assert config.train.batch_size in (64, 128, 256) and "views are missing" in chosen["train.batch_size"]["why"]
    fixed = apply_overrides(explicit, ["train.missing_view_batch_growth=1"])
    config, chosen = resolve_defaults(fixed, _shape(views, 3))
    assert config == as_resolved(fixed, "unit") and set(chosen) == {"model.output_rows"}
    complete = _shape([x, x[:, ::-1] * 2.0], 3)
    assert resolve_defaults(explicit, complete) == (as_resolved(explicit, "raw"), {})


def test_a_grown_batch_keeps_the_steps_of_one_pass_at_the_configured_batch(monkeypatch):
    x, _ = clustered(1000, 3, 5, seed=9)
    views = with_missing_views([x, x * 2.0], 0.5, seed=10)
    monkeypatch.setattr(data_rules, "batch_for_missing_views", lambda *a, **k: (400, 1.5, {100: 0.5, 400: 2.0}))
    explicit = apply_overrides(FIXED, ["train.batch_size=100", "graph.n_neighbors=10", "train.epochs=3"])
    config, chosen = resolve_defaults(explicit, _shape(views, 3))
    assert (config.train.batch_size, config.train.steps_per_epoch, config.train.epochs) == (400, 10, 3)
    assert "as many steps as on complete data" in chosen["train.steps_per_epoch"]["why"]
    set_steps = apply_overrides(explicit, ["train.steps_per_epoch=4"])
    assert resolve_defaults(set_steps, _shape(views, 3))[0].train.steps_per_epoch == 4  # as set
    budget = apply_overrides(explicit, ["train.epochs=0"])  # the step budget: 400 steps at any batch
    config, _ = resolve_defaults(budget, _shape(views, 3))
    assert config.train.steps_per_epoch == 0 and config.train.batch_size == 400  # epochs of one pass, as set
    assert config.train.epochs * math.ceil(1000 / 400) >= 400


def test_an_epoch_is_the_same_work_whether_the_epochs_are_set_or_resolved():
    x, _ = clustered(300, 3, 5, seed=9)
    shape = _shape([x, x * 2.0], 3)
    resolved, chosen = resolve_defaults(ExperimentConfig(), shape)
    assert "train.steps_per_epoch" in ExperimentConfig().unresolved_fields()
    assert (resolved.train.epochs, resolved.train.steps_per_epoch) == (40, 10)  # one batch: 10 steps an epoch
    assert chosen["train.steps_per_epoch"]["rule"] == "fewest steps"
    set_epochs = apply_overrides(ExperimentConfig(), ["train.epochs=5"])
    config, chosen = resolve_defaults(set_epochs, shape)
    assert (config.train.epochs, config.train.steps_per_epoch) == (5, 10) and "train.epochs" not in chosen
    # copying the printed choices back in trains the same steps
    copied = apply_overrides(ExperimentConfig(), [f"train.epochs={resolved.train.epochs}"])
    again = resolve_defaults(copied, shape)[0].train
    assert again.epochs * again.steps_per_epoch == resolved.train.epochs * resolved.train.steps_per_epoch == 400
    one_pass = apply_overrides(set_epochs, ["train.steps_per_epoch=0"])  # 0: one pass, as in ExperimentConfig()
    assert resolve_defaults(one_pass, shape)[0].train.steps_per_epoch == 0


def rows_as(config: ExperimentConfig, rows: str) -> ExperimentConfig:
    return dataclasses.replace(config, model=dataclasses.replace(config.model, output_rows=rows))


def as_resolved(config: ExperimentConfig, rows: str) -> ExperimentConfig:
    """``config`` with its auto embedding rows and Siamese positives resolved (own: the paper's)."""
    return dataclasses.replace(rows_as(config, rows), siamese=dataclasses.replace(config.siamese, positives="own"))


def test_embedding_rows_go_to_unit_norm_where_views_are_missing_unless_set():
    x, _ = clustered(300, 3, 5, seed=13)
    complete = [x, x[:, ::-1] * 2.0]
    incomplete = _shape(with_missing_views(complete, 0.3, seed=14), 3)
    config = apply_overrides(FIXED, ["graph.n_neighbors=10", "train.missing_view_batch_growth=1"])
    assert config.model.output_rows == "auto" and "model.output_rows" in config.unresolved_fields()
    resolved, chosen = resolve_defaults(config, incomplete)
    assert resolved.model.output_rows == "unit" and "views are missing" in chosen["model.output_rows"]["why"]
    resolved, chosen = resolve_defaults(config, _shape(complete, 3))
    assert resolved.model.output_rows == "raw" and chosen == {}
    assert resolved.unresolved_fields() == []
    # a sample of no rows (views=None) reads the flag its caller measured on every training row
    told = DataShape(views=None, n_clusters=3, n_train=300, views_missing=True)
    assert resolve_defaults(config, told)[0].model.output_rows == "unit"
    for explicit in ("raw", "unit"):
        kept = rows_as(config, explicit)
        assert resolve_defaults(kept, incomplete)[0].model.output_rows == explicit


def test_siamese_positives_are_joint_where_all_views_together_split_the_samples_clearly_more_cleanly():
    x, _ = clustered(600, 3, 5, seed=21)
    noise = np.random.default_rng(22).standard_normal((600, 50)).astype(np.float32)  # a view of no use
    assert ExperimentConfig().siamese.positives == "own"  # the rule is opt-in
    config = apply_overrides(
        FIXED, ["graph.n_neighbors=10", "train.missing_view_batch_growth=1", "siamese.positives=auto"]
    )
    assert not config.siamese.enabled
    weak = _shape(with_missing_views([noise, x], 0.5, seed=23), 3)
    joint, own = joint_split_scores(weak.views, 3, 600, 10)
    assert joint_is_clearly_cleaner(joint, own)
    resolved, chosen = resolve_defaults(config, weak)
    assert (resolved.siamese.positives, resolved.siamese.enabled) == ("joint", True)
    assert "clearly more cleanly" in chosen["siamese.positives"]["why"] and chosen["siamese.enabled"]["value"] is True
    # views that agree: each keeps its own neighbours, and the nets stay as configured
    alike = _shape(with_missing_views([x, x[:, ::-1] * 2.0], 0.5, seed=23), 3)
    resolved, chosen = resolve_defaults(config, alike)
    assert (resolved.siamese.positives, resolved.siamese.enabled) == ("own", False)
    assert "do not split" in chosen["siamese.positives"]["why"]
    # complete data: own, unrecorded; explicit values stay on incomplete data
    resolved, chosen = resolve_defaults(config, _shape([noise, x], 3))
    assert resolved.siamese.positives == "own" and "siamese.positives" not in chosen
    for explicit in ("own", "joint"):
        kept = apply_overrides(config, [f"siamese.positives={explicit}"])
        resolved, chosen = resolve_defaults(kept, weak)
        assert resolved.siamese == kept.siamese and "siamese.enabled" not in chosen


def test_joint_positives_need_enough_samples_with_every_view():
    x, _ = clustered(60, 3, 5, seed=24)
    noise = np.random.default_rng(25).standard_normal((60, 50)).astype(np.float32)
    views = with_missing_views([noise, x], 0.9, seed=26)  # few complete samples: fewer than l + 1 per cluster
    assert joint_split_scores(views, 3, 60, 5) == (-math.inf, -math.inf)
    config = apply_overrides(
        FIXED, ["graph.n_neighbors=5", "train.missing_view_batch_growth=1", "siamese.positives=auto"]
    )
    resolved, chosen = resolve_defaults(config, _shape(views, 3))
    assert resolved.siamese.positives == "own" and not resolved.siamese.enabled


# --- end to end ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_fit():
    """A default estimator (every data-aware rule) fitted for two epochs on a sparse and a dense
    view, and its views: fitted once for the tests below."""
    views = [sparse_counts(150, 300, seed=9, density=0.06), clustered(150, 3, 10, seed=9)[0]]  # 18-term rows
    return SpecRaGE(n_clusters=3, random_state=0, config_overrides=["train.epochs=2"]).fit(views), views


def test_default_estimator_records_its_choices_and_embeds_unit_rows(default_fit):
    est, views = default_fit
    assert est.config_.unresolved_fields() == []
    assert est.resolved_defaults_["data.preprocess"]["value"] == ["svd_l2", "standard_l2"]
    assert est.config_.data.graph_inputs == "unreduced"
    embedding = est.transform(views)
    np.testing.assert_allclose(np.linalg.norm(embedding, axis=1), 1.0, rtol=1e-5)


def test_pickled_and_saved_default_estimators_transform_alike(default_fit, tmp_path):
    import pickle

    est, views = default_fit
    expected = est.transform(views)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).transform(views), expected)
    est.save(tmp_path / "model")
    loaded = SpecRaGE.load(tmp_path / "model")
    np.testing.assert_array_equal(loaded.transform(views), expected)
    assert loaded.resolved_defaults_ == est.resolved_defaults_


@pytest.mark.slow  # a default fit of a real dataset: ~60 s; the default_fit checks above run the same rules
@pytest.mark.skipif(not (DEVSUITE / "WebKB.mat").is_file(), reason="needs ../shared/datasets/devsuite/WebKB.mat")
def test_defaults_cluster_webkb_above_its_naive_baseline():
    """WebKB (203 web pages, 3 views, classes of 9 to 107): the old fixed defaults put 200 of the
    203 rows in one cluster (ACC = the majority class, 0.527); the best naive baseline is 0.677."""
    data = load_mat(DEVSUITE / "WebKB.mat")
    embedding = SpecRaGE(n_clusters=4, n_components=4, random_state=0).fit_transform(list(data.views))
    predicted = KMeans(n_clusters=4, n_init=10, random_state=0).fit_predict(embedding)
    assert clustering_accuracy(data.labels, predicted) >= 0.677
    assert np.bincount(predicted, minlength=4).max() < 0.8 * len(predicted)  # no collapse


def test_cli_resolves_prints_and_records_the_defaults_of_a_file_dataset(tmp_path, capsys):
    from specrage_jax.api.pipeline import load_pipeline
    from specrage_jax.cli import main

    x, labels = clustered(180, 3, 6, seed=11)
    path = tmp_path / "mine.npz"
    np.savez(path, view_0=x, view_1=sparse_counts(180, 120, seed=11), labels=labels)
    out = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--dataset",
                f"file:{path}",
                "--out",
                str(out),
                "--quiet",
                "--no-figure",
                "--set",
                "train.epochs=2",
                "--set",
                "checkpoint.every_epochs=0",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "settings chosen from the data" in printed and "graph.n_neighbors = " in printed
    line = next(line for line in printed.splitlines() if line.startswith("  graph.n_neighbors = "))
    assert any(f"({rule}: " in line for rule in ("clear gap", "sustained gap", "agreeing views", "dense"))
    metrics = json.loads((out / "metrics.json").read_text())
    resolved = metrics["resolved_defaults"]
    assert resolved["data.preprocess"]["value"] == ["standard_l2", "svd_l2"]
    assert (
        "view 1: 120 features" in resolved["data.preprocess"]["why"]
        and "wider than 100: svd_l2" in resolved["data.preprocess"]["why"]
    )
    assert resolved["graph.n_neighbors"]["rule"] in line and resolved["model.n_components"]["rule"]
    assert metrics["config"]["graph"]["n_neighbors"] == resolved["graph.n_neighbors"]["value"] > 0
    assert metrics["config"]["train"]["epochs"] == 2 and "train.epochs" not in resolved  # explicit wins
    pipeline = load_pipeline(out)
    assert pipeline.scalers[0].components is None and pipeline.scalers[1].components is not None
    y = SpecRaGE.load(out).transform([x, sparse_counts(180, 120, seed=11)])
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("value", [1.5, -0.5, float("nan")])
def test_view_dropout_outside_its_range_is_refused(value):
    with pytest.raises(ValueError, match="graph.view_dropout"):
        GraphConfig(view_dropout=value)
