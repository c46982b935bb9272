"""The local backend's own cgroup per worker: a pids limit and a memory limit that bind root (RLIMIT_NPROC does
not), cleanup of everything in it, the sweep of dead graders' cgroups, and the fallback where there are none.

Tests that need root and a writable cgroup hierarchy skip outside CI with the reason; in CI (CI=true, root on a
cgroup v1 machine) they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.grading.engine import grade
from harness.sandbox import Limits, cgroup, local

from .conftest import IN_CI
from .helpers import validate, write

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "reference" / "mha_numpy.py"


def _need_cgroups() -> None:
    sup = cgroup.support()
    if sup.pids and sup.memory:
        return
    if IN_CI:
        pytest.fail(f"CI must run the local backend with its cgroup limits: {sup.reason}")
    pytest.skip(f"no cgroup pids+memory limits here ({sup.reason}); these tests never skip when CI=true")


@pytest.fixture(params=["cold", "warm"])
def box(request):
    """The local backend, cold (a fresh process) or warm (forked by a zygote)."""
    _need_cgroups()
    if request.param == "cold":
        yield "local"
        return
    if not local.mount_isolation():
        if IN_CI:
            pytest.fail("CI must allow the local zygote (mount namespaces)")
        pytest.skip("warm local workers need mount namespaces")
    from harness.session.warm import WarmPool

    with WarmPool("local", size=0) as pool:
        yield pool


def _tagged(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker in Path(f"/proc/{pid}/comm").read_text():
                found.append(pid)
        except OSError:
            continue
    return found


FORK_UNTIL_REFUSED = """\
import ctypes, errno, os, time

def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    made, t0 = 0, time.monotonic()
    while made < 10_000:
        try:
            pid = os.fork()
        except OSError as exc:
            raise RuntimeError(f"forks={made} errno={errno.errorcode.get(exc.errno)} "
                               f"after={time.monotonic() - t0:.3f}s") from None
        if pid == 0:
            ctypes.CDLL(None).prctl(15, b"@@MARKER@@", 0, 0, 0)
            while True:
                time.sleep(1)
        made += 1
    raise RuntimeError(f"forks={made} never refused")
"""


def test_a_fork_bomb_is_stopped_by_the_pids_limit(box, tmp_path):
    """Forks as root until refused: the kernel refuses (EAGAIN) at the cgroup's pids limit, at once, not the wall
    clock; the cgroup counted the refusals; nothing survives; no cgroup is left."""
    marker = f"fb{uuid.uuid4().hex[:10]}"
    path = write(tmp_path, "bomb.py", FORK_UNTIL_REFUSED.replace("@@MARKER@@", marker))
    pids = 24
    t0 = time.monotonic()
    report = grade(exercise="mha", submission=path, track="numpy", sandbox=box,
                   limits={"pids": pids, "call_timeout_s": 30, "max_restarts": 0})
    elapsed = time.monotonic() - t0
    validate(report)
    first = report.tests[0]
    assert first.status == "error", (first.status, first.message)
    assert "errno=EAGAIN" in first.message, first.message
    made = int(first.message.split("forks=")[1].split()[0])
    assert 0 < made < pids, first.message  # the worker and its parents count too
    assert float(first.message.split("after=")[1].split("s")[0]) < 5.0
    assert elapsed < 25, "the wall clock, not the pids limit, ended it"
    assert report.environment["cgroup"] == {"version": cgroup.support().version, "pids_limit": True,
                                            "memory_limit": True}
    deadline = time.monotonic() + 5
    while _tagged(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _tagged(marker) == [], "forked processes survived the worker"
    assert cgroup.leftovers() == []


def test_the_redteam_fork_bomb_hits_the_limit_and_leaves_nothing(tmp_path):
    """tests/redteam/fork_bomb.py (2**8 processes sleeping forever) as root: the cgroup refuses forks past the
    limit (its pids.events count them), the hang is a timeout, and nothing tagged or no cgroup survives."""
    _need_cgroups()
    marker = f"fb{uuid.uuid4().hex[:10]}"
    source = (ROOT / "tests" / "redteam" / "fork_bomb.py").read_text().replace("@@MARKER@@", marker)
    path = write(tmp_path, "bomb.py", source)
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="local",
                   limits={"pids": 16, "call_timeout_s": 3, "max_restarts": 0})
    validate(report)
    first = report.tests[0]
    assert first.status == "timeout"
    assert first.diagnostics.get("cgroup_pids_refused", 0) > 0, first.diagnostics
    assert _tagged(marker) == []
    assert cgroup.leftovers() == []


MEMORY_ACROSS_PROCESSES = """\
import ctypes, os, time
import numpy as np

