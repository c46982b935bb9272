"""Warm workers (harness/session/warm.py): a local zygote and a pool of warm Docker containers.

Each submission still gets its own single-use worker: two consecutive submissions through the same zygote or
pool see nothing of each other (files, environment, modules, random state, thread settings, descriptors); a
zygote or warm worker that fails before the candidate's code runs is the grader's fault (replaced, retried, then
an InfrastructureError), never the candidate's; the pool leaves nothing behind when closed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.errors import InfrastructureError
from harness.grading.engine import grade
from harness.sandbox import Limits

from .helpers import descendants, validate, write

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI") == "true"
LIMITS = {"call_timeout_s": 5, "max_restarts": 1, "startup_timeout_s": 60}

# Reports what it finds of an earlier submission, then leaves traces of its own everywhere it can, and raises
# with what it saw (the report's message is the channel back to the test).
PROBE = r'''
import json, os, random, sys, tempfile
import numpy as np
state = {
    "tmp": sorted(os.listdir("/tmp")), "home": sorted(os.listdir(os.path.expanduser("~"))),
    "tmpdir": sorted(os.listdir(tempfile.gettempdir())),
    "env": sorted(os.environ), "leak_env": os.environ.get("WARM_LEAK"),
    "modules": sorted(m for m in sys.modules if "leak" in m), "fds": sorted(os.listdir("/proc/self/fd")),
    "random": random.random(), "np_random": float(np.random.random()),
    "uid": os.getuid(), "pid": os.getpid(), "cwd": os.getcwd(),
    "site": [sys.flags.no_site, type(exit).__name__, type(help).__name__],
    "pth_code": sorted(m for m in sys.modules if m in ("sitecustomize", "_distutils_hack") or "editable" in m),
    "site_dirs": [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))],
}
try:
    import torch
    state["torch_threads"] = torch.get_num_threads()
    state["torch_rand"] = float(torch.rand(1))
    torch.set_num_threads(3)
except ImportError:
    pass
for folder in ("/tmp", os.path.expanduser("~"), tempfile.gettempdir()):
    try:
        with open(os.path.join(folder, f"warm-leak-{os.getpid()}"), "w") as f:
            f.write("left by an earlier submission")
    except OSError:
        pass
os.environ["WARM_LEAK"] = "1"
sys.modules["warm_leak_module"] = type(sys)("warm_leak_module")
kept = [os.open("/proc/self/status", os.O_RDONLY) for _ in range(5)]
np.random.seed(1234)
random.seed(1234)
raise RuntimeError("STATE " + json.dumps(state, separators=(",", ":")))
'''


def _state(report) -> dict:
    message = report.tests[0].message
    assert "STATE " in message, message
    return json.JSONDecoder().raw_decode(message.split("STATE ", 1)[1])[0]


def _local_ready():
    from harness.sandbox import local

    if not local.mount_isolation():
        if IN_CI:
            pytest.fail("CI must provide the local backend's namespaces")
        pytest.skip("no mount-namespace isolation here: the local warm pool is cold")


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def pool(request):
    from harness.session.warm import WarmPool

    if request.param == "local":
        _local_ready()
    with WarmPool(request.param, size=1) as p:
        yield p
    assert p.owned() == {"pids": [], "containers": []}
    if request.param == "docker":
        assert _no_containers_of_ours() == [], "the warm pool left containers behind"


def _no_containers_of_ours():
    from harness.sandbox.image import leftover_containers

    return [n for n in leftover_containers() if n.startswith(f"grader-{os.getpid()}-")]


# docker-numpy in the matrix group (CI): docker-torch checks the same and torch's threads and generator besides
@pytest.mark.parametrize("pool,track", [
    ("local", "numpy"), ("local", "torch"),
    pytest.param("docker", "numpy", marks=[pytest.mark.docker, pytest.mark.matrix]),
    pytest.param("docker", "torch", marks=pytest.mark.docker)], indirect=["pool"])
def test_consecutive_submissions_see_nothing_of_each_other(pool, track, tmp_path):
    sub = write(tmp_path, "probe.py", PROBE + ("\nclass MultiHeadAttention: pass\n" if track == "torch" else
                                               "\ndef mha(*a, **k): pass\n"))
    states = []
    for _ in range(3):
        report = grade(exercise="mha", submission=sub, track=track, sandbox=pool, limits=LIMITS)
        validate(report)
        assert report.verdict == "error" and report.environment["warm"] is True
        states.append(_state(report))
    first, *later = states
    for state in later:
        for key in ("tmp", "home", "tmpdir", "env", "modules", "fds", "uid", "cwd"):
            assert state[key] == first[key], (key, first[key], state[key])
        assert state["leak_env"] is None and state["modules"] == []
        assert not any("warm-leak" in n for n in state["tmp"] + state["home"] + state["tmpdir"])
        if track == "torch":
            assert state["torch_threads"] == 1  # the first set 3
    # Python's, NumPy's and torch's generators are reseeded from the OS for every worker: no two share a stream
    for key in ("random", "np_random") + (("torch_rand",) if track == "torch" else ()):
        assert len({s[key] for s in states}) == 3, key
    assert len(first["fds"]) <= 6, first["fds"]  # 0, 1, 2, the protocol's copy of 1, the input exchange, the listing
    if pool.name == "local":
        assert first["pid"] == 2  # its own PID namespace, under a minimal init
        assert first["uid"] != 0 or os.getuid() != 0  # as root, the worker runs as nobody


def test_cold_and_warm_workers_see_the_same_world(tmp_path):
    """Beside the warm worker's known differences (its own PID namespace's numbering, no root), a probe sees the
    same environment, files and settings from a warm worker as from a cold one (but for the worker's own
    code, which a cold worker reads from /tmp/.worker and a warm one already has in memory)."""
    from harness.session.warm import WarmPool

    _local_ready()
    sub = write(tmp_path, "probe.py", PROBE + "\nclass MultiHeadAttention: pass\n")
    cold = _state(grade(exercise="mha", submission=sub, track="torch", sandbox="local", limits=LIMITS))
    with WarmPool("local", size=0) as pool:
        warm = _state(grade(exercise="mha", submission=sub, track="torch", sandbox=pool, limits=LIMITS))
    for key in ("home", "tmpdir", "env", "cwd", "torch_threads", "site", "pth_code", "site_dirs"):
        assert warm[key] == cold[key], (key, cold[key], warm[key])
    # issue 27: both start without site (-S): its folders given, its builtins set, no .pth file's code run
    assert cold["site"] == [1, "Quitter", "_Helper"] and cold["pth_code"] == [] and cold["site_dirs"]
    assert warm["tmp"] == [n for n in cold["tmp"] if n != ".worker"]  # its worker code is already in memory


# At import a 2 MiB array is kept and a 24 MiB one made and freed; at the first call the probe reports whether the
# kept one lies in the heap (malloc mmaps only from 32 MiB, or, metered, from 128 KiB) and the heap's size (what
# malloc kept of the freed one, unless the worker handed it back before its answer)
MALLOC_PROBE = r'''
import json
import numpy as np
kept = np.ones(1 << 18)
freed = np.ones(3 << 20)
freed += 1
del freed


def _heap_mib():
    size = 0
    for line in open("/proc/self/maps"):   # the heap may show as several mappings
        if line.rstrip().endswith("[heap]"):
            lo, hi = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
            size += hi - lo
    return size >> 20


def _in_heap(address):
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
        if lo <= address < hi:
            return line.rstrip().endswith("[heap]")
    return None


def mha(*args, **kwargs):
    raise RuntimeError("STATE " + json.dumps({"heap_mib": _heap_mib(), "kept_in_heap": _in_heap(kept.ctypes.data)}))


flash_attention = mha


class MultiHeadAttention:
    def __init__(self, *args, **kwargs):
        mha()
'''


@pytest.mark.parametrize("sandbox,track", [
    ("cold", "numpy"), ("warm", "numpy"), ("warm", "torch"),
    pytest.param("cold", "torch", marks=pytest.mark.matrix),
    pytest.param("docker", "numpy", marks=[pytest.mark.docker, pytest.mark.matrix]),
    pytest.param("docker", "torch", marks=[pytest.mark.docker, pytest.mark.matrix])])
def test_a_worker_holds_what_malloc_keeps_free_only_where_the_host_does_not_meter_it(sandbox, track, tmp_path):
    """issue 27: every worker's malloc keeps what it frees for reuse (a large array's pages faulted in once, not on
    every call); flash_attention's workers, whose memory the host measures, hold only what they hold between calls:
    on the NumPy track they hand what malloc keeps free back before every answer, on the torch track every large
    allocation is mmapped and returned on free."""
    from harness.session.warm import WarmPool

    if sandbox != "docker":
        _local_ready()
    sub = write(tmp_path, "probe.py", MALLOC_PROBE)
    seen = {}
    with WarmPool("local", size=0) if sandbox == "warm" else contextlib.nullcontext(
            "local" if sandbox == "cold" else "docker") as box:
        for exercise in ("mha", "flash_attention"):
            report = grade(exercise=exercise, submission=sub, track=track, sandbox=box, limits=LIMITS)
            assert report.environment.get("warm", False) is (sandbox == "warm")
            assert report.environment["limits"]["metered_memory"] is (exercise == "flash_attention")
            seen[exercise] = _state(report)
    assert seen["mha"]["kept_in_heap"] is True, seen   # not metered: only 32 MiB and more is mmapped
    if track == "numpy":   # metered: reusing, and what is free handed back before the import's answer
        assert seen["flash_attention"]["kept_in_heap"] is True, seen
        assert seen["mha"]["heap_mib"] - seen["flash_attention"]["heap_mib"] >= 20, seen   # the freed 24 MiB
    else:                  # metered: 128 KiB and more mmapped (torch's own heap is ~80 MiB here: not compared)
        assert seen["flash_attention"]["kept_in_heap"] is False, seen


def test_a_dead_zygote_is_replaced_and_never_charged(tmp_path):
    from harness.session.warm import WarmPool

    _local_ready()
    ref = ROOT / "reference" / "mha_numpy.py"
    with WarmPool("local", size=1) as pool:
        assert grade(exercise="mha", submission=ref, track="numpy", sandbox=pool).verdict == "passed"
        zygote = pool._zygotes["numpy"]
        os.killpg(zygote.proc.pid, signal.SIGKILL)  # it and every worker it forked (the idle spare) die
        zygote.proc.wait(timeout=10)
        report = grade(exercise="mha", submission=ref, track="numpy", sandbox=pool)
        assert report.verdict == "passed", [(t.id, t.message) for t in report.tests if t.status != "passed"]
        assert pool.stats["zygotes"] == 2


def test_a_warm_worker_dying_before_boot_is_retried_with_another(tmp_path, monkeypatch):
    """The pool hands out a worker that dies before it has read the submission: the session sees a death
    before boot (the grader's fault) and takes another warm worker; the candidate is not charged."""
    from harness.session.warm import WarmPool

    _local_ready()
    ref = ROOT / "reference" / "mha_numpy.py"
    with WarmPool("local", size=0) as pool:
        real_take = pool._take
        killed = []

        def take_and_kill(track, limits):
            handle = real_take(track, limits)
            if not killed:
                handle.kill()
                # kill() gives up waiting after a few seconds on a loaded machine; the worker must be dead (its
                # zygote has reaped it) before the pool writes the submission, or it could read it and boot
                # first. Wait for that death, however long it takes: no sleep, no race.
                assert handle.proc.wait(timeout=120) is not None
                killed.append(handle)
            return handle

        monkeypatch.setattr(pool, "_take", take_and_kill)
        report = grade(exercise="mha", submission=ref, track="numpy", sandbox=pool)
        assert killed and killed[0].proc.poll() is not None
        assert report.verdict == "passed" and report.environment["worker_starts"] == 2


def test_a_pool_that_cannot_provide_a_worker_is_an_infrastructure_error(tmp_path, monkeypatch):
    from harness.session.warm import WarmPool

    _local_ready()
    with WarmPool("local", size=0) as pool:
        def broken(track, limits):
            raise InfrastructureError("the zygote could not fork (injected)")

        monkeypatch.setattr(pool, "_spawn_idle", broken)
        with pytest.raises(InfrastructureError, match="warm local pool could not provide a worker"):
            grade(exercise="mha", submission=ROOT / "reference" / "mha_numpy.py", track="numpy", sandbox=pool)


def test_a_worker_that_never_becomes_idle_is_replaced_then_infrastructure(tmp_path, monkeypatch):
    """A warm worker that hangs in its set-up: the pool gives up on it after startup_timeout_s, tries again,
    and after ATTEMPTS the submission is an InfrastructureError (exit 3), not a verdict."""
    from harness.session import warm
    from harness.session.warm import WarmPool

    _local_ready()

    def never_idle(handle, deadline):
        time.sleep(0.05)
        raise InfrastructureError("a warm worker did not become idle in time")

    monkeypatch.setattr(warm, "_read_frame", never_idle)
    with WarmPool("local", size=0) as pool:
        with pytest.raises(InfrastructureError) as err:
            grade(exercise="mha", submission=ROOT / "reference" / "mha_numpy.py", track="numpy", sandbox=pool,
                  limits={"startup_timeout_s": 1})
        assert len(err.value.context["attempts"]) == warm.ATTEMPTS


def test_warm_reference_passes_and_runs_are_fast(pool):
    for track in ("numpy", "torch"):
        ref = ROOT / "reference" / f"mha_{track}.py"
        pool.prewarm(track, Limits(), wait=True)
        t = time.monotonic()
        report = grade(exercise="mha", submission=ref, track=track, sandbox=pool)
        took = time.monotonic() - t
        assert report.verdict == "passed" and report.environment["warm"] is True
        assert report.environment["sandbox"] == pool.name
        assert took < 30


def test_grade_warm_true_uses_one_pool_per_process(tmp_path):
    from harness.session import warm

    _local_ready()
    ref = ROOT / "reference" / "mha_numpy.py"
    try:
        first = grade(exercise="mha", submission=ref, track="numpy", sandbox="local", warm=True)
        pool = warm.shared_pool("local")
        second = grade(exercise="mha", submission=ref, track="numpy", sandbox="local", warm=True)
        assert first.verdict == second.verdict == "passed"
        assert first.environment["warm"] and second.environment["warm"]
        assert warm.shared_pool("local") is pool and pool.stats["zygotes"] == 1
    finally:
        warm.close_shared()


def test_grade_run_stays_one_shot(tmp_path, grade_cli):
    result = grade_cli("mha", ROOT / "reference" / "mha_numpy.py", "--sandbox", "local", "--json",
                       tmp_path / "r.json", "-q")
    assert result.returncode == 0, result.stderr
    env = json.loads((tmp_path / "r.json").read_text())["environment"]
    assert "warm" not in env


@pytest.mark.parametrize("flag,warm", [("--warm", True), ("--no-warm", False), (None, True)])
def test_batch_warm_switch(tmp_path, grade_cli, flag, warm):
    """Local: warm by default (where it pays), both tracks; --warm / --no-warm force either (a NumPy file shows
    the switch: a torch file would only add its zygote's, or its cold workers', import of torch)."""
    _local_ready()
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("mha_numpy.py", "mha_torch.py") if flag is None else ("mha_numpy.py",):
        (subs / name).write_text((ROOT / "reference" / name).read_text())
    out = tmp_path / "out"
    result = grade_cli("batch", subs, "--exercise", "mha", "--sandbox", "local", "--out", out,
                       *([flag] if flag else []))
    assert result.returncode == 0, result.stderr + result.stdout
    reports = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(reports) == len(list(subs.iterdir()))
    assert all(bool(r["environment"].get("warm")) is warm for r in reports)


def test_warm_workers_are_the_batch_default_only_where_they_pay():
    from harness.grading.engine import warm_pays

    assert warm_pays("local") is True
    assert warm_pays("docker") is False  # every single-use container imports torch, warm or not


def test_closing_the_pool_leaves_nothing(tmp_path):
    from harness.session.warm import WarmPool

    _local_ready()
    pool = WarmPool("local", size=2)
    pool.prewarm("torch", wait=True)
    pool.prewarm("numpy", wait=True)
    pids = pool.owned()["pids"]
    assert len(pids) == 2
    # the zygotes fork from a single thread (a process that ran multi-threaded OpenMP work must never fork)
    assert pool._zygotes["torch"].threads == pool._zygotes["numpy"].threads == 1
    pool.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: gone
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert not [line for line in out.splitlines() if "zygote.py" in line and str(os.getpid()) in line]


def test_a_batchs_grading_processes_share_one_zygote_per_track(tmp_path):
    """grade batch --jobs N: the batch starts one zygote per track and every grading process attaches to it
    through a control connection of its own, instead of importing torch once per process."""
    import sys

    from harness.session.warm import SharedZygotes

    _local_ready()
    shared = SharedZygotes({"numpy"})
    try:
        script = ("import json\nfrom harness.grading.engine import grade\nfrom harness.session import warm\n"
                  f"r = grade(exercise='mha', submission={str(ROOT / 'reference' / 'mha_numpy.py')!r}, "
                  "track='numpy', sandbox='local', warm=True)\n"
                  "print(json.dumps({'verdict': r.verdict, 'stats': dict(warm.shared_pool('local').stats)}))\n")
        outs = []
        for _ in range(2):  # two grading processes, one zygote
            env, fds = shared.child_env()
            try:
                done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                                      env={**os.environ, **env}, pass_fds=fds)
            finally:
                for fd in fds:
                    os.close(fd)
            assert done.returncode == 0, done.stderr[-2000:]
            outs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        for out in outs:
            assert out["verdict"] == "passed"
            assert out["stats"].get("attached") == 1 and not out["stats"].get("zygotes"), out
        assert shared.zygotes["numpy"].alive()
    finally:
        shared.close()
    assert not shared.zygotes["numpy"].alive()


