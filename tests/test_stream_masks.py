"""Missing views in the memmap format: the writer's mask.npy, the reader's NaN rows, and the
streamed training, pre-training and embedding equal to the same data in memory."""

from __future__ import annotations

import json
import textwrap
import zlib
from pathlib import Path

import jax
import numpy as np
import pytest

from specrage_jax.config import (
    AutoencoderConfig,
    ExperimentConfig,
    OrthoConfig,
    SiameseConfig,
)
from specrage_jax.data.lazy import MemmapRows, streamed_mask
from specrage_jax.data.stream import LABELS_FILE, MASK_FILE, META_FILE, open_views_memmap, view_file, write_views_memmap
from specrage_jax.data.stream_batches import map_views_in_chunks
from specrage_jax.data.stream_cache import files_crc32
from specrage_jax.nets.embed import embed
from specrage_jax.nets.state import create_state
from specrage_jax.training.autoencoder import train_autoencoder
from specrage_jax.training.batches import take_batch
from specrage_jax.training.initial_state import train_model
from specrage_jax.training.siamese import train_siamese
from specrage_jax.training.stages import encode_views, train_view_nets
from tests.fixed_sections import fixed_experiment, fixed_graph, fixed_model, fixed_train
from tests.simulated_devices import run_child_result
from tests.test_streaming import SMALL  # the small whole-pipeline configuration

DIMS = (6, 4)
MODEL = fixed_model(n_components=3, view_hidden=(16, 16), weighting_hidden=(8,))
GRAPH = fixed_graph(n_neighbors=5)


def views_with_holes(n: int, seed: int = 0, fraction: float = 0.3) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Two views (n, 6), (n, 4) of 3 classes where ``fraction`` of the samples lack one random
    view (all-NaN rows), and labels (n,)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    views = tuple((rng.standard_normal((n, d)) + 3.0 * np.eye(3, d)[labels]).astype(np.float32) for d in DIMS)
    for row in np.flatnonzero(rng.random(n) < fraction):
        views[int(rng.integers(0, 2))][row] = np.nan
    return views, labels


def in_chunks(views, labels=None, size: int = 16):
    for s in range(0, views[0].shape[0], size):
        part = tuple(v[s : s + size] for v in views)
        yield part if labels is None else (part, labels[s : s + size])


def streamed(folder: Path) -> tuple[MemmapRows, ...]:
    source = open_views_memmap(folder)
    return tuple(MemmapRows.all_rows(source, v) for v in range(len(source.views)))


# --- the format ---------------------------------------------------------------------------------


def test_round_trip_keeps_missing_views_as_nan_rows(tmp_path) -> None:
    views, labels = views_with_holes(100)
    present = np.stack([~np.isnan(v).all(axis=1) for v in views], axis=1)
    meta = write_views_memmap(tmp_path, in_chunks(views, labels), 100, DIMS, with_labels=True)
    assert meta["mask"] is True and len(meta["crc32"]) == 4  # views, labels, mask
    assert np.array_equal(np.load(tmp_path / MASK_FILE), present)
    data = open_views_memmap(tmp_path)
    np.testing.assert_array_equal(data.mask, present)
    assert files_crc32(data) == meta["crc32"]
    for v, (stored, original) in enumerate(zip(data.views, views)):
        np.testing.assert_array_equal(stored[~present[:, v]], 0.0)  # zeros on disk
        np.testing.assert_array_equal(stored[present[:, v]], original[present[:, v]])
    idx = np.array([0, 3, 3, 50, 99, 17])
    for v, rows in enumerate(data.rows(idx)):
        np.testing.assert_array_equal(rows, views[v][idx])  # NaN rows back (equal_nan)
        np.testing.assert_array_equal(data.view_rows(v, idx), views[v][idx])
    np.testing.assert_array_equal(data.labels, labels)


def test_float16_storage_with_missing_views(tmp_path) -> None:
    views, _ = views_with_holes(40)
    write_views_memmap(tmp_path, in_chunks(views), 40, DIMS, dtype="float16")
    data = open_views_memmap(tmp_path)
    rows = data.rows(slice(None))
    for got, original in zip(rows, views):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(np.isnan(got), np.isnan(original))
        np.testing.assert_allclose(got, original, rtol=1e-3, atol=1e-3)