def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: a warm worker (nobody) may then write /proc/self
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")  # the OOM killer's first choice: the worker itself
    for _ in range(2):
        if os.fork() == 0:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("0")
            hog = np.ones(260 << 17)  # 260 MB touched: each process stays well under RLIMIT_AS
            time.sleep(60)
            os._exit(0)
    time.sleep(0.3)
    hog = np.ones(260 << 17)
    time.sleep(60)
"""


def test_memory_across_processes_is_stopped_by_the_memory_cgroup(box, tmp_path):
    """Three processes of 260 MB each under memory_mb=600: RLIMIT_AS (per process) never fires; the memory cgroup
    (their sum) OOM-kills the worker, reported as status memory with the cgroup's evidence."""
    path = write(tmp_path, "hog.py", MEMORY_ACROSS_PROCESSES)
    report = grade(exercise="mha", submission=path, track="numpy", sandbox=box,
                   limits={"memory_mb": 600, "call_timeout_s": 20, "max_restarts": 0})
    validate(report)
    first = report.tests[0]
    assert first.status == "memory", (first.status, first.message, first.diagnostics)
    assert first.diagnostics.get("oom_killed") is True
    assert first.diagnostics.get("cgroup_oom_kills", 1) >= 1
    assert cgroup.leftovers() == []


