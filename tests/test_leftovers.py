"""Issue 28 #7: what a grader killed outright leaves behind (its service work copy, the sandboxes' scratch
folders and exchange files) is removed at the next start, by owner and pid; and a grading process told to stop
while it closes (the warm pool shutting down) finishes closing instead of being interrupted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from harness.core import leftovers
from tests.service.support import Server, grading_processes_of, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_the_sweep_removes_what_dead_processes_left_and_nothing_else(tmp_path, monkeypatch):
    tmp, shared, work = tmp_path / "tmp", tmp_path / "shared", tmp_path / "work"
    for d in (tmp, shared, work):
        d.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.setenv("GRADER_SANDBOX_TMPDIR", str(shared))
    dead, alive = _dead_pid(), os.getppid()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])   # dead, not yet reaped by its parent (us)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and b") Z " not in Path(f"/proc/{zombie.pid}/stat").read_bytes():
        time.sleep(0.05)
    gone = [tmp / f"grade-{dead}-abc", tmp / f"grade-probe-{dead}-x", shared / f"grade-docker-{dead}-q1",
            shared / f"grade-exchange-{dead}-z9", work / f"sub-{dead}-0123abcd-xyz", tmp / f"grade-{zombie.pid}-z"]
    kept = [tmp / f"grade-{alive}-abc", tmp / f"grade-{os.getpid()}-mine", shared / f"grade-docker-{alive}-q",
            work / f"sub-{alive}-0123abcd-xyz", tmp / "grade-notapid-x", tmp / f"other-{dead}-x"]
    for d in gone + kept:
        d.mkdir()
        (d / "inputs").write_bytes(b"x")
    removed = set(leftovers.sweep_work(work)) | set(leftovers.sweep_scratch())
    assert {str(p) for p in gone} <= removed
    assert not any(p.exists() for p in gone)
    assert all(p.exists() for p in kept)
    zombie.wait()


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie's parent, init here, reaps it)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_kill_9_during_grading_then_a_start_leaves_nothing_behind(tmp_path):
    data, tmp = tmp_path / "data", tmp_path / "tmp"
    tmp.mkdir()
    tokens = make_tokens(data, ("interviewer", "ivy"))
    server = Server(data, workers=1, env={"TMPDIR": str(tmp)}).start()
    try:
        ivy = server.client(tokens["ivy"])
        sid = submit(ivy, "mha", "import time\ntime.sleep(3)\n" + REF).json()["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (list((data / "work").glob("sub-*")) and
                                                   list(tmp.glob("grade-*"))):
            time.sleep(0.1)
        killed = [server.proc.pid, *grading_processes_of([server.proc.pid], server.tag)]
        for pid in killed:                                  # everything at once, as the OOM killer would
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        server.proc.wait(timeout=30)
        # a start sweeps what a process that is gone left; the killed server's other processes (a warm zygote, a
        # sandbox worker: they die with their parent, unwinding) may take a moment under load: wait for them
        owners = lambda: {int(m.group(1)) for p in list((data / "work").glob("sub-*")) + list(tmp.glob("grade-*"))
                          if (m := re.match(r"(?:sub|grade(?:-docker|-exchange|-probe)?)-(\d+)-", p.name))}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(_running(pid) for pid in owners()):
            time.sleep(0.1)
        assert not any(_running(pid) for pid in owners()), "a process of the killed server outlived it"
        left = list((data / "work").glob("sub-*")) + list(tmp.glob("grade-*"))
        assert left, "nothing was left to sweep: the test proves nothing"
        server.close_clients()
        server.start()
        assert all(not p.exists() for p in left), [p for p in left if p.exists()]
        assert wait_done(server.client(tokens["ivy"]), sid, timeout=120)["verdict"] == "passed"
        assert [r["reports_written"] for r in store_rows(data)] == [1]
    finally:
        server.stop()
    assert not list((data / "work").glob("sub-*"))


CLOSING = textwrap.dedent("""
    import sys, time
    from harness.core.process import TermWhileBusy

    term = TermWhileBusy()
    for line in sys.stdin:
        with term.busy():
            pass
    print("closing", flush=True)
    time.sleep(1.5)             # a warm pool closing its workers
    print("closed", flush=True)
""")


def test_sigterm_while_closing_lets_the_close_finish_and_while_grading_interrupts(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", CLOSING], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                         text=True)
    p.stdin.write("task\n")
    p.stdin.close()                                        # the parent's stop(): stdin first...
    assert p.stdout.readline().strip() == "closing"
    p.send_signal(signal.SIGTERM)                          # ...then SIGTERM 0.5 s later
    assert p.stdout.readline().strip() == "closed" and p.wait(timeout=10) == 0
    p.stdout.close()
    busy = subprocess.Popen([sys.executable, "-c", "import time\nfrom harness.core.process import TermWhileBusy\n"
                             "t = TermWhileBusy()\nprint('in', flush=True)\nwith t.busy():\n    time.sleep(30)\n"],
                            stdout=subprocess.PIPE, env=env, text=True)
    assert busy.stdout.readline().strip() == "in"
    time.sleep(0.2)
    t0 = time.monotonic()
    busy.send_signal(signal.SIGTERM)
    assert busy.wait(timeout=10) != 0 and time.monotonic() - t0 < 5   # KeyboardInterrupt: unwound at once
    busy.stdout.close()
