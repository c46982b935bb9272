"""benchmarks/service_floor.py charges the calling thread's CPU to the innermost measured function running."""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from service_floor import Exclusive  # noqa: E402


def busy(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_nested_call_is_charged_to_itself_not_to_its_caller_too():
    clock = Exclusive()
    inner = clock.wrap(lambda: busy(0.03), "inner")

    def outer_body():
        busy(0.02)
        inner()
        busy(0.02)

    clock.wrap(outer_body, "outer")()
    assert 0.03 <= clock.spent["inner"] < 0.045, clock.spent
    assert 0.04 <= clock.spent["outer"] < 0.055, clock.spent   # its own 40 ms, not the inner call's 30 ms
    assert clock.stack == []


def test_every_copy_of_a_function_in_our_modules_is_replaced(monkeypatch):
    def measured():
        busy(0.01)

    holder = types.ModuleType("harness._floor_probe")
    holder.copy = measured                         # as `from x import measured` leaves it
    monkeypatch.setitem(sys.modules, "harness._floor_probe", holder)
    clock = Exclusive()
    clock.everywhere(measured, "probe")
    assert holder.copy is not measured
    holder.copy()
    assert clock.spent["probe"] >= 0.01
