"""Training over several processes (hosts) with JAX's multi-controller runtime.

Every process runs the same program: ``jax.distributed.initialize`` joins them (on CPU with Gloo
collectives, on GPU/TPU with the platform's own), the ``'data'`` mesh spans every process's
devices, the state is replicated on it, and each process feeds only its own block of every
global batch (:func:`local_rows`); ``jax.make_array_from_process_local_data`` assembles the
global batch, so the in-batch graph, the QR and Eq. 4 are those of the whole global batch and a
step equals the single-process step up to float32 summation order.

What runs once per process and what once overall: every process holds the (replicated) model
and computes the same validation losses from its local replica (:func:`host_local`), so all take
the same plateau decisions; only the primary process (index 0) evaluates and writes outputs.

A process group is given explicitly (``--coordinator HOST:PORT --num-processes N --process-id
I``) or through the environment (:data:`ENV_VARS`, as a cluster launcher sets them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import jax
import numpy as np

Tree = TypeVar("Tree")
ENV_VARS = ("SPECRAGE_COORDINATOR", "SPECRAGE_NUM_PROCESSES", "SPECRAGE_PROCESS_ID")


AUTO = "auto"


@dataclass(frozen=True)
class ProcessGroup:
    """Where the coordinator listens (HOST:PORT, served by process 0), how many processes take
    part and which one this is. ``coordinator="auto"`` leaves all three to JAX's cluster
    detection (Cloud TPU, Slurm, Open MPI), which fills whichever of the counts is not given."""

    coordinator: str
    num_processes: int | None = None
    process_id: int | None = None

    def __post_init__(self) -> None:
        if self.coordinator != AUTO:
            host, _, port = self.coordinator.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"the coordinator address must be HOST:PORT or 'auto', got {self.coordinator!r}")
            if self.num_processes is None or self.process_id is None:
                raise ValueError("a coordinator address needs the number of processes and this process's id")
        if self.num_processes is not None and self.num_processes < 1:
            raise ValueError(f"the number of processes must be >= 1, got {self.num_processes}")
        if self.process_id is not None and self.num_processes is not None:
            if not 0 <= self.process_id < self.num_processes:
                raise ValueError(f"process id {self.process_id} is outside 0..{self.num_processes - 1}")


def group_from(
    coordinator: str | None, num_processes: int | None, process_id: int | None, environ: Mapping[str, str] = os.environ
) -> ProcessGroup | None:
    """The process group the arguments name, each missing one read from :data:`ENV_VARS`; None
    when neither names a coordinator (a single-process run). A coordinator ``auto`` needs
    neither count (JAX detects them on Cloud TPU, Slurm and Open MPI).

    Raises:
      ValueError: when a coordinator address is named without the process count or id (or the reverse).
    """
    values: list[str | int | None] = [coordinator, num_processes, process_id]
    for i, name in enumerate(ENV_VARS):
        if values[i] is None and environ.get(name):
            values[i] = environ[name]
    if all(v is None for v in values):
        return None
    counts = [None if v is None else int(v) for v in values[1:]]
    if values[0] == AUTO:
        return ProcessGroup(coordinator=AUTO, num_processes=counts[0], process_id=counts[1])
    if any(v is None for v in values):
        missing = [flag for flag, v in zip(("--coordinator", "--num-processes", "--process-id"), values) if v is None]
        raise ValueError(
            f"a multi-process run needs --coordinator, --num-processes and --process-id (or {', '.join(ENV_VARS)}; "
            f"or --coordinator auto on Cloud TPU, Slurm, Open MPI); missing {', '.join(missing)}"
        )
    return ProcessGroup(coordinator=str(values[0]), num_processes=counts[0], process_id=counts[1])


def initialize(group: ProcessGroup) -> int:
    """Joins this process to ``group`` (call before anything asks JAX for its devices); returns
    the number of processes. On CPU the collectives go through Gloo."""
    if group.num_processes == 1:
        return 1
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=None if group.coordinator == AUTO else group.coordinator,
        num_processes=group.num_processes,
        process_id=group.process_id,
    )
    return jax.process_count()


def is_multiprocess() -> bool:
    return jax.process_count() > 1


def is_primary() -> bool:
    """Whether this process writes the run's outputs (process 0)."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """Waits until every process reaches the barrier ``name`` (a no-op in a single process). File
    work done by the primary process alone sits between two barriers, so no process reads a
    file while it is written."""
    if is_multiprocess():
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def primary_decides(flag: bool) -> bool:
    """The primary process's ``flag``, in every process: a decision taken from one process's
    clock or filesystem view (save now? is this directory taken?) must be the same everywhere,
    or the processes would part at the next collective."""
    if not is_multiprocess():
        return flag
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.asarray(flag)))


def shared_token() -> str:
    """A random hexadecimal name, the same in every process (the primary process's draw): the
    temporary directory of a save every process joins."""
    draw = np.frombuffer(os.urandom(8), np.uint32)
    if is_multiprocess():
        from jax.experimental import multihost_utils

        draw = np.asarray(multihost_utils.broadcast_one_to_all(draw))
    return "".join(f"{int(x):08x}" for x in draw)


def local_rows(idx: np.ndarray) -> np.ndarray:
    """This process's block of a global batch's rows ``idx`` (m,): the global batch is the
    concatenation of the processes' blocks in process order (what ``shard_batch`` assembles)."""
    count = jax.process_count()
    if count == 1:
        return idx
    if idx.shape[0] % count:
        raise ValueError(f"a global batch of {idx.shape[0]} rows does not split over {count} processes")
    share = idx.shape[0] // count
    start = jax.process_index() * share
    return idx[start : start + share]


def host_local(tree: Tree) -> Tree:
    """A replicated pytree (e.g. the training state on a multi-process mesh) as this process's
    own copy on its first local device: single-device arrays that local, uncollective work
    (validation, embedding, saving) can take."""

    def local(leaf: Any) -> Any:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            return leaf.addressable_data(0)
        return leaf

    return jax.tree.map(local, tree)
