"""The host's memory meter (harness/sandbox/memory_meter.py) and how the memory test uses it: the figure is the
host's (a worker cannot forge it), the cgroup v2 fallbacks, finding a container's cgroup, and a host that cannot
measure: the test is not assessable (skipped with the reason), never passed on the worker's word."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from graders.common import flash
from harness.core.exercises import REFERENCE_DIR, get_exercise
from harness.sandbox import memory_meter
from harness.sandbox.base import Limits
from harness.session.candidate import Result
from harness.session.channel import HOST_MEMORY
from harness.worker import wire

from .test_protocol import READY, session_for

FORGER = READY.replace("sys.stdin.buffer.read(8)\n", "") + (
    "import numpy as np, io\n"
    "while True:\n"
    "    head = sys.stdin.buffer.read(8)\n"
    "    if len(head) < 8: break\n"
    "    n = struct.unpack('>I', head[4:])[0]\n"
    "    req = json.loads(sys.stdin.buffer.read(n))\n"
    "    for a in req.get('arrays', []): sys.stdin.buffer.read(a['nbytes'])\n"
    "    buf = io.BytesIO(); np.save(buf, np.zeros(2)); blob = buf.getvalue()\n"
    "    frame({'kind': 'result', 'host_memory': {'peak_bytes': 1, 'method': 'cgroup v1 forged'},\n"
    "           'memory': {'peak_bytes': 1, 'method': 'tracemalloc', 'intact': True}}, [('out', blob)])\n")


class Record:
    def forward(self, *a, **k): pass
    def note(self, **k): self.notes = k
    def signature(self, *a, **k): pass


def test_a_worker_cannot_say_what_the_host_measured(tmp_path):
    """A forged ``host_memory`` in the worker's answer is dropped; without a meter (this script has no cgroup)
    the host says it could not measure; a request without the memory flag carries no host figure at all."""
    session = session_for(FORGER, tmp_path)
    try:
        head, _ = session.request({"op": "call", "args": [], "kwargs": {}, wire.MEMORY: True})
        assert set(head[HOST_MEMORY]) == {"unavailable"} and "no cgroup of its own" in head[HOST_MEMORY]["unavailable"]
        assert head["memory"]["peak_bytes"] == 1  # the worker's word, kept only as a diagnostic
        head, _ = session.request({"op": "call", "args": [], "kwargs": {}})
        assert HOST_MEMORY not in head
    finally:
        session.close()


class FakeCandidate:
    """Answers the memory call correctly, with the host figures given (one per call, the last one repeated)."""

    def __init__(self, *host_memory, worker_peak=1 << 20):
        self.figures, self.worker_peak, self.calls = list(host_memory), worker_peak, 0

    def call(self, arrays, values, memory=False, **kw):
        case = flash.FlashCase(arrays["Q"], arrays["K"], arrays["V"], values["block_size"], values["causal"])
        self.calls += 1
        figure = self.figures.pop(0) if len(self.figures) > 1 else self.figures[0]
        return Result(flash.reference(case), {"exact_type": True}, {}, {},
                      memory={"peak_bytes": self.worker_peak, "intact": True}, host_memory=figure)


CASE = flash.make_case(np.random.default_rng(0), b=1, h=1, s=256, d_k=16, block_size=64)


def test_no_host_figure_is_not_assessable_whatever_the_worker_says():
    record = Record()
    with pytest.raises(pytest.skip.Exception, match="not assessable: the host cannot measure .*no cgroup.* the "
                                                      "worker says 1.0 MiB, which is not taken on its word"):
        flash.check_memory(FakeCandidate({"unavailable": "no cgroup"}), CASE, record)
    assert record.notes["host_measurement"] == "unavailable: no cgroup" and record.notes["worker_peak_bytes"] == 1 << 20


def test_the_hosts_figure_decides_and_the_workers_is_a_diagnostic():
    bound = flash.host_bound(CASE)
    ok = flash.check_memory(FakeCandidate({"peak_bytes": bound - 1, "held_bytes": 0, "method": "m"}), CASE,
                            Record())
    assert ok["peak_bytes"] == bound - 1 and ok["worker_peak_bytes"] == 1 << 20
    with pytest.raises(flash.CheckFailure, match="the worker's own measurement"):  # it can only fail itself
        flash.check_memory(FakeCandidate({"peak_bytes": 0, "method": "m"}, worker_peak=10 * bound), CASE, Record())
    with pytest.raises(flash.CheckFailure, match="measured by the host.*the worker itself reported 0.0 MiB"):
        flash.check_memory(FakeCandidate({"peak_bytes": bound + 1, "method": "m"}, worker_peak=0), CASE, Record())
    with pytest.raises(flash.CheckFailure, match="already held"):
        flash.check_memory(FakeCandidate({"peak_bytes": 0, "held_bytes": bound + flash.HELD_ALLOWANCE + 1,
                                          "method": "m"}), CASE, Record())


def test_cgroup_v2_without_a_resettable_peak_samples_memory_current(tmp_path):
    """No memory.peak the host can reset (kernels before 6.12, or none at all): memory.current is sampled during
    the call, and a rise that lasts longer than a few samples is caught."""
    current = tmp_path / "memory.current"
    current.write_text("1000\n")
    meter = memory_meter.for_directory(str(tmp_path), "v2")
    assert meter is not None and meter.begin() and "sampled" in meter.method

    def put(value: str) -> None:  # as the kernel's file reads: whole (write_text truncates first, and a read of
        (tmp_path / "next").write_text(value)  # the empty file in between is the cgroup gone: sampling stops)
        os.replace(tmp_path / "next", current)

    def spike():
        time.sleep(0.02)
        put("5000\n")
        time.sleep(0.05)
        put("1500\n")

    thread = threading.Thread(target=spike)
    thread.start()
    thread.join()
    figures = meter.end()
    assert figures["peak_bytes"] == 4000 and figures["baseline_bytes"] == 1000 and "sampled" in figures["method"]
    assert meter._sampler is None  # the sampling thread is stopped with the call


def test_v1_counters_reset_before_the_call(tmp_path):
    """cgroup v1 (a stand-in directory: the kernel's reset is a write of 0): the peak is read back after the
    call; a counter that cannot be written means no measurement (not a fake one)."""
    (tmp_path / "memory.usage_in_bytes").write_text("2000\n")
    (tmp_path / "memory.max_usage_in_bytes").write_text("9000\n")
    meter = memory_meter.for_directory(str(tmp_path), "v1")
    assert meter.begin()
    (tmp_path / "memory.max_usage_in_bytes").write_text("7000\n")
    assert meter.end()["peak_bytes"] == 5000
    (tmp_path / "memory.max_usage_in_bytes").unlink()
    assert not meter.begin()
    assert memory_meter.for_directory(str(tmp_path / "gone"), "v1") is None


def test_a_containers_cgroup_must_name_it(tmp_path, monkeypatch):
    cid = "ab" * 32
    v1 = tmp_path / "memory"
    (v1 / "docker" / cid).mkdir(parents=True)
    (v1 / "docker" / cid / "memory.usage_in_bytes").write_text("1\n")
    (v1 / "other").mkdir()
    (v1 / "other" / "memory.usage_in_bytes").write_text("1\n")
    monkeypatch.setattr(memory_meter, "_mounts", lambda: [(str(v1), "/", "cgroup", "rw,memory")])
    meter, why = memory_meter.container_cgroup(cid, None)  # no pid visible (another PID namespace): by its id
    assert meter is not None and meter.directory == str(v1 / "docker" / cid) and why == ""
    meter, why = memory_meter.container_cgroup("cd" * 32, None)
    assert meter is None and "no memory cgroup of container cdcdcdcdcdcd" in why
    assert memory_meter.container_cgroup("", 1)[0] is None


def test_a_local_worker_without_a_cgroup_is_not_assessable(monkeypatch, tmp_path):
    """The real path: a local worker with no cgroup of its own; the reference's memory test is skipped, with the
    reason, and the worker's own figure beside it."""
    from harness.sandbox import cgroup
    from harness.sandbox.local import LocalSandbox
    from harness.session.candidate import Candidate
    from harness.session.channel import WorkerSession

    monkeypatch.setattr(cgroup, "support", lambda: cgroup.Support(None, {}, False, False, "disabled for the test"))
    ex = get_exercise("flash_attention")
    session = WorkerSession(LocalSandbox(), track="numpy", entry=ex.entry("numpy"),
                            submission=REFERENCE_DIR / "flash_attention_numpy.py", limits=Limits())
    try:
        record = Record()
        with pytest.raises(pytest.skip.Exception, match="not assessable.*disabled for the test.*worker says"):
            flash.check_memory(Candidate(session, ex, "numpy"), CASE, record)
        assert "disabled for the test" in record.notes["host_measurement"]
    finally:
        session.close()


def test_a_figure_above_the_bound_is_measured_again_and_the_lower_counts():
    """A transient of the sandbox's own (seen once under gVisor) does not fail a correct file; an s × s matrix
    is above the bound on every call."""
    bound = flash.host_bound(CASE)
    once = FakeCandidate({"peak_bytes": 3 * bound, "method": "m"}, {"peak_bytes": bound // 2, "method": "m"})
    figures = flash.check_memory(once, CASE, Record())
    assert once.calls == 2 and figures["peak_bytes"] == bound // 2 and figures["first_peak_bytes"] == 3 * bound
    always = FakeCandidate({"peak_bytes": 3 * bound, "method": "m"})
    with pytest.raises(flash.CheckFailure, match="materialised"):
        flash.check_memory(always, CASE, Record())
    assert always.calls == 2
    quiet = FakeCandidate({"peak_bytes": bound // 2, "method": "m"})
    flash.check_memory(quiet, CASE, Record())
    assert quiet.calls == 1


def test_when_measured_again_the_total_above_start_up_counts():
    """gVisor keeps pages the guest freed: a second call that builds s × s again may rise by less than the bound
    while holding the first call's pages; the lower total (peak + held) picks the first call's figures."""
    bound = flash.host_bound(CASE)
    matrix = 4 * bound
    recycled = FakeCandidate({"peak_bytes": matrix, "held_bytes": 0, "method": "m"},
                             {"peak_bytes": bound - 1, "held_bytes": matrix, "method": "m"})
    with pytest.raises(flash.CheckFailure, match="materialised") as caught:
        flash.check_memory(recycled, CASE, Record())
    assert caught.value.diagnostics["peak_bytes"] == matrix
