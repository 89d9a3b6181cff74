"""Per-epoch progress of a training stage: a tqdm bar on a terminal, plain lines (with the time
so far and an estimate of the time left) where stderr is a file or a pipe, so a long run's log
reads line by line instead of filling with carriage-return frames. A log gets the first epoch,
then at most one line every LOG_INTERVAL_S seconds, and the stage's last epoch: a stage of 200
short epochs writes a few lines, a run of minute-long epochs one line per epoch."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TextIO

from tqdm.auto import tqdm

LOG_INTERVAL_S = 10.0  # a log's progress lines are at least this many seconds apart (first and last epoch aside)


class EpochBar(Protocol):
    """What the training loops use of a progress bar: iterate over the epochs, show the latest
    values, close."""

    def __iter__(self) -> Iterator[int]: ...

    def set_postfix(self, **values: Any) -> None: ...

    def close(self) -> None: ...


class EpochLines:
    """Progress lines on ``stream``: ``desc: epoch 5/25, loss=..., (12 s, about 48 s left at most)``
    for the first epoch, then for an epoch at least ``interval`` seconds after the last line shown,
    and for the last one (epoch ``total``, or the last set before :meth:`close` when the stage
    stops early). ``clock`` gives the time in seconds."""

    def __init__(
        self,
        epochs: range,
        *,
        desc: str,
        total: int,
        stream: TextIO,
        interval: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.epochs, self.desc, self.total, self.stream = epochs, desc, total, stream
        self.interval, self.clock = interval, clock
        self.started = clock()
        self.first = epochs.start
        self.current = epochs.start
        self.shown_at = -float("inf")  # when the last line was written
        self.withheld: str | None = None  # the latest line, not yet written

    def __iter__(self) -> Iterator[int]:
        self.started = self.clock()
        for epoch in self.epochs:
            self.current = epoch
            yield epoch

    def set_postfix(self, **values: Any) -> None:
        done = self.current + 1
        now = self.clock()
        elapsed = now - self.started
        left = elapsed / max(done - self.first, 1) * (self.total - done)
        shown = "".join(f", {key}={value}" for key, value in values.items())
        self.withheld = (
            f"{self.desc}: epoch {done}/{self.total}{shown} ({elapsed:.0f} s, about {left:.0f} s left at most)"
        )
        if done == self.first + 1 or done >= self.total or now - self.shown_at >= self.interval:
            self.write(now)

    def write(self, now: float) -> None:
        """Write the withheld line, if any."""
        if self.withheld is not None:
            print(self.withheld, file=self.stream, flush=True)
            self.withheld, self.shown_at = None, now

    def close(self) -> None:
        self.write(self.clock())


def epoch_progress(
    epochs: range, *, desc: str, enabled: bool, leave: bool, total: int | None = None, stream: TextIO | None = None
) -> EpochBar:
    """The progress of a stage's ``epochs`` (a range; ``total`` epochs in all, default its end):
    nothing when not ``enabled``; a tqdm bar when ``stream`` (default stderr) is a terminal; else
    :class:`EpochLines`."""
    stream = sys.stderr if stream is None else stream
    total = epochs.stop if total is None else total
    if enabled and not stream.isatty():
        return EpochLines(epochs, desc=desc, total=total, stream=stream)
    return tqdm(
        epochs,
        desc=desc,
        unit="epoch",
        disable=not enabled,
        leave=leave,
        initial=epochs.start,
        total=total,
        file=stream,
    )
