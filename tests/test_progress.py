"""Progress of a training stage: plain lines per epoch in a log, nothing when disabled."""

from __future__ import annotations

import io
import re

from specrage_jax.training.progress import epoch_progress


def run_epochs(stream: io.StringIO, *, enabled: bool, epochs: range, total: int | None = None) -> list[int]:
    bar = epoch_progress(epochs, desc="train", enabled=enabled, leave=True, total=total, stream=stream)
    seen = []
    for epoch in bar:
        seen.append(epoch)
        bar.set_postfix(loss="0.5", lr="1.0e-03")
    bar.close()
    return seen


def test_a_log_gets_one_plain_line_per_epoch_with_the_time_left():
    stream = io.StringIO()
    assert run_epochs(stream, enabled=True, epochs=range(2, 5), total=5) == [2, 3, 4]  # resumed after 2 epochs
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 3
    assert re.fullmatch(r"train: epoch 3/5, loss=0\.5, lr=1\.0e-03 \(\d+ s, about \d+ s left at most\)", lines[0])
    assert lines[-1].startswith("train: epoch 5/5") and lines[-1].endswith("about 0 s left at most)")


def test_nothing_is_written_when_progress_is_off():
    stream = io.StringIO()
    assert run_epochs(stream, enabled=False, epochs=range(3)) == [0, 1, 2]
    assert stream.getvalue() == ""