def test_kill_and_remove_take_everything_in_the_cgroup_even_what_left_the_process_group():
    """A process that made itself a new session (killpg misses it) is still killed with the cgroup, which is
    then removed."""
    _need_cgroups()
    group = cgroup.create(Limits(pids=16, memory_mb=256))
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\ntime.sleep(300)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], preexec_fn=group.join)
    try:
        deadline = time.monotonic() + 10
        while len(group.members()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        members = group.members()
        assert len(members) == 2 and proc.pid in members
        assert group.remove()
        proc.wait(timeout=5)
        for pid in members:
            assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        assert all(not os.path.exists(d) for d in (os.path.join(p, group.name) for p in cgroup.support().dirs.values()))
        assert cgroup.leftovers() == []
    finally:
        proc.kill()
        group.remove()


def _made_by(pid: int) -> cgroup.WorkerCgroup:
    """A worker cgroup named as if grader ``pid`` had made it."""
    group = cgroup.WorkerCgroup(cgroup.support(), pids=8, memory_mb=128)
    renamed = {}
    for controller, path in group.dirs.items():
        target = os.path.join(os.path.dirname(path), f"{cgroup.PREFIX}{pid}-1")
        os.rename(path, target)
        renamed[controller] = target
    group.dirs = renamed
    return group


def test_cgroups_of_dead_graders_are_swept():
    """A worker cgroup named for a grader that is gone (killed outright), with a process still in it: the sweep
    kills the process and removes the cgroup; our own cgroups are left alone."""
    _need_cgroups()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    sup = cgroup.support()
    stale = _made_by(dead.pid)
    ours = cgroup.WorkerCgroup(sup, pids=8, memory_mb=128)
    renamed = stale.dirs
    proc = subprocess.Popen(["sleep", "300"], preexec_fn=stale.join)
    try:
        removed = cgroup.sweep_now()
        # a grader beside this test (xdist, another `grade`) sweeps at its first worker and may have been first
        assert f"{cgroup.PREFIX}{dead.pid}-1" in removed or not any(os.path.exists(p) for p in renamed.values())
        assert proc.wait(timeout=5) == -9
        assert not any(os.path.exists(p) for p in renamed.values())
        assert all(os.path.exists(p) for p in ours.dirs.values())
    finally:
        proc.kill()
        stale.remove()
        ours.remove()


def test_without_cgroups_it_still_grades_and_the_report_and_doctor_say_so(tmp_path):
    """No cgroup (here: GRADER_LOCAL_NO_CGROUP=1; elsewhere not root, no writable hierarchy): the reference still
    passes, the report's environment.cgroup says the limits were not in force and why, and the doctor warns."""
    env = {**os.environ, cgroup.DISABLE_ENV: "1"}
    out = tmp_path / "r.json"
    done = subprocess.run(["grade", "mha", str(REF), "--sandbox", "local", "-q", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    data = validate(json.loads(out.read_text()))
    assert data["environment"]["cgroup"] == {"version": None, "pids_limit": False, "memory_limit": False,
                                             "reason": f"disabled by {cgroup.DISABLE_ENV}"}
    doctor = subprocess.run([sys.executable, "-c", "from harness.sandbox.local import doctor_checks\n"
                             "for c in doctor_checks(): print(c.name, c.ok, c.detail, c.hint, sep='|')"],
                            env=env, capture_output=True, text=True, timeout=60)
    lines = [ln.split("|") for ln in doctor.stdout.splitlines()]
    assert [(n, ok) for n, ok, *_ in lines] == [("local pids limit", "False"), ("local memory limit", "False")]
    assert all("NOT in force" in d and cgroup.DISABLE_ENV in d for _, _, d, _ in lines)
    assert "RLIMIT_NPROC does not bind root" in lines[0][2]


def test_not_root_or_v2_without_controllers_falls_back_with_a_reason(monkeypatch):
    monkeypatch.delenv(cgroup.DISABLE_ENV, raising=False)
    cgroup.support.cache_clear()
    try:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
        sup = cgroup.support()
        assert (sup.version, sup.pids, sup.memory) == (None, False, False) and "not root" in sup.reason
        assert local.LocalSandbox().describe()["cgroup"]["reason"] == sup.reason
        monkeypatch.undo()
        cgroup.support.cache_clear()
        unified = "/sys/fs/cgroup/unified"  # a hybrid machine's cgroup2 mount, every controller bound to v1
        controllers = Path(unified, "cgroup.controllers")
        if os.geteuid() == 0 and controllers.exists() and not controllers.read_text().split():
            monkeypatch.setattr(cgroup, "ROOT", unified)
            sup = cgroup.support()
            assert sup.version is None and "cgroup v2" in sup.reason, sup
    finally:
        monkeypatch.undo()
        cgroup.support.cache_clear()


def test_doctor_reports_the_limits_in_force():
    _need_cgroups()
    checks = {c.name: c for c in local.doctor_checks()}
    assert checks["local pids limit"].ok and checks["local memory limit"].ok
    assert f"cgroup {cgroup.support().version}" in checks["local pids limit"].detail


def test_making_a_cgroup_costs_little():
    """The cgroup work adds ~milliseconds per worker (made before a warm worker is idle, off the hot path)."""
    _need_cgroups()
    t0 = time.perf_counter()
    for _ in range(10):
        cgroup.create(Limits()).remove()
    assert (time.perf_counter() - t0) / 10 < 0.05


def test_the_sweep_leaves_the_cgroups_of_graders_that_run_beside_it():
    """Graders run side by side (a batch's children, `grade serve`'s workers, tests under xdist): a sweep takes
    only the cgroups of graders that are gone, never a running one's, nor the processes in it."""
    _need_cgroups()
    other = subprocess.Popen(["sleep", "300"])  # stands for another grader, alive
    group = _made_by(other.pid)
    renamed = group.dirs
    inside = subprocess.Popen(["sleep", "300"], preexec_fn=group.join)
    try:
        assert f"{cgroup.PREFIX}{other.pid}-1" not in cgroup.sweep_now()
        assert all(os.path.exists(p) for p in renamed.values())
        assert inside.poll() is None, "the sweep killed a live grader's worker"
    finally:
        inside.kill()
        inside.wait()
        other.kill()
        other.wait()
        group.remove()


def test_a_grader_killed_outright_leaves_cgroups_that_the_next_one_sweeps(tmp_path):
    """SIGKILL the grader while its worker runs: the worker dies with it (PDEATHSIG), its cgroup stays behind
    named for the dead grader, and the next grader's sweep removes it."""
    _need_cgroups()
    sub = write(tmp_path, "sleepy.py", "import time\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                                       "    time.sleep(300)\n")
    grader = subprocess.Popen(["grade", "mha", str(sub), "--sandbox", "local", "-q", "--timeout", "120"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not cgroup.leftovers(grader.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cgroup.leftovers(grader.pid), "the grader never made a worker cgroup"
        time.sleep(0.5)  # the worker is in its call
    finally:
        grader.kill()
    # not reaped yet, the killed grader is a zombie that every sweep (ours, or another grader's running beside
    # this test) still counts as alive: its cgroups stay
    left = cgroup.leftovers(grader.pid)
    assert left
    grader.wait()
    cgroup.sweep_now()
    # gone now: taken by this sweep, or by another grader's first sweep in between (xdist)
    assert cgroup.leftovers(grader.pid) == []