@pytest.mark.docker
def test_docker_containers_without_the_warm_up_forward(monkeypatch):
    """grade batch sets ATTN_GRADER_WARM_UP=0: its warm containers only import (no warm-up forward)."""
    from harness.session.warm import WarmPool

    monkeypatch.setenv("ATTN_GRADER_WARM_UP", "0")
    with WarmPool("docker", size=0) as pool:
        assert pool.warm_up is False
        report = grade(exercise="mha", submission=ROOT / "reference" / "mha_torch.py", track="torch", sandbox=pool)
        assert report.verdict == "passed" and report.environment["warm"] is True
        assert pool.drain(60)
    assert _no_containers_of_ours() == []


def test_an_interrupted_start_leaves_nothing_for_close_to_wait_on(tmp_path, monkeypatch):
    """SIGTERM in a grading process raises KeyboardInterrupt in whatever the main thread is doing, e.g. waiting
    for the spawner to start a worker (no idle one). The worker started anyway is stopped once it is up, and
    close() returns at once instead of waiting a minute for it to leave `_starting` (a batch's grading process
    outlived its killed batch that way, about one kill in ten)."""
    import threading

    from harness.session.warm import WarmPool

    _local_ready()
    with WarmPool("local", size=0) as pool:
        started, up, stopped = threading.Event(), threading.Event(), []
        real_start, real_submit = pool._start_one, pool._spawner.submit

        def start_one(track, limits):
            started.set()
            handle, closed = real_start(track, limits)
            monkeypatch.setattr(handle, "cleanup", lambda real_cleanup=handle.cleanup: (stopped.append(handle),
                                                                                          real_cleanup()))
            up.set()
            return handle, closed

        class Interrupted:
            """The spawner's future, whose wait is interrupted (as by SIGTERM) once the start is under way."""

            def __init__(self, future):
                self.future = future

            def result(self):
                assert started.wait(60)
                raise KeyboardInterrupt

            def add_done_callback(self, callback):
                self.future.add_done_callback(callback)

        monkeypatch.setattr(pool, "_start_one", start_one)
        monkeypatch.setattr(pool._spawner, "submit", lambda fn, *args: Interrupted(real_submit(fn, *args)))
        with pytest.raises(KeyboardInterrupt):
            pool._spawn_idle("numpy", Limits())
        assert up.wait(60)   # the worker starts after all, before the pool closes (as the interrupted grade unwinds)
        t0 = time.monotonic()
        pool.close()
        assert time.monotonic() - t0 < 20 and not pool._starting
        assert len(stopped) == 1 and stopped[0].proc.poll() is not None