def test_complete_data_writes_the_format_without_masks(tmp_path) -> None:
    views, labels = views_with_holes(50, fraction=0.0)
    holes, _ = views_with_holes(50)
    write_views_memmap(tmp_path, in_chunks(holes, labels), 50, DIMS, with_labels=True)
    assert (tmp_path / MASK_FILE).is_file()
    meta = write_views_memmap(tmp_path, in_chunks(views, labels), 50, DIMS, with_labels=True)  # same folder
    assert sorted(p.name for p in tmp_path.iterdir()) == [LABELS_FILE, META_FILE, view_file(0), view_file(1)]
    expected = [zlib.crc32(v.tobytes()) for v in views] + [zlib.crc32(labels.astype(np.int64).tobytes())]
    assert meta["crc32"] == [f"{c:08x}" for c in expected] and meta["mask"] is False and meta["version"] == 1
    for v, original in enumerate(views):
        np.testing.assert_array_equal(np.load(tmp_path / view_file(v)), original)
    data = open_views_memmap(tmp_path)
    assert data.mask is None and files_crc32(data) == meta["crc32"]
    assert streamed_mask([MemmapRows.all_rows(data, v) for v in range(2)], what="x") is None
    older = {k: val for k, val in meta.items() if k != "mask"}  # a directory written before masks
    (tmp_path / META_FILE).write_text(json.dumps(older))
    assert open_views_memmap(tmp_path).mask is None


@pytest.mark.parametrize(
    ("view", "row", "value", "match"),
    [
        (0, 21, "partial", r"chunk 1: view 0 holds 1 NaN or infinite values \(first bad rows: \[5\]\)"),
        (1, 40, "inf", r"chunk 2: view 1 holds \d+ NaN or infinite values \(first bad rows: \[8\]\)"),
        (None, 35, "every", r"chunk 2: sample 3 has every view missing"),
    ],
)
def test_bad_rows_are_refused_naming_chunk_view_and_row(tmp_path, view, row, value, match) -> None:
    views, _ = views_with_holes(64, fraction=0.0)
    if value == "partial":
        views[view][row, 2] = np.nan
    elif value == "inf":
        views[view][row] = np.inf
    else:
        views[0][row] = views[1][row] = np.nan
    with pytest.raises(ValueError, match=match):
        write_views_memmap(tmp_path, in_chunks(views), 64, DIMS)
    assert not any(tmp_path.iterdir())  # the partial files, mask included, are removed


def test_row_sources_read_their_mask_without_the_views(tmp_path, monkeypatch) -> None:
    views, _ = views_with_holes(80)
    write_views_memmap(tmp_path, in_chunks(views), 80, DIMS)
    rows = streamed(tmp_path)
    present = np.stack([~np.isnan(v).all(axis=1) for v in views], axis=1)
    split = np.flatnonzero(np.arange(80) % 3 == 0)
    subset = tuple(r.take(split) for r in rows)
    monkeypatch.setattr(MemmapRows, "gather", lambda self, file_rows: pytest.fail("view data read"))
    np.testing.assert_array_equal(subset[1].present(), present[split, 1])
    np.testing.assert_array_equal(streamed_mask(subset, what="x"), present[split])
    complete = np.flatnonzero(present.all(axis=1))[:10]
    assert streamed_mask(tuple(r.take(complete) for r in rows), what="x") is None


def test_map_views_in_chunks_keeps_the_mask(tmp_path) -> None:
    views, labels = views_with_holes(50)
    write_views_memmap(tmp_path / "raw", in_chunks(views, labels), 50, DIMS, with_labels=True)
    data = open_views_memmap(tmp_path / "raw")
    weights = [np.ones((6, 2), np.float32), np.full((4, 3), 2.0, np.float32)]
    fns = [lambda x: x @ weights[0], lambda x: np.nan_to_num(x) @ weights[1]]  # the second maps NaN to 0
    meta = map_views_in_chunks(fns, data, tmp_path / "codes", chunk_rows=16)
    codes = open_views_memmap(tmp_path / "codes")
    assert meta["mask"] is True
    np.testing.assert_array_equal(codes.mask, data.mask)
    for v, (got, w) in enumerate(zip(codes.rows(slice(None)), weights)):
        np.testing.assert_allclose(got, views[v] @ w, rtol=1e-6)  # NaN rows where the input's are


