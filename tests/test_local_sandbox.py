"""The local sandbox: hangs, memory blow-ups, crashes and floods each become a status in a valid report."""

import os
from pathlib import Path

import pytest

from harness.grading.engine import grade
from harness.sandbox import Limits

from .helpers import namespaced_worker_facts, statuses, validate, worker_facts_line, write

REF = (Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py").read_text()
FAST = {"call_timeout_s": 1.0, "max_restarts": 1, "startup_timeout_s": 20}


def graded(tmp_path, body: str, **limits):
    path = write(tmp_path, "sub.py", body)
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="local", limits={**FAST, **limits})
    validate(report)
    return report


def test_infinite_loop_is_a_timeout_and_later_tests_still_get_a_status(tmp_path):
    report = graded(tmp_path, "def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n        pass\n")
    found = set(statuses(report).values())
    assert "timeout" in found
    assert found <= {"timeout", "error"}
    assert report.verdict == "failed" and report.score == 0
    timed_out = [t for t in report.tests if t.status == "timeout"]
    assert timed_out[0].diagnostics["wall_clock_limit_s"] == 1.0
    exhausted = [t for t in report.tests if t.status == "error"]
    assert all("restart budget" in t.message for t in exhausted)


def test_memory_blow_up_is_memory(tmp_path):
    report = graded(tmp_path, "import numpy as np\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                              "    return np.ones((50_000_000_000,))\n", max_restarts=3)
    assert set(statuses(report).values()) == {"memory"}


def test_hard_exit_in_the_call_is_an_error_with_evidence(tmp_path):
    report = graded(tmp_path, "import os\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    os._exit(0)\n")
    first = report.tests[0]
    assert first.status == "error"
    assert "exited" in first.message and first.diagnostics["exit_code"] == 0


def test_segfault_is_an_error(tmp_path):
    report = graded(tmp_path, "import ctypes\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                              "    ctypes.string_at(0)\n")
    first = report.tests[0]
    assert first.status == "error" and first.diagnostics.get("signal") == 11


def test_import_error_is_a_clean_error_report(tmp_path):
    report = graded(tmp_path, "import numpy as np\nraise RuntimeError('boom at import')\n")
    assert report.verdict == "error" and report.score == 0
    assert all(t.status == "error" for t in report.tests)
    assert "boom at import" in report.tests[0].message
    assert report.environment["worker_starts"] == 1


def test_syntax_error_and_missing_entry_point(tmp_path):
    report = graded(tmp_path, "def mha(X, Wq:\n")
    assert report.verdict == "error" and "SyntaxError" in report.tests[0].message
    report = graded(tmp_path, "def attention(X):\n    return X\n")
    assert report.verdict == "error" and "defines no 'mha'" in report.tests[0].message


def test_stdout_flood_is_output_limit(tmp_path):
    report = graded(tmp_path, "import sys\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                              "    while True:\n        print('\\x1b[31mjunk' * 1000)\n")
    assert report.tests[0].status == "output_limit"


def test_prints_do_not_corrupt_the_protocol(tmp_path):
    report = graded(tmp_path, "print('hello from import')\n" + REF.replace(
        "    b, s, d = X.shape\n", "    b, s, d = X.shape\n    print('noise', b, s, d)\n"))
    assert report.verdict == "passed", [(t.id, t.message) for t in report.tests if t.status != "passed"]


def test_worker_cannot_import_the_grader(tmp_path):
    report = graded(tmp_path, "def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
                              "    from graders.common import oracle\n"
                              "    return oracle.forward(X, Wq, Wk, Wv, Wo, h, mask=mask)\n")
    assert report.score == 0
    assert "not available in the sandbox" in report.tests[0].message


def test_limits_dataclass_overrides():
    lim = Limits().replace(call_timeout_s=3, unknown=1, memory_mb=None)
    assert lim.call_timeout_s == 3 and lim.memory_mb == Limits().memory_mb


def test_total_budget_bounds_a_slow_submission(tmp_path):
    body = REF.replace("    b, s, d = X.shape\n", "    import time\n    time.sleep(0.4)\n    b, s, d = X.shape\n")
    report = graded(tmp_path, body, total_timeout_s=2.0, call_timeout_s=5.0)
    found = statuses(report)
    assert "passed" in found.values()
    exhausted = [t for t in report.tests if "grading budget" in t.message]
    assert exhausted and all(t.status == "timeout" for t in exhausted)
    assert report.timings["total_s"] < 8
    # the candidate's own seconds (the worker's word, for benchmarks): each call that passed slept 0.4 s first
    assert report.timings["candidate_calls_s"] >= 0.4
    assert report.timings["candidate_calls_s"] <= report.timings["total_s"]


def test_scratch_of_a_killed_grader_is_swept(tmp_path):
    import subprocess
    import tempfile

    from harness.sandbox import local

    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid now belongs to no process
    stale = Path(tempfile.mkdtemp(prefix=f"grade-{dead.pid}-"))
    live = Path(tempfile.mkdtemp(prefix=f"grade-{os.getppid()}-"))
    local._sweep_scratch.cache_clear()
    graded(tmp_path, REF)
    assert not stale.exists()
    assert live.exists()
    live.rmdir()


def test_the_namespace_choice_is_kept_for_the_boot_but_a_refusal_is_asked_again(tmp_path, monkeypatch):
    import shutil
    import subprocess

    from harness.sandbox import local

    if not shutil.which("unshare"):
        pytest.skip("no unshare on this machine")  # CI images have util-linux
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    asked = []
    real_run = subprocess.run

    def run(cmd, *a, **kw):
        asked.append(cmd)
        return real_run(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "run", run)
    try:
        local.namespace_prefix.cache_clear()
        first = local.namespace_prefix()
        if not first:
            pytest.skip("unshare is refused here: nothing to keep")
        local.namespace_prefix.cache_clear()
        asked.clear()
        assert local.namespace_prefix() == first and asked == []  # the kept choice, no probe
        for kept in tmp_path.glob("attn-grader/namespaces-*"):
            kept.unlink()
        monkeypatch.setattr(subprocess, "run", lambda *a, **kw: subprocess.CompletedProcess(a, 1))
        local.namespace_prefix.cache_clear()
        assert local.namespace_prefix() == ()
        assert not list(tmp_path.glob("attn-grader/namespaces-*"))  # a refusal is never kept
    finally:
        local.namespace_prefix.cache_clear()


def _vfork_start_or_skip():
    from harness.sandbox import local

    if not (local.mount_isolation() and local._setpriv()):  # CI's machine has both (util-linux, root)
        if os.environ.get("CI") == "true":
            pytest.fail("CI's machine must allow the mount namespace and have setpriv --pdeathsig")
        pytest.skip("no mount namespace or no setpriv --pdeathsig here: the worker starts through preexec_fn")


FACTS = """import os, resource, sys
print("FACTS", resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_NOFILE),
      resource.getrlimit(resource.RLIMIT_CORE), open("/proc/self/cgroup").read().replace(chr(10), " "),
      file=sys.stderr, flush=True)
"""


def test_the_worker_starts_without_preexec_fn_yet_in_its_cgroup_and_under_its_rlimits(tmp_path, monkeypatch):
    """Issue 27: with the mount namespace and setpriv, the host's Popen runs no Python between fork and exec (so
    subprocess can vfork); mount_setup.py joins the worker's cgroup and sets its rlimits before the worker runs."""
    import subprocess

    from harness.sandbox.local import LocalSandbox

    _vfork_start_or_skip()
    hooks, real = [], subprocess.Popen

    def popen(cmd, *args, **kwargs):
        hooks.append((list(cmd), kwargs.get("preexec_fn")))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    limits = Limits().replace(memory_mb=1500, nofile=200)
    handle = LocalSandbox().start(track="numpy", entry="mha", submission=write(tmp_path, "sub.py", FACTS),
                                  limits=limits)
    try:
        facts = worker_facts_line(handle)
        cmd, hook = hooks[-1]
        assert hook is None and cmd[1:4] == ["--pdeathsig", "KILL", "--"]
        mb = 1024 * 1024
        assert f"({1500 * mb}, {1500 * mb}) (200, 200) (0, 0)" in facts
        assert handle.cgroup is not None and handle.cgroup.name in facts  # in its own cgroup, every hierarchy
        assert all(handle.cgroup.name in line for line in facts.split(" ") if ":memory:" in line or ":pids:" in line)
    finally:
        handle.kill()
        handle.cleanup()


KEEPER = """
import sys, time
from pathlib import Path
from harness.sandbox.base import Limits
from harness.sandbox.local import LocalSandbox
from harness.worker.wire import MAGIC

handle = LocalSandbox().start(track="numpy", entry="mha", submission=Path(sys.argv[1]), limits=Limits())
assert handle.proc.stdout.read(4) == MAGIC  # the boot frame: next, the worker imports the submission
time.sleep(0.5)                             # which hangs in its regex, holding the GIL
print(handle.proc.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_grader_killed_outright_takes_its_worker_down_with_it(tmp_path):
    """setpriv --pdeathsig KILL in place of die_with_parent: the grader dies, unshare gets SIGKILL, and
    unshare --kill-child takes the worker with it. The submission holds the GIL in one long C call (a regex that
    backtracks for ever) as it is imported, so the worker cannot see its input close and end by itself."""
    import signal
    import subprocess
    import sys
    import time

    _vfork_start_or_skip()
    sub = write(tmp_path, "sub.py", "import re\nre.match('(a*)*b', 'a' * 64)\n")
    grader = subprocess.Popen([sys.executable, "-c", KEEPER, str(sub)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
    try:
        unshare = int(grader.stdout.readline())
        deadline, family = time.monotonic() + 30, []
        while time.monotonic() < deadline and not family:  # unshare's child: the set-up, then the worker
            try:
                family = [int(p) for p in Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()]
            except OSError:
                break
            time.sleep(0.05)
        assert family, "the worker never started"
        os.kill(grader.pid, signal.SIGKILL)
        grader.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(p) for p in [unshare, *family]):
            time.sleep(0.05)
        assert not any(_alive(p) for p in [unshare, *family]), "the worker outlived its grader"
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait(timeout=30)
        grader.stdout.close()


INTERPRETER = """import os, sys
print("FACTS", sys.flags.isolated, sys.flags.no_site, sys.flags.dont_write_bytecode, os.path.basename(sys.argv[0]),
      os.path.basename(sys.modules["__main__"].__file__),
      [os.path.basename(a) for a in open("/proc/self/cmdline").read().split(chr(0)) if a.endswith(".py")],
      file=sys.stderr, flush=True)
"""


def test_the_worker_runs_in_the_mount_set_ups_own_interpreter_with_the_workers_flags(tmp_path):
    """Issue 27: mount_setup.py runs the worker's script in place (as runpy would) rather than executing a second
    interpreter: the worker's start saves an interpreter's start and the set-up's imports; the flags are the
    worker's own (-I -S -B: no site, its folders given), and the script is the worker's __main__."""
    facts = namespaced_worker_facts(tmp_path, INTERPRETER)
    assert facts.strip() == "1 1 1 worker.py worker.py ['mount_setup.py', 'worker.py', 'submission.py']"


def test_site_dirs_are_the_folders_site_adds_and_no_pth_code_runs(tmp_path, monkeypatch):
    """Issue 27: a local worker starts -S and is given site_dirs(): every folder `site` puts on an isolated
    interpreter's sys.path here, and from a .pth file its path lines only (comments, blanks and `import` lines
    skipped, a missing path left out), in site's order."""
    import json
    import site
    import subprocess
    import sys

    from harness.sandbox import local

    def path(*flags):
        code = "import sys, json; print(json.dumps(sys.path))"
        return json.loads(subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                                         timeout=60, check=True).stdout)

    bare = path("-I", "-S")   # entries a .pth file's code adds (an editable finder's path hook) are not folders
    added = [p for p in path("-I") if p not in bare and os.path.exists(p)]
    assert added and [p for p in local.site_dirs() if p in added] == added
    sp, extra = tmp_path / "site-packages", tmp_path / "extra"
    sp.mkdir()
    extra.mkdir()
    (sp / "a.pth").write_text(f"# a comment\n\nimport os; os.environ['PTH_RAN'] = '1'\n../extra\nmissing\n{extra}\n")
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(sp)])
    local.site_dirs.cache_clear()
    try:
        dirs = local.site_dirs()
    finally:
        local.site_dirs.cache_clear()
    assert dirs[:2] == (str(sp), str(extra)) and str(sp / "missing") not in dirs
    assert "PTH_RAN" not in os.environ
