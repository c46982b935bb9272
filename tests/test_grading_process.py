"""The one grading process batch and service share (harness/grading/process.py): its protocol (ready, one
answer a task) and what the Runner makes of a process that dies, overruns or never says ready."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness.grading.process import GradingProcess, Runner

PARENT = "ATTN_GRADER_BATCH_PARENT"


def batch_process(tmp_path: Path) -> GradingProcess:
    return GradingProcess("harness.batch.child", parent_var=PARENT, cwd=tmp_path, log=tmp_path / "child.log")


def test_a_grading_process_says_ready_then_answers_each_task(tmp_path):
    runner = Runner(lambda: batch_process(tmp_path), recycle_after=2)
    try:
        task = {"exercise": "no_such_exercise", "path": str(tmp_path / "x.py"), "track": "auto", "sandbox": "local",
                "seed": 0, "label": "x.py", "sha256": "0" * 64}
        first = runner.run(task, timeout=120)
        assert first["kind"] == "usage" and "no_such_exercise" in first["message"], first
        pid = runner.proc.proc.pid
        assert runner.run(task, timeout=120)["kind"] == "usage"
        runner.run(task, timeout=120)  # recycled after two tasks: a new process answers the third
        assert runner.proc.proc.pid != pid
    finally:
        runner.close()


def test_a_grading_process_is_recycled_once_it_holds_more_than_its_memory_bound(tmp_path):
    """The service keeps a grading process for up to 1,000 tasks (a fresh one costs ~0.4 s of CPU, issue 27);
    what bounds it then is the memory it holds, read by the parent in /proc, checked before each task."""
    from harness.grading.process import resident_mb

    task = {"exercise": "no_such_exercise", "path": str(tmp_path / "x.py"), "track": "auto", "sandbox": "local",
            "seed": 0, "label": "x.py", "sha256": "0" * 64}
    for bound, recycled in ((10_000, False), (1, True)):
        runner = Runner(lambda: batch_process(tmp_path), recycle_after=1000, recycle_rss_mb=bound)
        try:
            assert runner.run(task, timeout=120)["kind"] == "usage"
            pid = runner.proc.proc.pid
            assert 1 < resident_mb(pid) < 10_000
            assert runner.run(task, timeout=120)["kind"] == "usage"
            assert (runner.proc.proc.pid != pid) is recycled, bound
        finally:
            runner.close()
    assert resident_mb(2 ** 22 + 12345) is None             # no such process: nothing to read, no recycling


def test_a_process_that_dies_mid_task_is_an_infrastructure_answer_with_its_exit_code(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)\n")   # its grading is under way until the kill
    log = tmp_path / "starts.log"
    runner = Runner(lambda: GradingProcess("harness.batch.child", parent_var=PARENT, cwd=tmp_path,
                                           env={"ATTN_GRADER_BATCH_LOG": str(log)}), recycle_after=10)
    try:
        runner._ensure()
        proc = runner.proc

        def kill_once_started():
            deadline = time.monotonic() + 60
            while not log.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(proc.proc.pid, signal.SIGKILL)

        threading.Thread(target=kill_once_started, daemon=True).start()
        answer = runner.run({"exercise": "mha", "path": str(slow), "track": "numpy", "sandbox": "local", "seed": 0,
                             "label": "slow.py", "sha256": "0"}, timeout=120)
        assert answer == {"kind": "infrastructure", "message": "the grading process died (exit code -9)"}
        assert runner.proc is None and proc.proc.returncode == -9
    finally:
        runner.close()


def test_an_overrun_and_a_process_that_never_says_ready(tmp_path):
    silent = tmp_path / "silent.py"
    silent.write_text("import sys, time\nfor line in sys.stdin:\n    time.sleep(60)\n")
    try:   # python -m finds them in its working directory
        never_ready = Runner(lambda: GradingProcess("silent", parent_var=PARENT, cwd=tmp_path), recycle_after=10,
                             ready_timeout=1.0)
        assert never_ready.run({}, timeout=1.0) == {"kind": "infrastructure",
                                                    "message": "the grading process could not start"}
        ready = tmp_path / "ready_then_slow.py"
        ready.write_text("import sys, time\nprint('{\"kind\": \"ready\"}', flush=True)\n"
                         "for line in sys.stdin:\n    time.sleep(60)\n")
        slow = Runner(lambda: GradingProcess("ready_then_slow", parent_var=PARENT, cwd=tmp_path), recycle_after=10)
        assert slow.run({}, timeout=1.0) == {"kind": "infrastructure",
                                             "message": "grading did not finish within 1 s"}
        assert slow.proc is None
    finally:
        never_ready.close()
        slow.close()


def test_a_sigterm_while_waiting_for_a_task_ends_the_process(tmp_path):
    """The parent's death (PDEATHSIG: SIGTERM) ends a grading process that waits for its next task even when its
    stdin is not at EOF (a copy of the pipe's other end held by another process): it must not wait forever."""
    proc = batch_process(tmp_path)
    try:
        assert proc.read(timeout=120) == {"kind": "ready"}
        proc.proc.send_signal(signal.SIGTERM)            # stdin stays open: only the signal can end it
        assert proc.proc.wait(timeout=60) == 143
    finally:
        if proc.proc.poll() is None:
            proc.proc.kill()
            proc.proc.wait()
        proc.proc.stdin.close()
        proc.proc.stdout.close()


def test_a_graded_task_closes_its_worker_after_the_answer(monkeypatch, capsys):
    """A grade given ``close_later`` (a grading process's grade_task, from serve()) returns with its worker still
    running and its close in the list, so the answer goes out before the worker's death is waited for; a grade that
    raises closes its worker itself. serve() runs what is left after each answer, a failing close only logged."""
    from harness.grading.engine import grade
    from harness.grading.process import _run_later

    root = Path(__file__).resolve().parent.parent
    later: list = []
    report = grade(exercise="mha", submission=root / "reference" / "mha_numpy.py", sandbox="local",
                   close_later=later)
    assert report.verdict == "passed" and len(later) == 1
    session = later[0].__self__
    proc = session.handle.proc
    assert proc.poll() is None                      # answered before the worker was closed
    _run_later(later)
    assert later == [] and session.handle is None and proc.poll() is not None

    kept: list = []

    def raising(*args, **kwargs):
        raise RuntimeError("a diagnosis that breaks")

    monkeypatch.setattr("graders.mutants.diagnose.diagnose", raising)
    with pytest.raises(Exception, match="a diagnosis that breaks"):
        grade(exercise="mha", submission=root / "examples" / "mha_wrong_scale.py", sandbox="local", close_later=kept)
    assert kept == []                               # closed before the grade raised

    calls = []

    def failing():
        calls.append("failing")
        raise OSError("already gone")

    _run_later([failing, lambda: calls.append("next")])
    assert calls == ["failing", "next"]
    assert "closing a worker after its answer failed: OSError: already gone" in capsys.readouterr().err