# --- training, pre-training and inference --------------------------------------------------------


def test_streamed_batches_zero_the_missing_rows(tmp_path) -> None:
    views, _ = views_with_holes(60)
    write_views_memmap(tmp_path, in_chunks(views), 60, DIMS)
    rows = streamed(tmp_path)
    mask = streamed_mask(rows, what="x")
    assert mask is not None
    idx = np.array([7, 1, 30, 2, 59, 44])
    batch = take_batch(rows, None, idx, mask=mask)
    filled = tuple(np.where(mask[:, v, None], x, np.float32(0)) for v, x in enumerate(views))
    in_memory = take_batch(filled, None, idx, mask=mask)
    for got, expected in zip(batch.views, in_memory.views):
        assert np.isfinite(np.asarray(got)).all()
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    np.testing.assert_array_equal(np.asarray(batch.mask), mask[idx])


def small_config(**stages) -> ExperimentConfig:
    return fixed_experiment(
        model=MODEL,
        graph=GRAPH,
        train=fixed_train(epochs=2, batch_size=64, progress=False),
        **stages,
    )


def test_fit_on_streamed_views_with_missing_views_equals_fit_in_memory(tmp_path) -> None:
    """The global scales (present rows), every training and validation batch (missing rows zeroed,
    their mask) and so the trained state and losses: bitwise those of the same NaN rows in memory."""
    views, _ = views_with_holes(200, seed=1)
    write_views_memmap(tmp_path, in_chunks(views), 200, DIMS)
    rows = streamed(tmp_path)
    train, val = np.arange(150), np.arange(150, 200)
    config = small_config()
    a, history_a = train_model([v[train] for v in views], [v[val] for v in views], config, seed=3)
    b, history_b = train_model([r.take(train) for r in rows], [r.take(val) for r in rows], config, seed=3)
    np.testing.assert_array_equal(b.view_scales, a.view_scales)
    for x, y in zip(jax.tree.leaves(b), jax.tree.leaves(a)):  # params, R^-1, Adam: bitwise
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert [(r.train_loss, r.val_loss) for r in history_b.epochs] == [
        (r.train_loss, r.val_loss) for r in history_a.epochs
    ]
    assert all(np.isfinite([r.train_loss, r.val_loss]).all() for r in history_b.epochs)


@pytest.mark.slow
def test_streamed_run_with_missing_views_equals_the_in_memory_run(tmp_path) -> None:
    """memmap:DIR with missing views through the whole run (autoencoders, Siamese nets, SpecRaGE,
    evaluation): streamed equals in memory bitwise (~20 s)."""
    from specrage_jax.data import load_dataset, open_streamed_dataset
    from specrage_jax.overrides import apply_overrides
    from specrage_jax.presets import preset
    from specrage_jax.runs.experiment import train_and_evaluate
    from specrage_jax.runs.prepare import with_n_components

    views, labels = views_with_holes(900, seed=5)
    write_views_memmap(tmp_path, in_chunks(views, labels, 128), 900, with_labels=True)
    name = f"memmap:{tmp_path}"
    in_ram = load_dataset(name)
    config = with_n_components(apply_overrides(preset(name), SMALL), in_ram.n_classes)
    a = train_and_evaluate(in_ram, config, seed=2)
    data = open_streamed_dataset(name)
    b = train_and_evaluate(data, config, seed=2)
    assert isinstance(b.pretrained.nets.autoencoders, tuple) and isinstance(data.views[0], MemmapRows)
    np.testing.assert_array_equal(b.evaluation.y_test, a.evaluation.y_test)
    np.testing.assert_array_equal(b.evaluation.alpha_test, a.evaluation.alpha_test)
    for key in ("train_loss", "val_loss", "view_weights"):
        assert [e[key] for e in b.result["training"]["epochs"]] == [e[key] for e in a.result["training"]["epochs"]]
    assert b.result["test"]["kmeans"] == a.result["test"]["kmeans"]
    data.close()