def _nspid(pid: int) -> list[int]:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("NSpid:"))
    return [int(n) for n in line.split()[1:]]


def test_the_zygote_forks_each_worker_init_into_a_pid_namespace_of_its_own():
    """issue 27: the zygote forks G, its worker's init, straight into a new PID namespace (no process in between)
    and goes back to its own namespace for the next fork: every child of the zygote is pid 1 of a namespace no
    other worker shares, with the worker (pid 2) its only child, and the zygote's own children-to-be stay in
    the zygote's namespace."""
    from harness.session.warm import WarmPool

    _local_ready()
    with WarmPool("local", size=3) as pool:
        for _ in range(3):
            pool.prewarm("numpy", wait=True)
        forks = {p for p in descendants({pool._zygotes["numpy"].proc.pid})
                 if b"zygote.py" in Path(f"/proc/{p}/cmdline").read_bytes()}   # the zygote and what it forked
        (zygote,) = forks - descendants(forks)
        inits = [int(k) for k in Path(f"/proc/{zygote}/task/{zygote}/children").read_text().split()]
        assert len(inits) == 3
        assert os.readlink(f"/proc/{zygote}/ns/pid_for_children") == os.readlink(f"/proc/{zygote}/ns/pid")
        assert len({os.readlink(f"/proc/{g}/ns/pid") for g in inits} | {os.readlink(f"/proc/{zygote}/ns/pid")}) == 4
        for g in inits:
            assert _nspid(g)[-1] == 1 and len(_nspid(g)) == len(_nspid(zygote)) + 1
            (worker,) = descendants({g})
            assert _nspid(worker)[-1] == 2
            assert os.readlink(f"/proc/{worker}/ns/pid") == os.readlink(f"/proc/{g}/ns/pid")


