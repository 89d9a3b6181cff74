"""Tests for specrage_jax.data.stream: chunked memmap datasets, random batches, prefetching.

Peak memory against n is measured by experiments/bench_scaling.py, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from specrage_jax.data.mnist import infinitemnist_chunks
from specrage_jax.data.stream import META_FILE, open_views_memmap, view_file, write_views_memmap
from specrage_jax.data.stream_batches import (
    map_views_in_chunks,
    memmap_batches,
    prefetch_to_device,
    random_batch_indices,
)

DIMS = (7, 3)


def random_views(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, d)).astype(np.float32) for d in DIMS)


def in_chunks(views, labels=None, size: int = 13):
    n = views[0].shape[0]
    for s in range(0, n, size):
        part = tuple(v[s : s + size] for v in views)
        yield part if labels is None else (part, labels[s : s + size])


def test_round_trip_float32_is_exact(tmp_path) -> None:
    views = random_views(100)
    labels = np.arange(100) % 4
    meta = write_views_memmap(tmp_path, in_chunks(views, labels), 100, DIMS, with_labels=True)
    assert meta["view_dims"] == list(DIMS) and meta["max_abs_error"] == [0.0, 0.0]
    data = open_views_memmap(tmp_path)
    assert data.n == 100 and data.view_dims == DIMS
    for stored, original in zip(data.views, views):
        np.testing.assert_array_equal(stored, original)
        assert not stored.flags.writeable
    np.testing.assert_array_equal(data.labels, labels)
    idx = np.array([3, 50, 99])
    for rows, original in zip(data.rows(idx), views):
        assert rows.dtype == np.float32
        np.testing.assert_array_equal(rows, original[idx])
    data.release_pages()  # harmless; the data read back afterwards are unchanged
    np.testing.assert_array_equal(data.views[0][idx], views[0][idx])


@pytest.mark.parametrize(
    "idx",
    [
        np.array([5, 6, 7, 8, 40, 41, 99]),  # runs of consecutive rows (one read each) and singles
        np.array([99, 3, 3, 50, 0]),  # unsorted, with a repeat
        np.arange(100),  # one read of the whole file
        np.array([], dtype=np.int64),
    ],
)
def test_rows_reads_exactly_the_indexed_rows(tmp_path, idx) -> None:
    views = random_views(100)
    write_views_memmap(tmp_path, in_chunks(views), 100, DIMS)
    with open_views_memmap(tmp_path) as data:
        for rows, original in zip(data.rows(idx), views):
            assert rows.shape == (idx.size, original.shape[1]) and rows.dtype == np.float32
            np.testing.assert_array_equal(rows, original[idx])
        for rows, original in zip(data.rows(slice(10, 30)), views):
            np.testing.assert_array_equal(rows, original[10:30])


def test_rows_checks_the_indices(tmp_path) -> None:
    write_views_memmap(tmp_path, in_chunks(random_views(20)), 20, DIMS)
    data = open_views_memmap(tmp_path)
    with pytest.raises(IndexError, match=r"0\.\.19"):
        data.rows(np.array([3, 20]))
    with pytest.raises(IndexError):
        data.rows(np.array([-1]))
    with pytest.raises(ValueError, match="1-D"):
        data.rows(np.zeros((2, 2), np.int64))


def test_float16_storage_records_its_rounding_error(tmp_path) -> None:
    views = random_views(50)
    meta = write_views_memmap(tmp_path, in_chunks(views), 50, dtype="float16")
    data = open_views_memmap(tmp_path)
    assert data.views[0].dtype == np.float16 and meta["view_dims"] == list(DIMS)
    for v, (stored, original) in enumerate(zip(data.rows(slice(None)), views)):
        error = float(np.max(np.abs(stored - original)))
        assert error == pytest.approx(meta["max_abs_error"][v], rel=1e-6)
        assert error <= 2.0**-11 * float(np.max(np.abs(original)))


def test_infinitemnist_chunks_write_directly(tmp_path) -> None:
    rng = np.random.default_rng(0)
    images = rng.uniform(size=(40, 16)).astype(np.float32)
    labels = np.arange(40) % 4
    chunks = infinitemnist_chunks(images, labels, n_samples=25, chunk_size=10, seed=3)
    write_views_memmap(tmp_path, chunks, 25, (16, 16), with_labels=True)
    data = open_views_memmap(tmp_path)
    expected = list(infinitemnist_chunks(images, labels, n_samples=25, chunk_size=10, seed=3))
    np.testing.assert_array_equal(data.views[1], np.concatenate([c[0][1] for c in expected]))
    np.testing.assert_array_equal(data.labels, np.concatenate([c[1] for c in expected]))


@pytest.mark.parametrize(
    "bad_view, shape, match",
    [
        (1, (13, 4), r"chunk 1, view 1: expected rows of width 3"),
        (0, (13,), r"chunk 1, view 0: expected rows of width 7"),
        (1, (12, 3), r"chunk 1: the views have different row counts view 0: 13, view 1: 12"),
    ],
)
def test_mismatched_chunk_names_the_view(tmp_path, bad_view, shape, match) -> None:
    views = random_views(26)

    def chunks():
        yield tuple(v[:13] for v in views)
        part = [v[13:] for v in views]
        part[bad_view] = np.zeros(shape, np.float32)
        yield tuple(part)

    with pytest.raises(ValueError, match=match):
        write_views_memmap(tmp_path, chunks(), 26, DIMS)
    assert not (tmp_path / META_FILE).exists() and not (tmp_path / view_file(0)).exists()
    with pytest.raises(FileNotFoundError, match="meta.json"):
        open_views_memmap(tmp_path)


def test_wrong_totals_and_values_are_errors(tmp_path) -> None:
    views = random_views(30)
    with pytest.raises(ValueError, match="gave 30 rows, expected n=31"):
        write_views_memmap(tmp_path, in_chunks(views), 31, DIMS)
    with pytest.raises(ValueError, match="more than n=20"):
        write_views_memmap(tmp_path, in_chunks(views), 20, DIMS)
    bad = (views[0].copy(), views[1])
    bad[0][17, 2] = np.nan
    with pytest.raises(ValueError, match=r"chunk 1: view 0 holds 1 NaN or infinite values \(first bad rows: \[4\]\)"):
        write_views_memmap(tmp_path, in_chunks(bad), 30, DIMS)
    big = (views[0] * 1e6, views[1])
    with pytest.raises(ValueError, match="view 0: values beyond the float16 range"):
        write_views_memmap(tmp_path, in_chunks(big), 30, DIMS, dtype="float16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        write_views_memmap(tmp_path, in_chunks(views), 30, DIMS, dtype="uint8")


def test_open_checks_files_against_meta(tmp_path) -> None:
    write_views_memmap(tmp_path, in_chunks(random_views(20)), 20, DIMS)
    meta = json.loads((tmp_path / META_FILE).read_text())
    meta["view_dims"] = [7, 4]
    (tmp_path / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"view 1 .*expected \(20, 4\)"):
        open_views_memmap(tmp_path)


def test_random_batches_cover_every_sample_once_per_pass() -> None:
    batches = random_batch_indices(20, 5, np.random.default_rng(0))
    first_pass = np.concatenate([next(batches) for _ in range(4)])
    assert sorted(first_pass) == list(range(20))
    straddling = random_batch_indices(10, 4, np.random.default_rng(1), sort=False)
    seen = np.concatenate([next(straddling) for _ in range(5)])  # 2.0 passes
    assert np.bincount(seen, minlength=10).tolist() == [2] * 10
    assert all(np.all(np.diff(next(batches)) > 0) for _ in range(10))
    with pytest.raises(ValueError, match="batch_size must be in 1..n=10"):
        next(random_batch_indices(10, 11, np.random.default_rng(0)))


def test_memmap_batches_gather_the_drawn_rows(tmp_path) -> None:
    views = random_views(40)
    write_views_memmap(tmp_path, in_chunks(views), 40, DIMS)
    data = open_views_memmap(tmp_path)
    got = list(memmap_batches(data, 8, seed=5, n_batches=6))
    idx = random_batch_indices(40, 8, np.random.default_rng(5))
    assert len(got) == 6
    for batch in got:
        i = next(idx)
        for rows, original in zip(batch, views):
            np.testing.assert_array_equal(rows, original[i])


def test_map_views_in_chunks(tmp_path) -> None:
    views = random_views(50)
    labels = np.arange(50) % 3
    write_views_memmap(tmp_path / "raw", in_chunks(views, labels), 50, DIMS, with_labels=True)
    data = open_views_memmap(tmp_path / "raw")
    weights = [np.ones((7, 2), np.float32), np.full((3, 1), 2.0, np.float32)]
    meta = map_views_in_chunks(
        [lambda x: x @ weights[0], lambda x: x @ weights[1]], data, tmp_path / "codes", chunk_rows=16
    )
    codes = open_views_memmap(tmp_path / "codes")
    assert meta["view_dims"] == [2, 1]
    np.testing.assert_allclose(codes.views[0], views[0] @ weights[0], rtol=1e-6)
    np.testing.assert_allclose(codes.views[1], views[1] @ weights[1], rtol=1e-6)
    np.testing.assert_array_equal(codes.labels, labels)


def test_prefetch_yields_the_same_items_in_order() -> None:
    items = [(np.full((4, 2), i, np.float32), {"b": np.arange(3) + i}) for i in range(7)]
    got = list(prefetch_to_device(iter(items), size=2))
    assert len(got) == 7
    for (a, b), (x, y) in zip(items, got):
        assert isinstance(x, jax.Array) and isinstance(y["b"], jax.Array)
        np.testing.assert_array_equal(np.asarray(x), a)
        np.testing.assert_array_equal(np.asarray(y["b"]), b["b"])
    device = jax.devices()[0]
    placed = list(prefetch_to_device(iter(items[:2]), sharding=jax.sharding.SingleDeviceSharding(device)))
    assert placed[0][0].devices() == {device}
    doubled = list(
        prefetch_to_device(iter(items[:2]), sharding=lambda t: jax.tree.map(lambda a: jnp.asarray(a) * 2, t))
    )
    np.testing.assert_array_equal(np.asarray(doubled[1][0]), 2 * items[1][0])


def test_prefetch_runs_ahead_and_stops() -> None:
    produced = []

    def source():
        for i in range(100):
            produced.append(i)
            yield np.full((2,), i)

    stream = prefetch_to_device(source(), size=3)
    assert int(next(stream)[0]) == 0
    time.sleep(0.3)
    assert 3 <= len(produced) <= 6  # ran ahead by about `size` items, not to the end
    stream.close()
    time.sleep(0.2)
    assert not any(t.name == "prefetch_to_device" and t.is_alive() for t in threading.enumerate())


def test_prefetch_raises_the_source_error_in_order() -> None:
    def source():
        yield np.zeros(2)
        raise RuntimeError("broken source")

    stream = prefetch_to_device(source())
    next(stream)
    with pytest.raises(RuntimeError, match="broken source"):
        next(stream)
    with pytest.raises(ValueError, match="prefetch size"):
        next(prefetch_to_device(iter([]), size=0))


# --- experiments/bench_scaling.py, tiny configuration --------------------------------------------

BENCH = Path(__file__).resolve().parents[1] / "experiments" / "bench_scaling.py"
TINY = [
    "--sizes",
    "2000",
    "4000",
    "--fake-mnist",
    "--chunk-size",
    "1500",
    "--batch-size",
    "128",
    "--steps",
    "2",
    "--hidden",
    "32",
    "--k",
    "4",
    "--n-neighbors",
    "5",
    "--exact-timeout",
    "120",
]


def run_bench(tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        str(BENCH),
        *TINY,
        *extra,
        "--work-dir",
        str(tmp_path / "work"),
        "--json",
        str(out),
        "--compile-cache",
        str(tmp_path / "jax_cache"),
    ]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=BENCH.parents[1])
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "log-log slope of the SpecRaGE epoch time, n 2000->4000" in proc.stdout
    assert out.with_suffix(".png").is_file()
    return json.loads(out.read_text())


def check_sizes(results: dict, stages: tuple[str, ...]) -> None:
    assert set(results["sizes"]) == {"2000", "4000"}
    for n, r in results["sizes"].items():
        for stage in stages:
            assert r[stage]["status"] == "ok", (n, stage, r[stage])
            assert r[stage]["wall_s"] > 0 and r[stage]["peak_rss_mb"] > 0
        assert r["generate"]["seconds"] > 0 and r["generate"]["meta"]["n"] == int(n)
        s = r["specrage"]
        assert s["n"] == int(n) and s["steps"] == 2 and s["epoch_s"] > 0 and s["s_per_step"] > 0
        assert s["compile_s"] > 0 and s["rss_after_compile_mb"] > 0 and s["loss_finite"]
        e = r["exact"]
        assert e["total_s"] > 0 and len(e["eigenvalues"]) == 4 and abs(e["eigenvalues"][0]) < 1e-6
    summary = results["summary"]
    assert set(summary["epoch_time_slopes"]) == {"2000->4000"} and summary["epoch_time_slope_100k_1M"] is None
    assert set(summary["specrage_peak_rss_mb"]) == {"2000", "4000"}


@pytest.mark.slow  # a benchmark script end to end (~27 s); the streaming pieces have their own tests
def test_bench_scaling_tiny(tmp_path) -> None:
    results = run_bench(tmp_path)
    check_sizes(results, ("generate", "specrage", "exact"))
    assert "ae" not in results["sizes"]["2000"] and results["machine"]["cpu_count"] >= 1


@pytest.mark.slow
def test_bench_scaling_tiny_with_autoencoder_and_gather(tmp_path) -> None:
    results = run_bench(tmp_path, "--ae", "--ae-train-rows", "500", "--ae-epochs", "1", "--ae-hidden", "16", "--gather")
    check_sizes(results, ("generate", "ae", "gather", "specrage", "exact"))
    for r in results["sizes"].values():
        assert r["ae"]["train_s"] > 0 and r["ae"]["encode_s"] > 0 and r["ae"]["meta"]["view_dims"] == [10, 10]
        assert all(r["gather"][f"{c}/random_sorted_ms"] > 0 for c in ("warm", "cold"))


@pytest.mark.slow  # the on-device mode of the benchmark script (~21 s); device_epoch has its own tests
def test_bench_scaling_tiny_on_device(tmp_path) -> None:
    """--on-device: the training set on the device, --epochs compiled scans, timed one by one."""
    results = run_bench(tmp_path, "--on-device", "--epochs", "2", "--no-exact")
    for n, r in results["sizes"].items():
        s = r["specrage"]
        assert r["specrage"]["status"] == "ok" and "exact" not in r, (n, r)
        assert s["mode"] == "on_device" and s["epochs"] == 2 and len(s["epochs_s"]) == 2 and s["steps"] == 2
        assert s["epoch_s"] == s["epochs_s"][1] and abs(s["total_s"] - sum(s["epochs_s"])) < 1e-9
        assert s["transfer_s"] >= 0 and s["loss_finite"]


@pytest.mark.slow  # ~40 s: the streamed epoch by one process, then by a group of two
def test_bench_scaling_tiny_over_two_processes(tmp_path) -> None:
    """--processes 1 2: the same streamed epoch by one process and by two processes of one JAX group
    (each reading its half of every batch): both finish with finite losses, the group's first loss
    equals the single process's (the same global batch, the same step), and each process of the
    group reports its own epoch time and peak RSS."""
    results = run_bench(tmp_path, "--processes", "1", "2", "--no-exact")
    for n, r in results["sizes"].items():
        one, two = r["specrage"], r["specrage_2_processes"]
        assert one["status"] == "ok" and two["status"] == "ok", (n, r)
        assert two["processes"] == 2 and len(two["devices"]) == 2 and two["loss_finite"]
        assert abs(two["loss_first"] - one["loss_first"]) <= 1e-5 * abs(one["loss_first"])
        assert [p["status"] for p in two["per_process"]] == ["ok", "ok"]
        assert all(p["epoch_s"] > 0 and p["peak_rss_mb"] > 0 for p in two["per_process"])
