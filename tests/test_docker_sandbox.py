"""The Docker sandbox backend, tested at the sandbox level with the wire protocol spoken directly.

Needs a Docker engine and the sandbox image (`bash .ci/docker-setup.sh`). Outside CI these tests skip with the
reason when either is missing; with CI=true they never skip: a missing engine or image fails them.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import tarfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from harness.worker import wire
from harness.sandbox.base import Limits

pytestmark = pytest.mark.docker

IN_CI = os.environ.get("CI") == "true"
PROBE_MARK = "PROBE-RESULT "
ALLOWED_ENV = {"PATH", "HOSTNAME", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
               "OPENBLAS_L2_SIZE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"docker sandbox unavailable in CI (never skipped there): {reason}", pytrace=False)
    pytest.skip(f"docker sandbox unavailable: {reason} (run `bash .ci/docker-setup.sh`)")


@pytest.fixture(scope="module", params=["runc", "runsc"])
def box(request):
    """The docker sandbox under each runtime: every test of this file runs under runc and under gVisor."""
    try:
        from harness.sandbox.docker import DockerSandbox, probe
    except ImportError as exc:  # pragma: no cover - e.g. docker-py missing
        _unavailable(f"cannot import the docker backend: {exc}")
    failed = [c for c in probe(timeout=5.0, runtime=request.param) if not c[1]]
    if failed:
        _unavailable(f"{failed[0][2]}; fix: {failed[0][3]}")
    return DockerSandbox(runtime=request.param)


def _mine() -> list[str]:
    from harness.sandbox.image import leftover_containers

    return [n for n in leftover_containers() if n.startswith(f"grader-{os.getpid()}-")]


@pytest.fixture
def handles(box):
    """Started workers; after the test every one is cleaned up and no grader container of ours is left."""
    started = []
    yield started
    for h in started:
        h.cleanup()
    assert _mine() == [], "grader containers left behind"


# -- helpers -------------------------------------------------------------------------------------------------
def _read_exact(fd: int, n: int, deadline: float) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError(f"worker closed its output after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_frame(handle, timeout: float = 60.0):
    fd = handle.proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    length = wire.parse_prefix(_read_exact(fd, wire.HEADER.size, deadline))
    head, specs = wire.parse_header(_read_exact(fd, length, deadline))
    return head, {name: wire.decode_array(_read_exact(fd, n, deadline)) for name, n in specs}


def send(handle, header: dict, arrays: dict | None = None) -> None:
    handle.proc.stdin.write(wire.encode_frame(header, arrays))
    handle.proc.stdin.flush()


def call_x(handle, x=None):
    send(handle, {"op": "call", "args": [{"array": "x", "tensor": False}]}, {"x": np.arange(3.0) if x is None else x})


def start(box, handles, tmp_path, source: str, *, track="numpy", entry="f", limits: Limits | None = None,
          ready_timeout=60.0):
    sub = tmp_path / "submission.py"
    sub.write_text(textwrap.dedent(source))
    h = box.start(track=track, entry=entry, submission=sub, limits=limits or Limits())
    handles.append(h)
    head, _ = read_frame(h, ready_timeout)
    assert head["kind"] == "boot", head  # the worker's own start-up comes first, before the candidate's file
    head, _ = read_frame(h, ready_timeout)
    return h, head


def finish(handle) -> tuple[dict, str]:
    """Close stdin so the worker exits; return post-mortem and stderr."""
    handle.proc.stdin.close()
    handle.proc.wait(timeout=30)
    err = handle.proc.stderr.read().decode(errors="replace")
    return handle.post_mortem(), err


def assert_removed(handle) -> None:
    handle.cleanup()
    assert handle.name not in _mine()


# -- the worker runs ----------------------------------------------------------------------------------------
def test_numpy_worker_ready_and_answers(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        import numpy as np
        def f(x):
            print("hello from the candidate")
            return x * 2
    """)
    assert head["kind"] == "ready"
    call_x(h)
    reply, arrays = read_frame(h, 30)
    assert reply["kind"] == "result", reply
    np.testing.assert_array_equal(arrays["out"], [0.0, 2.0, 4.0])
    pm, err = finish(h)
    assert "hello from the candidate" in err  # prints go to stderr, never into the protocol
    assert pm["exit_code"] == 0 and pm["oom_killed"] is False and pm["sandbox"] == "docker"
    assert_removed(h)


