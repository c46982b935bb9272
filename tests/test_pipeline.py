"""Requests sent ahead of their answers (WorkerSession.pipeline, the shape sweep's cases on the NumPy track) grade
exactly like one request after another: a candidate that raises, crashes, runs out of memory, floods its output or
hangs on one sweep case gets the same report either way (timings aside), with the fault named on that case, and the
tests after the sweep read their own answers (the worker drops the rest of a batch after a fault it reports)."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from graders.common.problem import Problem
from graders.common.shapes import build, describe, draw
from harness.grading.engine import grade
from harness.session.candidate import Candidate

from .helpers import validate

REFERENCE = Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py"
CASE = 6  # the sweep case (0-based) the candidate misbehaves on

BEHAVIOURS = {
    "raises": "raise ValueError('boom')",
    "crashes": "os._exit(3)",
    "memory": "raise MemoryError",
    "floods": "sys.stderr.write('x' * 400_000); sys.stderr.flush()",
    "hangs": "while True: pass",
}


def _target():
    problem = Problem("self")
    shapes = draw(problem, "numpy", np.random.default_rng([0, zlib.crc32(b"test_shape_sweep")]))  # sweep_plan
    sh = shapes[CASE]
    x = build(problem, sh).x
    same = [s for s in shapes if (build(problem, s).x.shape, s.dtype) == (x.shape, sh.dtype)]
    assert same == [sh], "the target case must be the only one of its shape and dtype in the sweep"
    return x.shape, sh.dtype, describe(sh, problem, "numpy")


def _candidate(tmp_path: Path, behaviour: str) -> Path:
    shape, dtype, _ = _target()
    source = REFERENCE.read_text() + f"""

import os
import sys

_mha = mha


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if (tuple(X.shape), str(X.dtype)) == ({tuple(shape)!r}, {dtype!r}):
        {BEHAVIOURS[behaviour]}
    return _mha(X, Wq, Wk, Wv, Wo, h, mask)
"""
    path = tmp_path / f"{behaviour}.py"
    path.write_text(source)
    return path


# What differs between two runs of the same code: timings, a measured memory peak, a container's name, and how many
# bytes of a flood the host had read when it killed the worker (the kill races the worker's writes either way).
VOLATILE = ("timings", "duration_s", "cgroup_memory_peak_mb", "container", "output_bytes")


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _both(path: Path, sandbox: str, monkeypatch, *, case_named: bool = True, timeout_s: float = 4.0):
    """``case_named=False``: the sweep's fault message may name another case (see test_through_docker_too).
    ``timeout_s``: every call's; the hanging case's wait, once per grade."""
    limits = {"call_timeout_s": timeout_s}
    ahead = grade(exercise="mha", submission=path, track="numpy", sandbox=sandbox, limits=limits)
    with monkeypatch.context() as m:
        m.delattr(Candidate, "run_many")   # the sweep then calls the candidate one case after another
        one_by_one = grade(exercise="mha", submission=path, track="numpy", sandbox=sandbox, limits=limits)
    a, b = validate(ahead), validate(one_by_one)
    if not case_named:
        for report in (a, b):
            for t in report["tests"]:
                t["message"] = re.sub(r" \(on s = .*\)$", " (on a sweep case)", t["message"])
    assert json.dumps(_strip(a), sort_keys=True) == json.dumps(_strip(b), sort_keys=True)
    return ahead


@pytest.mark.docker
@pytest.mark.parametrize("behaviour", ["memory", "floods"])
def test_through_docker_too(behaviour, tmp_path, monkeypatch):
    """The image's worker drops a batch's rest after a fault it reports; the docker client's pipes carry a flood.
    Which sweep case a flood is named on may differ with cases sent ahead (at most a few cases later: the worker
    runs ahead of the answers read); the flood is counted when each answer is read (channel._StderrPump.settle), so
    it never lands past the sweep, on a later test (it did once on a loaded machine, before)."""
    report = _both(_candidate(tmp_path, behaviour), "docker", monkeypatch, case_named=behaviour != "floods")
    sweep = next(t for t in report.tests if t.id == "test_shape_sweep")
    assert sweep.status == {"memory": "memory", "floods": "output_limit"}[behaviour], sweep.message
    assert all(t.status == "passed" for t in report.tests if t.id != "test_shape_sweep")


@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_a_misbehaving_sweep_case_reports_the_same_ahead_or_one_by_one(behaviour, tmp_path, monkeypatch):
    # a hang is a hang at 1.5 s as at 4 (the corpus's other calls take milliseconds): 5 s less of waiting
    ahead = _both(_candidate(tmp_path, behaviour), "local", monkeypatch, timeout_s=1.5 if behaviour == "hangs" else 4.0)
    sweep = next(t for t in ahead.tests if t.id == "test_shape_sweep")
    others = [t for t in ahead.tests if t.id != "test_shape_sweep"]
    if behaviour == "raises":  # the candidate's exception: the sweep goes on and names the (shrunk) shape
        assert sweep.status == "error" and "boom" in sweep.message and "fails when" in sweep.message
    else:                      # a fault ends the sweep on that very case
        status = {"crashes": "error", "memory": "memory", "floods": "output_limit", "hangs": "timeout"}[behaviour]
        assert sweep.status == status, (sweep.status, sweep.message)
        assert sweep.message.endswith(f"(on {_target()[2]})"), sweep.message
    assert all(t.status == "passed" for t in others), [(t.id, t.status, t.message) for t in others if
                                                        t.status != "passed"]
    expected_starts = {"raises": 1, "memory": 1}.get(behaviour, 2)  # a killed worker is started afresh
    assert ahead.environment["worker_starts"] == expected_starts


def test_pipeline_answers_come_in_order_and_a_reported_fault_ends_the_batch(tmp_path):
    """At the session: requests ahead of their answers, an exception in the middle (yielded, the batch goes on), a
    fault the worker reports (raised, the batch ends), then a plain request reads its own answer."""
    from harness.sandbox import get_sandbox
    from harness.sandbox.base import Limits
    from harness.session.channel import WorkerSession
    from harness.core.errors import CandidateException, WorkerFault

    path = tmp_path / "f.py"
    path.write_text("def f(x):\n"
                    "    if x.shape[0] == 3:\n        raise ValueError('three')\n"
                    "    if x.shape[0] == 5:\n        raise MemoryError\n"
                    "    return x * 2\n")
    session = WorkerSession(get_sandbox("local"), track="numpy", entry="f", submission=path, limits=Limits())
    session.start()
    try:
        def requests():
            for n in range(1, 9):
                yield {"op": "call", "args": [{"array": "x"}], "kwargs": {}}, {"x": np.arange(n, dtype=float)}

        got = []
        with pytest.raises(WorkerFault) as fault:
            for answer in session.pipeline(requests()):
                got.append(answer if isinstance(answer, CandidateException) else answer[1]["out"])
        assert fault.value.status == "memory"
        assert [len(g) for g in got if not isinstance(g, CandidateException)] == [1, 2, 4]
        assert isinstance(got[2], CandidateException) and "three" in got[2].exc_message
        assert [list(g) for g in got if not isinstance(g, CandidateException)][-1] == [0, 2, 4, 6]
        head, out = session.request({"op": "call", "args": [{"array": "x"}], "kwargs": {}},
                                    {"x": np.arange(7, dtype=float)})
        assert list(out["out"]) == [0, 2, 4, 6, 8, 10, 12] and session.starts == 1
    finally:
        session.close()