def test_embed_streamed_with_missing_views_equals_embed(tmp_path) -> None:
    views, _ = views_with_holes(70, seed=2)
    write_views_memmap(tmp_path, in_chunks(views), 70, DIMS)
    state = create_state(DIMS, MODEL, GRAPH, OrthoConfig(), learning_rate=1e-3, seed=0, view_scales=(1.0, 1.0))
    y_mem, alpha_mem = embed(state, views, batch_size=32)
    y_disk, alpha_disk = embed(state, streamed(tmp_path), batch_size=32)
    np.testing.assert_array_equal(y_disk, y_mem)
    np.testing.assert_array_equal(alpha_disk, alpha_mem)
    missing = np.isnan(views[1]).all(axis=1)
    assert missing.any() and np.all(alpha_disk[missing, 1] == 0.0)


def test_pretraining_on_streamed_views_uses_present_rows(tmp_path, monkeypatch) -> None:
    """Autoencoders and Siamese nets train on the rows that have their view, and encode only
    those: the same nets and codes (NaN rows where the view is missing) as in memory."""
    views, _ = views_with_holes(160, seed=4)
    write_views_memmap(tmp_path, in_chunks(views), 160, DIMS)
    rows = streamed(tmp_path)
    config = small_config(
        autoencoder=AutoencoderConfig(enabled=True, hidden=(16,), embedding_dim=4, epochs=2, batch_size=32),
        siamese=SiameseConfig(enabled=True, hidden=(16,), out_dim=4, epochs=1, batch_size=64, pair_block=256),
    )
    for trainer, stage in ((train_autoencoder, config.autoencoder), (train_siamese, config.siamese)):
        nets_mem = train_view_nets(trainer, views, stage, config, seed=0)
        read: list[np.ndarray] = []
        original = MemmapRows.gather

        def recording(self, file_rows, original=original, read=read):
            read.append(self.source.present(self.view, file_rows))
            return original(self, file_rows)

        monkeypatch.setattr(MemmapRows, "gather", recording)
        nets_disk = train_view_nets(trainer, rows, stage, config, seed=0)
        codes_disk = encode_views(nets_disk, rows)
        monkeypatch.setattr(MemmapRows, "gather", original)
        assert read and all(r.all() for r in read)  # no row of a missing view is read
        for a, b in zip(nets_mem, nets_disk):
            assert a.losses == b.losses
        for got, expected in zip(codes_disk, encode_views(nets_mem, views)):
            np.testing.assert_array_equal(got, expected)


# --- over a mesh ------------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from pathlib import Path
    from specrage_jax.data.lazy import MemmapRows, streamed_mask
    from specrage_jax.data.stream import open_views_memmap
    from specrage_jax.training import sharding as sh
    from specrage_jax.training.batches import take_batch

    assert jax.device_count() == 2, jax.devices()
    mesh = sh.make_data_mesh(2)
    source = open_views_memmap(Path(sys.argv[1]))
    rows = tuple(MemmapRows.all_rows(source, v) for v in range(2))
    mask = streamed_mask(rows, what="x")
    idx = np.arange(0, 64, 2)
    sharded = take_batch(rows, None, idx, mesh, mask)
    single = take_batch(rows, None, idx, None, mask)
    print("RESULT " + json.dumps({
        "equal": all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(sharded.views, single.views)),
        "finite": all(bool(np.isfinite(np.asarray(a)).all()) for a in sharded.views),
        "mask_equal": bool(np.array_equal(np.asarray(sharded.mask), mask[idx])),
        "sharded": sh.is_batch_sharded_on(sharded.views[0], mesh) and sh.is_batch_sharded_on(sharded.mask, mesh),
    }))
""")


def test_streamed_masked_batch_over_a_mesh(tmp_path) -> None:
    """A batch of streamed rows with missing views, sharded over 2 simulated devices: its rows
    (missing ones zeroed) and mask split with the rows, equal to the one-device batch."""
    views, _ = views_with_holes(64)
    write_views_memmap(tmp_path, in_chunks(views), 64, DIMS)
    result = run_child_result(CHILD, str(tmp_path), devices=2, timeout=120)
    assert result == {"equal": True, "finite": True, "mask_equal": True, "sharded": True}