def test_frames_larger_than_a_pipe_write_cross_whole(box, handles, tmp_path):
    """gVisor's stdout pipe takes 64 KiB per write: an 8 MB answer must still arrive whole, both ways."""
    h, head = start(box, handles, tmp_path, """
        def f(x):
            return x[::-1] + 1.0
    """)
    assert head["kind"] == "ready"
    x = np.arange(1_000_000, dtype=np.float64)
    call_x(h, x)
    reply, arrays = read_frame(h, 30)
    assert reply["kind"] == "result", reply
    np.testing.assert_array_equal(arrays["out"], x[::-1] + 1.0)
    pm, _ = finish(h)
    assert pm["exit_code"] == 0, pm
    assert_removed(h)


def test_torch_worker_ready(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        import torch
        class M(torch.nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = torch.nn.Linear(d, d)
            def forward(self, x):
                return self.lin(x)
    """, track="torch", entry="M")
    assert head["kind"] == "ready"
    send(h, {"op": "init", "args": [4]})
    reply, _ = read_frame(h, 30)
    assert reply["kind"] == "module" and {p["name"] for p in reply["params"]} == {"lin.weight", "lin.bias"}
    pm, _ = finish(h)
    assert pm["exit_code"] == 0
    assert_removed(h)


# -- what a submission sees from inside ---------------------------------------------------------------------
PROBE = r'''
import errno, json, os, socket, sys
r = {"uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid()}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:  # a UDP connect only looks up a route (TEST-NET-1 address): it sends nothing either way
    s.connect(("192.0.2.1", 9)); r["udp_connect"] = "ok"
except OSError as e:
    r["udp_connect"] = errno.errorcode.get(e.errno, str(e.errno))
s.close()
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM); t.settimeout(1)
try:
    t.connect(("192.0.2.1", 80)); r["tcp_connect"] = "ok"
except OSError as e:
    r["tcp_connect"] = errno.errorcode.get(e.errno, type(e).__name__)
t.close()
r["interfaces"] = sorted(os.listdir("/sys/class/net"))
r["routes"] = [l for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
r["write"] = {}
for path in ["/x", "/etc/x", "/opt/grader/x", "/opt/grader/worker.py", "/submission/x",
             "/submission/submission.py", "/var/tmp/x", "/usr/x", "/opt/venv/x", "/tmp/x", "/tmp/sub/x"]:
    try:
        if path == "/tmp/sub/x":
            os.makedirs("/tmp/sub", exist_ok=True)
        with open(path, "a") as f:
            f.write("x")
        r["write"][path] = "ok"
    except OSError as e:
        r["write"][path] = errno.errorcode.get(e.errno, str(e.errno))
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"\0" * (32 * 1024 * 1024))
    r["big_file"] = "ok"
except OSError as e:
    r["big_file"] = errno.errorcode.get(e.errno, str(e.errno))
finally:
    try:
        os.remove("/tmp/big")
    except OSError:
        pass
writable, hits, nfiles = [], [], 0
SUSPECT_DIRS = {"graders", "reference", "exercises", "harness", "work", "main"}
SUSPECT_FILES = {"cli.py", "dockerimage.py", "limits_probe.py", "mount_setup.py", "suite.ini", "mha_numpy.py", "mha_torch.py", "channel.py",
                 "checks.py", "plugin.py", "engine.py", "pyproject.toml", "docker.sock"}
MARKERS = SUSPECT_FILES | {"mha", "masked_mha", "gqa", "cross_attention", "mutants", "common", "sandbox",
                           "wire.py", "worker.py", "main", "graders", "reference", "harness", "exercises"}
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys") or root.startswith(("/proc/", "/sys/")):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK):
        writable.append(root)
    nfiles += len(files)
    for d in dirs:  # a dir named like ours only counts if it holds our files (torch has a "reference" package)
        if d in SUSPECT_DIRS:
            try:
                inside_d = set(os.listdir(os.path.join(root, d)))
            except OSError:
                inside_d = set()
            if d in ("work", "main") or inside_d & MARKERS:
                hits.append(os.path.join(root, d))
    for f in files:
        if f in SUSPECT_FILES:
            hits.append(os.path.join(root, f))
r["writable_dirs"] = writable
r["suspects"] = hits
r["files_seen"] = nfiles
r["opt_grader"] = sorted(os.listdir("/opt/grader"))
r["submission_dir"] = sorted(os.listdir("/submission"))
import importlib.util
def _compiled_from(pyc, src):  # a checked-hash .pyc (PEP 552) of this very source
    head = open(pyc, "rb").read(16)
    return head[4:8] == b"\x03\0\0\0" and head[8:16] == importlib.util.source_hash(open(src, "rb").read())
r["bytecode"] = {"main": sys.modules["__main__"].__file__, "wire": sys.modules["wire"].__spec__.cached,
                 "worker_pyc": _compiled_from("/opt/grader/worker.pyc", "/opt/grader/worker.py"),
                 "wire_pyc": _compiled_from(sys.modules["wire"].__spec__.cached, "/opt/grader/wire.py")}
status = open("/proc/self/status").read().splitlines()
r["status"] = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in status if ":" in l}
r["env"] = dict(os.environ)
r["mounts"] = open("/proc/self/mounts").read().splitlines()
import ctypes
r["nnp_prctl"] = ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS
r["kernel"] = os.uname().release
sys.stderr.write("PROBE-RESULT " + json.dumps(r) + "\n")
sys.stderr.flush()

def f(x):
    return x
'''


@pytest.fixture(scope="module")
def inside(box, tmp_path_factory):
    """Run the probe submission once; return what it saw."""
    tmp = tmp_path_factory.mktemp("probe")
    started: list = []
    try:
        h, head = start(box, started, tmp, PROBE)
        assert head["kind"] == "ready", head
        pm, err = finish(h)
    finally:
        for x in started:
            x.cleanup()
    lines = [line for line in err.splitlines() if line.startswith(PROBE_MARK)]
    assert lines, f"probe printed nothing; stderr: {err[-2000:]}"
    return json.loads(lines[-1][len(PROBE_MARK):])


def test_no_network(inside):
    assert inside["interfaces"] == ["lo"]
    assert inside["routes"] == []
    assert inside["udp_connect"] in ("ENETUNREACH", "EHOSTUNREACH")  # runc | gVisor: no route either way
    assert inside["tcp_connect"] != "ok"


def test_read_only_root_and_only_tmp_writable(inside):
    w = inside["write"]
    for path in ["/x", "/etc/x", "/opt/grader/x", "/opt/grader/worker.py", "/submission/x",
                 "/submission/submission.py", "/var/tmp/x", "/usr/x", "/opt/venv/x"]:
        assert w[path] in ("EROFS", "EACCES", "EPERM"), (path, w[path])
    assert w["/tmp/x"] == "ok" and w["/tmp/sub/x"] == "ok"
    assert inside["writable_dirs"] and all(d == "/tmp" or d.startswith("/tmp/") for d in inside["writable_dirs"]), \
        inside["writable_dirs"]
    assert inside["big_file"] in ("EFBIG", "ENOSPC")  # fsize ulimit (16 MB) / tmpfs cap
    tmp_mounts = [m for m in inside["mounts"] if m.split()[1] == "/tmp"]
    assert tmp_mounts and tmp_mounts[0].split()[2] == "tmpfs" and "size=" in tmp_mounts[0]
    root = [m for m in inside["mounts"] if m.split()[1] == "/"]
    assert root and "ro" in root[0].split()[3].split(",")


def test_no_grader_files_inside(inside):
    assert inside["files_seen"] > 1000  # the walk really covered the image
    assert inside["suspects"] == [], inside["suspects"]
    # the worker's two files, and their bytecode compiled when the image was built (sandbox.Dockerfile)
    assert inside["opt_grader"] == ["__pycache__", "wire.py", "worker.py", "worker.pyc"]
    assert inside["submission_dir"] == ["submission.py"]
    mount_points = {m.split()[1] for m in inside["mounts"]}
    assert not any(p.startswith(("/work", "/var/run", "/run/docker")) for p in mount_points), mount_points


def test_the_worker_runs_from_the_bytecode_the_image_was_built_with(inside):
    """No container's start compiles the worker's scripts (~18 ms each): it runs worker.pyc and imports wire from
    __pycache__, both compiled from the very sources beside them when the image was built."""
    assert inside["bytecode"] == {"main": "/opt/grader/worker.pyc",
                                  "wire": "/opt/grader/__pycache__/wire.cpython-311.pyc",
                                  "worker_pyc": True, "wire_pyc": True}
    assert not any("docker.sock" in m for m in inside["mounts"])


def test_unprivileged(inside):
    assert inside["uid"] != 0 and inside["euid"] != 0 and inside["gid"] != 0
    status = inside["status"]
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        if cap == "CapAmb" and cap not in status:  # gVisor's kernel (4.4.0) has no ambient capabilities
            continue
        assert int(status[cap], 16) == 0, (cap, status[cap])
    assert status.get("NoNewPrivs", "1") == "1" and inside["nnp_prctl"] == 1  # gVisor's /proc omits the line


def test_environment_nearly_empty(inside):
    env = inside["env"]
    assert set(env) <= ALLOWED_ENV, set(env) - ALLOWED_ENV
    assert env["HOME"] == "/tmp" and env["OMP_NUM_THREADS"] == "1"


def test_the_runtime_in_effect_is_the_one_asked_for(box, handles, tmp_path):
    """The kernel a grading worker sees: the engine host's under runc; gVisor's own (4.4.0, its kernel log
    says so) under runsc."""
    from harness.sandbox.docker import api_client

    h, head = start(box, handles, tmp_path, """
        import os, subprocess, sys
        log = subprocess.run(["dmesg"], capture_output=True).stdout.decode(errors="replace")
        sys.stderr.write("KERNEL " + os.uname().release + " " + str("Starting gVisor" in log) + "\\n")
        def f(x):
            return x
    """)
    assert head["kind"] == "ready", head
    pm, err = finish(h)
    line = next(x for x in err.splitlines() if x.startswith("KERNEL "))
    _, release, gvisor = line.split()
    client = api_client()
    try:
        host_kernel = client.info()["KernelVersion"]
        runtime = client.inspect_container(h.name)["HostConfig"]["Runtime"]
    finally:
        client.close()
    assert runtime == box.runtime
    if box.runtime == "runsc":
        assert (release, gvisor) == ("4.4.0", "True") and release != host_kernel, line
    else:
        assert (release, gvisor) == (host_kernel, "False"), (line, host_kernel)
    assert pm["exit_code"] == 0, pm
    assert_removed(h)


# -- limits ---------------------------------------------------------------------------------------------------
def test_infinite_loop_killed_by_host(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        def f(x):
            while True:
                pass
    """)
    assert head["kind"] == "ready"
    call_x(h)
    with pytest.raises(TimeoutError):
        read_frame(h, 2.0)
    t0 = time.monotonic()
    h.kill()
    assert time.monotonic() - t0 < 10
    pm = h.post_mortem()
    assert pm["killed_by_host"] is True
    assert pm["exit_code"] == 137 and pm.get("signal") == 9, pm
    assert pm["oom_killed"] is False
    assert_removed(h)


def test_huge_allocation_is_a_memory_fault(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        import numpy as np
        def f(x):
            a = np.ones(50 * 1024**3 // 8)   # 50 GB
            return a[:3]
    """)
    assert head["kind"] == "ready"
    call_x(h)
    try:
        reply, _ = read_frame(h, 60)
    except EOFError:
        reply = None
    if reply is not None:  # the allocation was refused: the worker's own MemoryError
        assert reply["kind"] == "fault" and reply["status"] == "memory", reply
        h.kill()
    else:  # the kernel's OOM killer took the container
        h.proc.wait(timeout=30)
        assert h.post_mortem()["oom_killed"] is True, h.post_mortem()
    assert_removed(h)


def test_touched_memory_beyond_limit_is_oom_killed(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        import numpy as np
        def f(x):
            a = np.ones(1024**3 // 8)        # 1 GB, touched, against a 256 MB container
            return a[:3]
    """, limits=Limits(memory_mb=256))
    assert head["kind"] == "ready"
    call_x(h)
    if box.runtime == "runsc":  # the worker's limit is its address space there: refused before it is touched
        reply, _ = read_frame(h, 60)
        assert reply["kind"] == "fault" and reply["status"] == "memory", reply
        h.kill()
        assert_removed(h)
        return
    with pytest.raises(EOFError):
        read_frame(h, 60)
    h.proc.wait(timeout=30)
    pm = h.post_mortem()
    assert pm["oom_killed"] is True and pm["exit_code"] == 137, pm
    assert_removed(h)


def test_fork_loop_hits_pids_limit(box, handles, tmp_path):
    h, head = start(box, handles, tmp_path, """
        import os, time
        def f(x):
            children = 0
            while True:
                pid = os.fork()
                if pid == 0:
                    time.sleep(120)
                    os._exit(0)
                children += 1
                if children > 10000:
                    raise RuntimeError("no pids limit")
    """, limits=Limits(pids=32))
    assert head["kind"] == "ready"
    call_x(h)
    reply, _ = read_frame(h, 60)
    assert reply["kind"] == "error" and reply["type"] in ("BlockingIOError", "OSError"), reply
    assert "Resource temporarily unavailable" in reply["message"]
    h.kill()
    assert h.post_mortem()["killed_by_host"] is True
    assert_removed(h)


def test_sweep_removes_expired_containers(box, handles, tmp_path):
    from harness.sandbox.docker import DockerSandbox

    h, head = start(box, handles, tmp_path, "def f(x):\n    return x\n")
    assert head["kind"] == "ready"
    assert h.name in _mine()
    DockerSandbox.sweep(older_than_s=3600)                   # a fresh container is left alone (others may go)
    assert h.name in _mine()
    time.sleep(1.1)
    # it is "older than the longest run" now; only this one is swept: other graders' containers (tests running
    # beside this one under xdist, another grader on the machine) are younger than 0.5 s only by accident
    assert DockerSandbox.sweep(older_than_s=0.5, name_prefix="grader-nobody-") == []
    assert h.name in _mine()
    removed = DockerSandbox.sweep(older_than_s=0.5, name_prefix=h.name)
    assert removed and h.name not in _mine()
    h.proc.wait(timeout=30)
    h.cleanup()


# -- doctor / availability ----------------------------------------------------------------------------------
def _by_name(checks):
    return {c.name: c for c in checks}


def test_doctor_all_ok(box):
    from harness.sandbox.image import doctor

    checks = doctor(runtime=box.runtime)
    assert [c.name for c in checks] == ["engine", "runtime", "image", "image current", "limits effective",
                                        "runtime in effect"]
    assert all(c.ok for c in checks), checks


@pytest.mark.parametrize("host", ["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:1"])
def test_doctor_engine_down(box, monkeypatch, host):
    from harness.sandbox.image import doctor
    from harness.core.errors import SandboxUnavailable
    from harness.sandbox.docker import DockerSandbox

    monkeypatch.setenv("DOCKER_HOST", host)
    t0 = time.monotonic()
    assert DockerSandbox.available() is False
    assert time.monotonic() - t0 < 1.0
    checks = _by_name(doctor())
    assert not checks["engine"].ok and checks["engine"].hint
    assert not checks["image"].ok and not checks["limits effective"].ok
    with pytest.raises(SandboxUnavailable) as info:
        DockerSandbox().check()
    assert info.value.hint and info.value.exit_code == 3


def test_doctor_image_missing(box, monkeypatch):
    from harness.sandbox.image import doctor
    from harness.core.errors import SandboxUnavailable
    from harness.sandbox.docker import DockerSandbox

    checks = _by_name(doctor(image="attn-grader-sandbox:no-such-tag"))
    assert checks["engine"].ok
    assert not checks["image"].ok and "missing" in checks["image"].detail and "build" in checks["image"].hint
    monkeypatch.setenv("GRADER_SANDBOX_IMAGE", "attn-grader-sandbox:no-such-tag")
    assert DockerSandbox.available() is False
    with pytest.raises(SandboxUnavailable, match="missing"):
        DockerSandbox().check()


@pytest.fixture
def stale_image(box):
    """A cheap labelled copy of the sandbox image claiming another harness version and worker."""
    from harness.sandbox.docker import sdk_client  # a build: docker-py's

    tag = f"attn-grader-sandbox:stale-test-{os.getpid()}"
    dockerfile = (f"FROM {box.image}\nLABEL grader.version=0.0.0-stale grader.worker_sha256=deadbeef\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    buf.seek(0)
    client = sdk_client(timeout=120)
    try:
        for chunk in client.build(fileobj=buf, custom_context=True, tag=tag, rm=True, decode=True):
            assert "error" not in chunk, chunk
        yield tag
    finally:
        try:
            client.remove_image(tag, force=True)
        finally:
            client.close()


def test_a_grade_on_a_stale_image_stops_the_container_its_overlapped_check_let_start(box, stale_image, monkeypatch):
    """The one-shot grade checks the engine and the image while its container starts (check_at_start, issue 27):
    a stale image's container is stopped and removed before it grades, and the error is the check's."""
    from harness.core.errors import SandboxUnavailable
    from harness.grading.engine import grade

    monkeypatch.setenv("GRADER_SANDBOX_IMAGE", stale_image)
    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", box.runtime)
    started = []
    real = subprocess.Popen

    def popen(cmd, *args, **kwargs):
        started.append(list(cmd))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    with pytest.raises(SandboxUnavailable, match="stale") as raised:
        grade(exercise="mha", submission=Path(__file__).parents[1] / "reference" / "mha_numpy.py", track="numpy",
              sandbox="docker")
    assert "grade sandbox build" in raised.value.hint
    runs = [c for c in started if c[1:2] == ["run"] and c[0].endswith("docker")]
    assert len(runs) == 1 and stale_image in runs[0]  # it did start: the check overlapped the start
    assert _mine() == [], "the stale image's container was left behind"


def test_doctor_image_stale(box, stale_image, monkeypatch):
    from harness.sandbox.image import doctor
    from harness.core.errors import SandboxUnavailable
    from harness.sandbox.docker import DockerSandbox

    checks = _by_name(doctor(image=stale_image))
    assert checks["engine"].ok and checks["image"].ok
    current = checks["image current"]
    assert not current.ok and "stale" in current.detail and "0.0.0-stale" in current.detail
    assert "worker" in current.detail and "build" in current.hint
    assert not checks["limits effective"].ok  # not checked once the image is wrong
    monkeypatch.setenv("GRADER_SANDBOX_IMAGE", stale_image)
    assert DockerSandbox.available() is False
    with pytest.raises(SandboxUnavailable, match="stale"):
        DockerSandbox().check()


REF_NUMPY = Path(__file__).parents[1] / "reference" / "mha_numpy.py"


def _gone(prefix: str, timeout: float = 30.0) -> list[str]:
    """Our containers whose names start with ``prefix``, once none is left or ``timeout`` has passed."""
    deadline = time.monotonic() + timeout
    while (left := [n for n in _mine() if n.startswith(prefix)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _recording_popen(monkeypatch) -> list:
    started, real = [], subprocess.Popen

    def popen(cmd, *args, **kwargs):
        started.append((list(cmd), kwargs))
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


def test_a_grade_that_ends_its_process_hands_its_container_to_a_detached_remover(box, monkeypatch):
    """`grade` run as the command (ends_process, issue 27): the container's kill and removal, ~50 ms of the
    engine's, go to a detached `docker rm -f` that nothing waits for; it removes the container all the same."""
    from harness.grading.engine import grade

    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", box.runtime)
    started = _recording_popen(monkeypatch)
    report = grade(exercise="mha", submission=REF_NUMPY, track="numpy", sandbox="docker", ends_process=True)
    assert report.verdict == "passed"
    runs = [c for c, _ in started if c[1:2] == ["run"]]
    removers = [(c, kw) for c, kw in started if c[1:3] == ["rm", "-f"]]
    assert len(runs) == 1 and len(removers) == 1
    command, options = removers[0]
    assert options.get("start_new_session") and command[3] in runs[0]  # detached, and for that container
    assert _gone(command[3]) == [], "the detached remover left the container behind"


def test_a_worker_dead_at_the_end_is_inspected_and_removed_before_the_grade_returns(box, monkeypatch, tmp_path):
    """Only a running worker is handed off: one that died (its state may explain a status) is removed as before,
    before the grade returns, even in a process that ends right after it."""
    from harness.grading.engine import grade

    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", box.runtime)
    sub = tmp_path / "sub.py"
    sub.write_text("import os\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    os._exit(0)\n")
    started = _recording_popen(monkeypatch)
    report = grade(exercise="mha", submission=sub, track="numpy", sandbox="docker", ends_process=True,
                   limits={"max_restarts": 1, "call_timeout_s": 5})
    assert report.tests[0].status == "error" and report.tests[0].diagnostics["exit_code"] == 0
    assert not [c for c, _ in started if c[1:3] == ["rm", "-f"]]
    assert _mine() == [], "a dead worker's container was left for a remover"
