"""Progress of a training stage: plain lines in a log (first, every interval, last), nothing when disabled."""

from __future__ import annotations

import io
import re

from specrage_jax.training.progress import EpochLines, epoch_progress


def run_epochs(stream: io.StringIO, *, enabled: bool, epochs: range, total: int | None = None) -> list[int]:
    bar = epoch_progress(epochs, desc="train", enabled=enabled, leave=True, total=total, stream=stream)
    seen = []
    for epoch in bar:
        seen.append(epoch)
        bar.set_postfix(loss="0.5", lr="1.0e-03")
    bar.close()
    return seen


def test_a_log_gets_plain_lines_with_the_time_left_first_and_last_epoch_included():
    stream = io.StringIO()
    assert run_epochs(stream, enabled=True, epochs=range(2, 5), total=5) == [2, 3, 4]  # resumed after 2 epochs
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 2  # epoch 4 came within the interval
    assert re.fullmatch(r"train: epoch 3/5, loss=0\.5, lr=1\.0e-03 \(\d+ s, about \d+ s left at most\)", lines[0])
    assert lines[-1].startswith("train: epoch 5/5") and lines[-1].endswith("about 0 s left at most)")


class Clock:
    """A clock that advances ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def shown_epochs(epochs: int, *, seconds_per_read: float, stop_after: int | None = None) -> list[int]:
    stream = io.StringIO()
    lines = EpochLines(
        range(epochs), desc="net", total=epochs, stream=stream, interval=10.0, clock=Clock(seconds_per_read)
    )
    for epoch in lines:
        lines.set_postfix(loss="1")
        if stop_after is not None and epoch + 1 == stop_after:
            break
    lines.close()
    return [int(line.split("epoch ")[1].split("/")[0]) for line in stream.getvalue().splitlines()]


def test_a_log_shows_an_epoch_only_once_the_interval_has_passed():
    assert shown_epochs(200, seconds_per_read=0.01) == [1, 200]  # short epochs: the first and the last
    assert shown_epochs(6, seconds_per_read=20.0) == [1, 2, 3, 4, 5, 6]  # long epochs: every one
    assert shown_epochs(30, seconds_per_read=1.0) == [1, 11, 21, 30]  # one clock read per epoch, 10 s apart


def test_a_stage_that_stops_early_still_shows_its_last_epoch():
    assert shown_epochs(200, seconds_per_read=0.01, stop_after=37) == [1, 37]


def test_nothing_is_written_when_progress_is_off():
    stream = io.StringIO()
    assert run_epochs(stream, enabled=False, epochs=range(3)) == [0, 1, 2]
    assert stream.getvalue() == ""
