"""Data-parallel training over devices with ``jax.sharding``: one mesh axis ``'data'``, the
batch's sample axis sharded over it, everything else (parameters, R^-1, Adam state) replicated.

The jitted steps of :mod:`specrage_jax.training.steps` run unchanged on such inputs: ``jax.jit`` follows
the input shardings and, with the mesh axis of type ``Auto``, the compiler inserts the
collectives that keep the program's global meaning. So the in-batch m x m kNN affinity is
still built over the whole global batch of m samples (not per device), the QR of the ortho
batch sees all m rows, and Eq. 4 is normalized by the global m: a step on d devices equals
the single-device step up to float32 summation order (``tests/test_sharding.py`` checks loss,
parameters and R^-1 to 1e-5). Under ``Explicit`` axis types (the ``jax.make_mesh`` default)
the in-batch pairwise term fails with a ``ShardingTypeError``, hence ``AxisType.Auto`` here.

Several processes: join them first (:mod:`specrage_jax.training.distributed`); ``make_data_mesh()``
then spans ``jax.devices()`` (all processes), and ``shard_batch`` takes each process's local share
of the global batch (``jax.make_array_from_process_local_data``). ``train_loop`` over such a mesh is
tested with 2 processes x 1 and x 2 CPU devices (``tests/test_distributed.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import chex
import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"
Tree = TypeVar("Tree")
BatchTree = TypeVar("BatchTree")  # a steps.Batch or any pytree of (m, ...) arrays


def make_data_mesh(n_devices: int | None = None) -> Mesh:
    """A 1-D mesh (axis ``'data'``, type Auto) over the first ``n_devices`` of ``jax.devices()``.

    ``None`` takes every device (in a multi-host run, every process's devices).

    Raises:
      ValueError: if ``n_devices`` is below 1 or above the number of available devices.
    """
    available = jax.devices()
    n = len(available) if n_devices is None else int(n_devices)
    if not 1 <= n <= len(available):
        raise ValueError(
            f"n_devices={n_devices} is not possible: this process sees {len(available)} "
            f"{available[0].platform} device(s); use 1..{len(available)} (or None for all). For more CPU "
            f"devices set XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts"
        )
    return jax.make_mesh((n,), (DATA_AXIS,), axis_types=(AxisType.Auto,), devices=available[:n])


def replicated_sharding(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array: NamedSharding(mesh, P())."""
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """The leading (sample) axis split over ``'data'``, the others whole: NamedSharding(mesh, P('data'))."""
    return NamedSharding(mesh, P(DATA_AXIS))


def replicate(tree: Tree, mesh: Mesh) -> Tree:
    """``tree`` (a SpecRaGEState, or any pytree of arrays) with every leaf replicated on ``mesh``.

    Static fields (graphdef, configs) are untouched; the result is a new pytree of committed
    arrays, so the original may still be donated or reused.
    """
    return jax.device_put(tree, replicated_sharding(mesh))


def check_batch_divisible(batch_size: int, mesh: Mesh) -> None:
    """ValueError unless the global batch size is a multiple of the mesh's device count."""
    n_devices = mesh.devices.size
    if batch_size % n_devices:
        lower = batch_size - batch_size % n_devices
        raise ValueError(
            f"batch size {batch_size} is not divisible by the {n_devices} devices of the 'data' mesh: "
            f"every device must hold the same number of samples; use a batch size that is a multiple "
            f"of {n_devices} (e.g. {lower or n_devices}) or another device count"
        )


def round_batch_to_devices(batch_size: int, mesh: Mesh) -> int:
    """The largest multiple of the mesh's device count that is <= batch_size (for a loop whose
    m = min(batch_size, n_train) may not divide); ValueError if that is 0."""
    n_devices = mesh.devices.size
    rounded = batch_size - batch_size % n_devices
    if rounded < 1:
        raise ValueError(f"batch size {batch_size} is smaller than the {n_devices} devices of the 'data' mesh")
    return rounded


def _batch_rows(batch: Any) -> int:
    leaves = jax.tree.leaves(batch)
    if not leaves:
        raise ValueError("shard_batch: the batch holds no arrays")
    rows = {np.shape(x)[0] for x in leaves}
    if len(rows) != 1:
        raise ValueError(f"shard_batch: every array of a batch must have the same number of rows, got {sorted(rows)}")
    return rows.pop()


def shard_batch(batch: BatchTree, mesh: Mesh) -> BatchTree:
    """``batch`` (a ``steps.Batch``, or any pytree of NumPy/JAX arrays (m, ...) with the same m,
    e.g. a pair of view tuples) with its sample axis sharded over ``'data'``.

    Single process: ``batch`` is the global batch; each device receives its m / d rows
    directly from host memory. Multi-process: ``batch`` is this process's share, and the
    global batch is the concatenation over processes in process order.

    Raises:
      ValueError: naming the batch size and device count when the devices do not divide m.
    """
    rows = _batch_rows(batch)
    sharding = batch_sharding(mesh)
    if jax.process_count() == 1:
        check_batch_divisible(rows, mesh)
        return jax.device_put(batch, sharding)
    check_batch_divisible(rows * jax.process_count(), mesh)
    return jax.tree.map(partial(jax.make_array_from_process_local_data, sharding), batch)


def data_parallel(step: Callable[..., Any], mesh: Mesh) -> Callable[..., Any]:
    """``step`` (a jitted state -> (state, ...) function of :mod:`specrage_jax.training.steps`) with every
    output pinned to replicated on ``mesh`` and the state (argument 0) donated.

    The plain steps already run on a replicated state and a sharded batch; this wrapper only
    fixes the out-sharding so that the returned state always has exactly the input state's
    (replicated) sharding, whatever the compiler would have chosen, so the donated buffers are
    reused and the next call does not recompile. Use it where that matters (long loops).
    """
    return jax.jit(step, out_shardings=replicated_sharding(mesh), donate_argnums=0)


def is_replicated_on(x: jax.Array, mesh: Mesh) -> bool:
    """Whether ``x`` is an array held whole by every device of ``mesh``."""
    sharding = getattr(x, "sharding", None)
    return sharding is not None and sharding.is_fully_replicated and set(sharding.device_set) == set(mesh.devices.flat)


def is_batch_sharded_on(x: jax.Array, mesh: Mesh) -> bool:
    """Whether ``x``'s rows are split evenly over the ``'data'`` axis of ``mesh`` (one block each)."""
    sharding = getattr(x, "sharding", None)
    if sharding is None or set(sharding.device_set) != set(mesh.devices.flat):
        return False
    n = mesh.devices.size
    expected = (x.shape[0] // n, *x.shape[1:])
    return sharding.is_equivalent_to(batch_sharding(mesh), x.ndim) and all(
        s.data.shape == expected for s in x.addressable_shards
    )


def assert_state_replicated(state: Any, mesh: Mesh) -> None:
    """chex-style check for the boundary of a sharded loop: every array leaf replicated on ``mesh``."""
    bad = [
        jax.tree_util.keystr(path)
        for path, leaf in jax.tree_util.tree_leaves_with_path(state)
        if not is_replicated_on(leaf, mesh)
    ]
    chex.assert_equal(bad, [])
