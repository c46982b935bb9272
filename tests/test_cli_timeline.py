"""benchmarks/cli_timeline.py marks a real one-shot `grade` run phase by phase, in order, from its launch."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from cli_timeline import MARKS, one_run, summary  # noqa: E402


def test_a_one_shot_grade_is_marked_in_order_and_summarised():
    run = one_run("mha", "numpy", "local")
    assert list(run) == [m for m in MARKS if m in run] and set(run) == set(MARKS), run
    times = [run[m] for m in MARKS]
    assert times == sorted(times) and times[0] > 0, run   # each phase after the one before, from the launch
    lines = summary([run, run])
    assert lines[-2].startswith("host waited for the worker: ") and lines[-1].startswith("tests (ready -> close): ")
