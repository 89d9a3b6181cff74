"""Stopping training cleanly on SIGTERM or SIGINT (a preempted cloud machine, Ctrl-C).

While :func:`watch` is active a first SIGTERM or SIGINT only sets a flag; the training loops
call :meth:`PreemptionWatch.requested` at every step boundary, stop there, write a checkpoint
and raise :class:`Preempted`. A second signal of either kind restores the previous handlers and
delivers itself again: the default SIGINT handler raises ``KeyboardInterrupt`` at once, the
default SIGTERM handler ends the process. The handlers are installed only inside :func:`watch`
(in the main thread) and restored when it ends; nested watches share the outermost one.

Several processes (``jax.distributed``) must stop after the same step. JAX's preemption service
(on by default in ``jax.distributed.initialize``) already catches SIGTERM in every process and
agrees on a step with the others through the coordination service:
``multihost_utils.reached_preemption_sync_point(tick)`` is True in every process at the same
tick (0.4 µs a call, no collective). SIGTERM is then left to it, and SIGINT is handed to it as
a SIGTERM of the process itself. Without that service the processes combine their flags with a
collective every :data:`SYNC_EVERY` ticks.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import jax
import numpy as np

PREEMPTED_EXIT_CODE = 75  # EX_TEMPFAIL (sysexits.h): `specrage train` was stopped by a signal, resume it
SIGNALS = (signal.SIGTERM, signal.SIGINT)
SYNC_EVERY = 8  # ticks between the collectives that combine the flags, where JAX's service is off

_active: PreemptionWatch | None = None
_ticks = itertools.count(1)  # one counter per process: the preemption service wants increasing step ids


class Preempted(KeyboardInterrupt):
    """Training stopped at a step boundary after SIGTERM or SIGINT; a ``KeyboardInterrupt``, so
    ``except Exception`` does not swallow it and an interactive session reports an interrupt.

    ``checkpoint``: the checkpoint written (None without a checkpointer); ``state`` and
    ``progress`` (``loop.FitProgress``): where training stood, for a caller that saves itself.
    """

    def __init__(
        self,
        where: str,
        *,
        signal_name: str,
        checkpoint: Path | None = None,
        state: Any = None,
        progress: Any = None,
    ):
        super().__init__(f"training stopped by {signal_name} {where}")
        self.where = where
        self.signal_name = signal_name
        self.checkpoint = checkpoint
        self.state = state
        self.progress = progress
        self.completed: Any = None  # pre-training: the stages finished before the signal


class PreemptionWatch:
    """The stop request of one training run: a signal noted in this process, agreed on by all."""

    def __init__(self, sync: Callable[[int, bool], bool] | None = None):
        self.signal_name: str | None = None
        self.stopping = False
        self._sync = sync

    def note(self, signum: int) -> None:
        """Records a signal (from the handler)."""
        self.signal_name = self.signal_name or signal.Signals(signum).name

    def requested(self) -> bool:
        """Whether training stops after the step just taken: every process gets the same answer
        at the same call (call it at the same step boundaries in every process)."""
        if not self.stopping:
            tick = next(_ticks)
            local = self.signal_name is not None
            self.stopping = local if self._sync is None else self._sync(tick, local)
        return self.stopping

    def name(self) -> str:
        """The signal that stopped training (another process's: SIGTERM)."""
        return self.signal_name or "SIGTERM"


class _InertWatch(PreemptionWatch):
    """A watch with no handlers (disabled, or outside the main thread): never requests a stop."""

    def requested(self) -> bool:
        return False


def active() -> PreemptionWatch:
    """The watch of the training in progress (an inert one outside :func:`watch`)."""
    return _active if _active is not None else _InertWatch()


def _jax_preemption_service() -> Any:
    from jax._src import distributed

    return distributed.global_state.preemption_sync_manager


def _service_sync(tick: int, local: bool) -> bool:
    from jax.experimental import multihost_utils

    return bool(multihost_utils.reached_preemption_sync_point(tick))


def _collective_sync(tick: int, local: bool) -> bool:
    if tick % SYNC_EVERY:
        return False
    from jax.experimental import multihost_utils

    return bool(np.any(multihost_utils.process_allgather(np.asarray(local))))


def _handler(state: PreemptionWatch, previous: dict[int, Any], relay: bool) -> Callable[[int, FrameType | None], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        if state.signal_name is not None:  # a second signal: stop at once, as without the watch
            _restore(previous)
            signal.raise_signal(signum)
            return
        state.note(signum)
        if relay:  # JAX's preemption service listens for SIGTERM and tells the other processes
            os.kill(os.getpid(), signal.SIGTERM)

    return handle


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    previous.clear()


@contextmanager
def watch(enabled: bool = True) -> Iterator[PreemptionWatch]:
    """SIGTERM and SIGINT stop training at the next step boundary while the block runs (see the
    module docstring); the previous handlers are back afterwards. Inside another watch, that
    one; disabled or outside the main thread, an inert watch (the signals act as usual)."""
    global _active
    if _active is not None:
        yield _active
        return
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield _InertWatch()
        return
    service = jax.process_count() > 1 and _jax_preemption_service() is not None
    sync = None if jax.process_count() == 1 else (_service_sync if service else _collective_sync)
    state = PreemptionWatch(sync)
    previous: dict[int, Any] = {}
    handler = _handler(state, previous, relay=service)
    for signum in SIGNALS:
        if signum == signal.SIGTERM and service:
            continue  # JAX's own SIGTERM handler (invisible to Python) stays in place
        previous[signum] = signal.signal(signum, handler)
    _active = state
    try:
        yield state
    finally:
        _active = None
        _restore(previous)
