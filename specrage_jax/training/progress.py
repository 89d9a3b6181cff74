"""Per-epoch progress of a training stage: a tqdm bar on a terminal, one plain line per epoch
(with the time so far and an estimate of the time left) where stderr is a file or a pipe, so a
long run's log reads line by line instead of filling with carriage-return frames."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any, Protocol, TextIO

from tqdm.auto import tqdm


class EpochBar(Protocol):
    """What the training loops use of a progress bar: iterate over the epochs, show the latest
    values, close."""

    def __iter__(self) -> Iterator[int]: ...

    def set_postfix(self, **values: Any) -> None: ...

    def close(self) -> None: ...


class EpochLines:
    """One line per finished epoch on ``stream``: ``desc: epoch 5/25, loss=..., (12 s, about 48 s left)``."""

    def __init__(self, epochs: range, *, desc: str, total: int, stream: TextIO) -> None:
        self.epochs, self.desc, self.total, self.stream = epochs, desc, total, stream
        self.started = time.perf_counter()
        self.first = epochs.start
        self.current = epochs.start

    def __iter__(self) -> Iterator[int]:
        self.started = time.perf_counter()
        for epoch in self.epochs:
            self.current = epoch
            yield epoch

    def set_postfix(self, **values: Any) -> None:
        done = self.current + 1
        elapsed = time.perf_counter() - self.started
        left = elapsed / max(done - self.first, 1) * (self.total - done)
        shown = "".join(f", {key}={value}" for key, value in values.items())
        line = f"{self.desc}: epoch {done}/{self.total}{shown} ({elapsed:.0f} s, about {left:.0f} s left at most)"
        print(line, file=self.stream, flush=True)

    def close(self) -> None:
        return None


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
