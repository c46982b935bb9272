"""The red-team corpus (tests/redteam/): every hostile or broken submission, under both sandbox backends.

For each case: the verdict is never ``passed`` (the controls must pass); the expected statuses; the report
validates against the schema and stays under a size cap; candidate text in it is bounded and free of control
characters; no secret and no hidden-suite text leaks into it; no process, container or file outlives the run
outside the sandbox's scratch (host canaries untouched, forged files nowhere, the pickle canary never created,
the test's network listeners never contacted). A handful also go through the `grade` CLI (exit code 1, or 0 for
a control; never a traceback, never the forged report on stdout).

The default run grades every case through the local warm pool, the cases that test the sandbox itself
(SANDBOX_CASES) cold under the local backend and docker too, and the CLI's cases under the local backend; the
matrix group (CI) grades every case under every backend, cold and warm, and the CLI's under docker too. The
controls and the plain hangs (WARM_REPEATS) go through docker and the warm pool in the matrix group only.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import tempfile
import threading
import time
import unicodedata
from pathlib import Path

import pytest

from harness.grading.engine import grade
from harness.grading.submission import banned_api_uses

from .helpers import validate
from .redteam.cases import BY_NAME, CASES, Case

REDTEAM = Path(__file__).resolve().parent / "redteam"
IN_CI = os.environ.get("CI") == "true"
REPORT_CAP = 256 * 1024
LIMITS = {"call_timeout_s": 2, "max_restarts": 1, "startup_timeout_s": 30}
FORGED_NAMES = ("report.json", "results.json", "grade.json", "junit.xml")
PUBLIC_DIRS = ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"))
# Text that only exists in the hidden suite, the oracle or the reference: it must never reach a report.
HIDDEN_TEXT = ("def test_output_shape", "check_forward(candidate", "def reference(case", "Q = (X @ Wq).reshape")
CANARY_TEXT = "host canary: must stay exactly like this\n"
# Cases whose local-backend outcome rests on the mount/PID namespaces (SECURITY.md). Without them the local
# backend is a plain process group under your user: these would write into other processes' folders, fill /tmp,
# read your secrets or signal every process you own, so they are skipped there, not run (never under Docker).
NEEDS_LOCAL_ISOLATION = {"forged_reports", "search_filesystem", "import_grader", "env_secrets", "network_exfil",
                         "daemon_double_fork", "late_thread_writer", "disk_fill", "fork_bomb", "fork_returns_twice",
                         "kill_everything"}
# Cases whose outcome rests on the sandbox itself (its isolation, its limits, how it kills and what outlives it)
# rather than on the host's checks of what came back (outputs, frames, exceptions, messages, tripwires: the same
# host code whatever started the worker). The default run grades these under every backend it runs; the others
# through the local warm pool, and cold (local, docker runc), through the warm docker pool and under gVisor in
# the matrix group that CI runs (issue 24: the corpus three times over was a quarter of the suite).
SANDBOX_CASES = NEEDS_LOCAL_ISOLATION | {
    "control_numpy", "control_torch", "exit_at_import", "os_exit_in_call", "array_protocol_object",
    "infinite_loop", "long_sleep", "ignore_sigterm", "thread_bomb", "memory_bomb", "protocol_flood",
    "stdout_flood_binary", "stderr_junk_then_crash", "search_process_memory", "symlink_fifo_outputs"}
# Cases the default run need not grade again through docker or the local warm pool: the controls (the default run
# grades references under docker and warm: tests/test_docker_grading.py, tests/test_warm.py) and the plain hangs
# (ignore_sigterm and fork_bomb are the hostile kills)
WARM_REPEATS = {"control_numpy", "control_torch", "infinite_loop", "long_sleep"}
TEXT_LIMITS = {"message": 1500, "description": 300}
ALLOWED_CONTROLS = {"\n", "\t"}


# -- parametrisation --------------------------------------------------------------------------------------
# "docker" is the docker sandbox under runc (Docker's default runtime), "docker-runsc" under gVisor.
def _params(cases=CASES, backends=("local", "docker", "docker-runsc"), cli=False):
    for backend in backends:
        for case in cases:
            marks = [pytest.mark.docker] if backend.startswith("docker") else []
            if case.slow:
                marks.append(pytest.mark.slow)
            if (cli and backend == "docker") or (not cli and backend in ("docker", "local")
                                                 and case.name not in SANDBOX_CASES) \
                    or (not cli and backend in ("docker", "local-warm") and case.name in WARM_REPEATS):
                # the host's checks: graded through the local warm pool by default (a fork of a zygote that has
                # imported torch: the same host code as a cold worker's, without a cold start per case); through
                # the CLI, docker is only the --sandbox flag (tests/test_docker_grading.py::
                # test_grade_cli_with_docker) and the cases' outcomes under docker are test_redteam_case's
                marks.append(pytest.mark.matrix)
            yield pytest.param(backend, case, id=f"{backend}-{case.name}", marks=marks)


# -- the arena: a marked-up copy of the submission, canaries, listeners, a secret ----------------------------
class Listener:
    """TCP and UDP listeners on every local IPv4 address; records anything that arrives."""

    def __init__(self):
        self.hits: list[str] = []
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))
        self.tcp.settimeout(0.02)   # how soon close() finds the threads gone: once per case, 0.2 s was
        self.udp.settimeout(0.02)   # a tenth of a local case's time
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, daemon=True),
                         threading.Thread(target=self._recv, daemon=True)]
        for t in self._threads:
            t.start()

    def _accept(self):
        while not self._stop:
            try:
                conn, addr = self.tcp.accept()
                self.hits.append(f"tcp from {addr}")
                conn.close()
            except OSError:
                continue

    def _recv(self):
        while not self._stop:
            try:
                data, addr = self.udp.recvfrom(4096)
                self.hits.append(f"udp from {addr}: {data[:40]!r}")
            except OSError:
                continue

    def targets(self) -> list:
        hosts = {"127.0.0.1"}
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
                hosts.add(s.getsockname()[0])
        except OSError:
            pass
        for line in _run_quiet(["ip", "-4", "-o", "addr"]).splitlines():
            parts = line.split()
            if "inet" in parts:
                hosts.add(parts[parts.index("inet") + 1].split("/")[0])
        return [[h, self.port] for h in sorted(hosts)]

    def close(self):
        self._stop = True
        for t in self._threads:
            t.join(timeout=2)
        self.tcp.close()
        self.udp.close()


def _run_quiet(cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


class Arena:
    def __init__(self, tmp_path: Path, case: Case):
        self.case = case
        self.marker = "rt" + secrets.token_hex(5)          # 12 characters: fits a process name (15)
        self.secret = "SECRET-" + secrets.token_hex(12)
        self.root = tmp_path
        self.sub_dir = tmp_path / "submission"
        self.cwd = tmp_path / "cwd"
        self.scratch = tmp_path / "scratch"
        self.out_dir = tmp_path / "out"
        for d in (self.sub_dir, self.cwd, self.scratch, self.out_dir):
            d.mkdir()
        self.canary = self.sub_dir / "canary.txt"
        self.canary.write_text(CANARY_TEXT)
        self.pickle_canary = tmp_path / "pickle-canary"
        self.listener = Listener()
        text = (REDTEAM / f"{case.name}.py").read_text()
        text = (text.replace("@@MARKER@@", self.marker).replace("@@CANARY@@", str(self.pickle_canary))
                .replace("@@NET@@", json.dumps(self.listener.targets())))
        self.submission = self.sub_dir / f"{case.name}.py"
        self.submission.write_text(text)
        self.source = text
        # a secret in some other process's environment, as a CI token would be
        self.holder = subprocess.Popen(["sleep", "120"], env={"PATH": "/usr/bin:/bin", "REDTEAM_SECRET": self.secret})
        self.children_before = _live_children({self.holder.pid})

    def close(self):
        self.holder.kill()
        self.holder.wait()
        self.listener.close()


@pytest.fixture
def arena_factory(tmp_path, monkeypatch):
    made = []

    def make(case: Case) -> Arena:
        arena = Arena(tmp_path, case)
        made.append(arena)
        monkeypatch.chdir(arena.cwd)
        monkeypatch.setattr(tempfile, "tempdir", str(arena.scratch))  # the sandboxes' temp dirs land here
        monkeypatch.setenv("REDTEAM_SECRET", arena.secret)
        return arena

    yield make
    for arena in made:
        arena.close()


# -- checks -------------------------------------------------------------------------------------------------
def _strings(value, key=""):
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, key)


def check_text_is_clean(data: dict) -> None:
    """Candidate text in the report: bounded, no control/format characters, no lone surrogates."""
    for test in data["tests"]:
        for field, limit in TEXT_LIMITS.items():
            assert len(test[field]) <= limit, (test["id"], field, len(test[field]))
        for key, text in [("message", test["message"]), *_strings(test["diagnostics"])]:
            assert len(text) <= 2000, (test["id"], key, len(text))
            for ch in text:
                cat = unicodedata.category(ch)
                bad = (cat in ("Cc", "Cs") and ch not in ALLOWED_CONTROLS) or cat in ("Cf", "Zl", "Zp")
                assert not bad, (test["id"], key, hex(ord(ch)), text[:120])
            if key != "traceback":
                assert "\n" not in text, (test["id"], key)


def check_report(report_or_json, case: Case, arena: Arena) -> dict:
    text = report_or_json if isinstance(report_or_json, str) else report_or_json.to_json()
    assert len(text.encode()) < REPORT_CAP, f"report is {len(text.encode())} bytes"
    data = validate(text)
    statuses = {t["id"]: t["status"] for t in data["tests"]}
    assert data["verdict"] in case.verdicts, (data["verdict"], _summary(data))
    if not case.control:
        assert data["verdict"] != "passed"
    if case.only is not None:
        assert set(statuses.values()) <= set(case.only), _summary(data)
    if case.some:
        assert set(statuses.values()) & set(case.some), _summary(data)
    for test_id, allowed in case.tests.items():
        assert statuses.get(test_id) in allowed, (test_id, statuses.get(test_id), _summary(data))
    if case.message:
        first = next(t for t in data["tests"] if t["status"] != "passed")
        assert case.message in first["message"], first["message"]
    if case.tripwire is not None:
        banned = next(t for t in data["tests"] if t["id"] == "test_no_builtin_attention")
        static, runtime = case.tripwire
        assert banned["diagnostics"]["static_scan"] == list(static), banned
        assert banned["diagnostics"]["runtime_tripwire"] == list(runtime), banned
        for label in set(static) | set(runtime):
            assert label in banned["message"]
    check_text_is_clean(data)
    assert arena.secret not in text, "a secret from the host reached the report"
    for needle in HIDDEN_TEXT:
        assert needle not in text, f"hidden suite / reference text leaked: {needle!r}"
    return data


def _summary(data) -> list:
    return [(t["id"], t["status"], t["message"][:100]) for t in data["tests"] if t["status"] != "passed"][:6]


def _processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in comm or marker in cmdline:
            found.append(f"{pid} {comm} {cmdline[:80]}")
    return found


def _live_children(exclude=frozenset()) -> set[str]:
    me, found = os.getpid(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in exclude:
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(f"{pid} {stat.split(')')[0]})")
    return found


def _containers_of(pid: int, wait_s: float = 0.0) -> list[str]:
    """The grader containers of process ``pid`` still there (once none is, or after ``wait_s`` seconds)."""
    from harness.sandbox.image import leftover_containers

    deadline = time.monotonic() + wait_s
    while (left := [n for n in leftover_containers() if n.startswith(f"grader-{pid}-")]) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def check_nothing_left(case: Case, arena: Arena, backend: str, *, pid: int | None = None,
                       report_path: Path | None = None, pool=None) -> None:
    """No survivor, no container, nothing written outside the sandbox's scratch. With a warm ``pool``, what
    it keeps for the next submission (its zygotes, idle containers: none has seen a candidate) is not a leftover
    (``pool`` may be a list of pools)."""
    if case.late_s:
        time.sleep(case.late_s)
    assert _processes_with(arena.marker) == [], "processes tagged by the submission survived"
    children = _live_children({arena.holder.pid}) - arena.children_before
    # a `grade` process (``pid``) hands its running container to a detached `docker rm -f` as it ends
    # (DockerHandle.hand_off, issue 27): gone moments after the process, so it is waited for, within 30 s
    containers = _containers_of(pid or os.getpid(), 30.0 if pid else 0.0) if backend.startswith("docker") else []
    for one in ([] if pool is None else pool if isinstance(pool, (list, tuple)) else [pool]):
        owned = one.owned()
        children = {c for c in children if int(c.split()[0]) not in owned["pids"]}
        containers = [n for n in containers if n not in owned["containers"]]
    assert children == set(), "a worker process is still running"
    assert containers == [], "grader containers left behind"
    if backend == "local" and pool is None:  # a warm pool's idle workers hold cgroups of their own
        from harness.sandbox import cgroup

        assert cgroup.leftovers(pid) == [], "worker cgroups left behind"
    # host canaries and the submission's folder: untouched, nothing added
    assert sorted(p.name for p in arena.sub_dir.iterdir()) == sorted(["canary.txt", arena.submission.name])
    assert arena.canary.read_text() == CANARY_TEXT
    assert arena.submission.read_text() == arena.source
    assert not arena.pickle_canary.exists(), "the pickle payload ran on the host"
    # the host's working directory, the report folder and the sandboxes' temp root: nothing but our report
    assert [p.name for p in arena.cwd.iterdir()] == []
    assert [p.name for p in arena.scratch.iterdir()] == [], "sandbox scratch not cleaned up"
    # the grader writes the JSON report and, when forward tests failed, its .npz sidecar of arrays
    grader_outputs = {report_path.name, report_path.with_suffix(".npz").name} if report_path else set()
    assert {p.name for p in arena.out_dir.iterdir()} <= grader_outputs
    for path in arena.out_dir.iterdir():
        assert arena.marker.encode() not in path.read_bytes(), f"{path.name} was forged"
    # public places the submission could guess
    for folder in PUBLIC_DIRS:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        assert not [n for n in names if arena.marker in n], f"forged files in {folder}"
        for name in FORGED_NAMES:
            path = os.path.join(folder, name)
            try:
                content = Path(path).read_text(errors="replace")
            except OSError:
                continue
            assert arena.marker not in content, f"forged {path}"
    assert arena.listener.hits == [], "the submission reached the test's network listeners"


# -- the corpus ---------------------------------------------------------------------------------------------
def _expect_isolation(backend: str, case: Case) -> None:
    from harness.sandbox import local

    if backend == "local" and case.name in NEEDS_LOCAL_ISOLATION and not local.mount_isolation():
        if IN_CI:
            pytest.fail("CI must provide the local backend's namespaces (unshare as root or user namespaces)")
        pytest.skip("the local backend has no namespace isolation on this machine, and this submission would "
                    "really do its damage (see SECURITY.md)")


def _runtime(backend: str) -> str | None:
    return None if not backend.startswith("docker") else "runsc" if "runsc" in backend else "runc"


def _sandbox(backend: str):
    """What grade() gets: "local", "docker" (the default runtime, runc, chosen by name as a user would), or a
    docker sandbox object under gVisor."""
    if _runtime(backend) == "runsc":
        from harness.sandbox.docker import DockerSandbox

        box = DockerSandbox(runtime="runsc")
        box.check()
        return box
    return backend


def check_environment(report, backend: str) -> None:
    assert report.environment["sandbox"] == backend.split("-")[0]
    assert report.environment.get("docker_runtime") == _runtime(backend)


@pytest.mark.parametrize("backend,case", list(_params()))
def test_redteam_case(backend, case, arena_factory):
    _expect_isolation(backend, case)
    arena = arena_factory(case)
    report = grade(exercise=case.exercise, submission=arena.submission, track=case.track, sandbox=_sandbox(backend),
                   limits={**LIMITS, **case.limits})
    check_environment(report, backend)
    check_report(report, case, arena)
    check_nothing_left(case, arena, backend)


@pytest.fixture(scope="module")
def warm_pools():
    """One warm pool per backend for the whole corpus: consecutive hostile submissions share a zygote / a pool."""
    from harness.session.warm import WarmPool

    pools = {}

    def get(backend: str) -> WarmPool:
        if backend not in pools:
            pools[backend] = WarmPool(_sandbox(backend), size=1)
        return pools[backend]

    get.pools = pools  # every pool's idle workers (runc's and runsc's) are kept between cases, not leftovers
    yield get
    for pool in pools.values():
        pool.close()
        assert pool.owned() == {"pids": [], "containers": []}
    if any(b.startswith("docker") for b in pools):
        assert _containers_of(os.getpid()) == [], "grader containers left behind by the warm pool"


@pytest.mark.parametrize("backend,case", list(_params(backends=("local-warm", "docker-warm", "docker-runsc-warm"))))
def test_redteam_case_through_warm_workers(backend, case, arena_factory, warm_pools):
    """The whole corpus through warm workers (a zygote's forks, or pre-started containers): the same outcomes,
    nothing left running, and the next hostile submission gets a fresh worker all the same."""
    base = backend.removesuffix("-warm")
    _expect_isolation(base, case)
    if base == "local":
        from harness.sandbox import local

        if not local.mount_isolation():
            pytest.skip("no mount-namespace isolation here: the local warm pool is cold")
    pool = warm_pools(base)
    # its zygote's scratch lies outside the arena's; at most one idle worker per track (a gVisor container holds
    # ~60 host threads: prewarm(wait=True) per case would keep one more idle container each time)
    assert pool.wait_idle(case.track, timeout=120)
    arena = arena_factory(case)
    report = grade(exercise=case.exercise, submission=arena.submission, track=case.track, sandbox=pool,
                   limits={**LIMITS, **case.limits})
    check_environment(report, base)
    assert report.environment["warm"] is True
    check_report(report, case, arena)
    assert pool.drain(60), "used containers were not removed"  # docker: killed and removed in the background
    check_nothing_left(case, arena, backend, pool=list(warm_pools.pools.values()))


CLI_CASES = [c for c in CASES if c.cli]


@pytest.mark.parametrize("backend,case", list(_params(CLI_CASES, cli=True)))
def test_redteam_case_through_the_cli(backend, case, arena_factory):
    _expect_isolation(backend, case)
    arena = arena_factory(case)
    report_path = arena.out_dir / "report.json"
    env = {**os.environ, "REDTEAM_SECRET": arena.secret}
    runtime = ["--runtime", _runtime(backend)] if _runtime(backend) else []
    proc = subprocess.Popen(["grade", case.exercise, str(arena.submission), "--sandbox", backend.split("-")[0],
                             *runtime,  # track: auto
                             "--json", str(report_path), "--timeout", str(LIMITS["call_timeout_s"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=arena.cwd, env=env)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    out_text, err_text = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    assert proc.returncode == (0 if case.control else 1), (proc.returncode, err_text[-2000:])
    assert "Traceback" not in err_text, err_text[-2000:]
    assert arena.marker not in out_text and arena.marker not in err_text, "forged output reached the terminal"
    assert arena.secret not in out_text + err_text
    bad = [hex(ord(c)) for c in out_text if unicodedata.category(c) in ("Cc", "Cf", "Cs") and c != "\n"]
    assert not bad, f"control characters on the CLI's stdout: {bad[:10]}"
    if not case.control:
        assert "PASSED" not in out_text.splitlines()[0], out_text[:300]
    data = check_report(report_path.read_text(), case, arena)
    assert data["track"] == case.track, "the CLI detected the wrong track"
    assert data["environment"].get("docker_runtime") == _runtime(backend)
    check_nothing_left(case, arena, backend, pid=proc.pid, report_path=report_path)


# -- the corpus itself --------------------------------------------------------------------------------------
def test_manifest_covers_every_file_and_the_minimum():
    files = {p.stem for p in REDTEAM.glob("*.py")} - {"__init__", "cases"}
    assert files == set(BY_NAME), (files ^ set(BY_NAME))
    assert len(CASES) == len(BY_NAME)
    assert len([c for c in CASES if not c.control]) >= 35
    assert len([c for c in CASES if c.control]) >= 2
    for case in CASES:
        head = (REDTEAM / f"{case.name}.py").read_text().lstrip()
        assert head.startswith('"""'), f"{case.name}: every corpus file starts with a docstring saying what it does"
        assert case.track in ("numpy", "torch") and case.exercise == "mha"


@pytest.mark.parametrize("name,static", [("tripwire_sdpa_direct", ["F.scaled_dot_product_attention"]),
                                         ("tripwire_getattr_hidden", []),
                                         ("control_comment_sdpa", []),
                                         ("tripwire_mha_module", ["nn.MultiheadAttention"])])
def test_static_scan_of_the_tripwire_cases(name, static):
    """The host's AST scan alone: a direct call fires, a computed getattr and a comment/string do not."""
    assert banned_api_uses((REDTEAM / f"{name}.py").read_text()) == static


def test_the_local_sandbox_isolation_is_active_here():
    """The local-backend half of the corpus relies on the mount namespace (read-only root, private /proc, the
    grader's installation and /run hidden); say so plainly when a machine cannot provide it."""
    from harness.sandbox import local

    if not local.namespace_prefix():
        pytest.skip("no unshare/namespaces on this machine: the local backend is a plain process group here")
    assert local.mount_isolation(), "unshare works but the mount-namespace isolation probe failed"


def test_local_refuses_a_container_that_can_reach_the_docker_socket(monkeypatch, tmp_path):
    """Without its namespaces the local backend is a plain process; inside a container that mounts the Docker
    socket (the grader image of docker-compose.yml) that process would own the host, so it refuses (exit 3)."""
    from harness.core.errors import InfrastructureError
    from harness.sandbox import local

    real_exists = os.path.exists
    monkeypatch.setattr(local, "mount_isolation", lambda: False)
    monkeypatch.setattr(local, "reachable_docker_socket", lambda: "/var/run/docker.sock")
    monkeypatch.setattr(local.os.path, "exists", lambda p: p == "/.dockerenv" or real_exists(p))
    sub = tmp_path / "s.py"
    sub.write_text((REDTEAM / "control_numpy.py").read_text())
    with pytest.raises(InfrastructureError, match="refusing"):
        grade(exercise="mha", submission=sub, track="numpy", sandbox="local", limits=LIMITS)