FORK_INTO_PID_NS = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import zygote

own = os.open("/proc/self/ns/pid", os.O_RDONLY)
home = lambda: os.readlink("/proc/self/ns/pid_for_children") == os.readlink("/proc/self/ns/pid")
real_fork = os.fork
def refused():
    raise OSError(11, "fork refused")
os.fork = refused
try:
    zygote._fork_into_pid_namespace(own)
except OSError:
    pass
os.fork = real_fork
assert home(), "a refused fork left the next children in a namespace of their own"
r, w = os.pipe()
pid = zygote._fork_into_pid_namespace(own)
if pid == 0:
    os.write(w, str(os.getpid()).encode())
    os._exit(0)
assert home(), "the zygote did not go back to its own PID namespace"
os.waitpid(pid, 0)
print(os.read(r, 16).decode())
"""


def test_a_fork_the_kernel_refuses_leaves_the_zygote_in_its_own_pid_namespace(tmp_path):
    """issue 27: the zygote unshares the PID namespace for one fork; whether the fork happens or not, it goes back
    to its own (else its next workers would share a namespace, or it could never unshare again)."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail("CI runs as root")
        pytest.skip("unsharing a PID namespace needs root")
    script = tmp_path / "fork_into_pid_ns.py"
    script.write_text(FORK_INTO_PID_NS)
    out = subprocess.run([sys.executable, str(script), str(ROOT / "harness" / "worker")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"   # the child was pid 1 of a new namespace
