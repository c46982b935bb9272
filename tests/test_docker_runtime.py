"""The docker runtime choice (runc | runsc = gVisor) without an engine: how it is chosen, what `docker run` gets,
what doctor says when runsc is not registered, the worker's whole-frame writes, and .ci/docker-setup.sh's merge
of daemon.json. The runtimes themselves run in tests/test_docker_sandbox.py, test_docker_grading.py and
test_redteam.py (each under both)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.errors import UsageError
from harness.sandbox.base import Limits
from harness.sandbox.docker import DockerSandbox, _runtime_registered, default_runtime

ROOT = Path(__file__).resolve().parent.parent


def _flag(cmd: list[str], name: str) -> list[str]:
    return [cmd[i + 1] for i, x in enumerate(cmd) if x == name]


def _command(box: DockerSandbox, pids: int = 64) -> list[str]:
    return box.command(name="grader-x", track="numpy", entry="mha", mount_dir="/tmp/x", limits=Limits(pids=pids),
                       started=0.0)


def test_default_is_runc_and_the_environment_chooses(monkeypatch):
    monkeypatch.delenv("GRADER_DOCKER_RUNTIME", raising=False)
    assert default_runtime() == "runc" and DockerSandbox(image="img").runtime == "runc"
    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", "runsc")
    assert DockerSandbox(image="img").runtime == "runsc"
    assert DockerSandbox(image="img", runtime="runc").runtime == "runc"  # an explicit choice wins
    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", "kata")
    with pytest.raises(UsageError, match="runc or runsc"):
        DockerSandbox(image="img")


def test_the_command_line_names_the_runtime_and_the_report_records_it():
    for runtime in ("runc", "runsc"):
        box = DockerSandbox(image="img", runtime=runtime)
        assert _flag(_command(box), "--runtime") == [runtime]
        assert box.describe() == {"sandbox": "docker", "image": "img", "docker_runtime": runtime}


def test_process_limits_per_runtime():
    """runc: the pids cgroup is the worker's own limit. runsc: that cgroup also holds gVisor's threads, so the
    worker's limit is RLIMIT_NPROC (gVisor enforces it inside its own kernel) and the cgroup gets headroom."""
    runc = _command(DockerSandbox(image="img", runtime="runc"), pids=32)
    assert _flag(runc, "--pids-limit") == ["32"] and not [u for u in _flag(runc, "--ulimit") if u.startswith("nproc")]
    runsc = _command(DockerSandbox(image="img", runtime="runsc"), pids=32)
    assert "nproc=32:32" in _flag(runsc, "--ulimit")
    (ceiling,) = _flag(runsc, "--pids-limit")
    assert int(ceiling) >= 32 * 5 + 60  # measured: ~60 host pids for gVisor itself, ~5 per guest process


def test_memory_limits_per_runtime():
    """runc: the memory cgroup is the worker's limit. runsc: the worker's address space is (gVisor would otherwise
    let the host OOM-kill the whole sandbox), and the cgroup gets room for gVisor and the tmpfs."""
    runc = _command(DockerSandbox(image="img", runtime="runc"))
    assert _flag(runc, "--memory") == _flag(runc, "--memory-swap") == ["2048m"]
    assert runc[runc.index("img") + 1] == "python3"
    runsc = _command(DockerSandbox(image="img", runtime="runsc"))
    (mem,) = _flag(runsc, "--memory")
    assert _flag(runsc, "--memory-swap") == [mem] and int(mem.rstrip("m")) >= 2048 + 64 + 128
    assert runsc[runsc.index("img") + 1:runsc.index("img") + 4] == ["prlimit", f"--as={2048 << 20}", "python3"]


class FakeClient:
    def __init__(self, runtimes):
        self.runtimes = runtimes

    def info(self):
        return {"Runtimes": self.runtimes}


def test_doctor_says_how_to_register_runsc():
    check = _runtime_registered(FakeClient({"runc": {"path": "runc"}}), "runsc")
    assert not check.ok and "no runtime 'runsc'" in check.detail and "runc" in check.detail
    assert "apt-get install runsc" in check.hint and "/etc/docker/daemon.json" in check.hint
    assert "kill -HUP" in check.hint
    snippet = json.loads(re.search(r"(\{.*\}) into", check.hint).group(1))
    assert snippet == {"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}}
    no_net = _runtime_registered(FakeClient({"runsc": {"path": "/usr/bin/runsc"}}), "runsc")
    assert not no_net.ok and "--network=none" in no_net.detail
    ok = _runtime_registered(FakeClient({"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}),
                             "runsc")
    assert ok.ok, ok
    assert _runtime_registered(None, "runc").ok  # runc is built in: the engine is not even asked


def test_worker_writes_whole_frames_through_short_writes():
    """gVisor's stdout pipe takes at most 64 KiB per write(2): a frame must still arrive whole through the
    worker's buffered protocol writer (worker.protocol_stdout)."""
    import io

    sys.path.insert(0, str(ROOT / "harness" / "worker"))
    try:
        import wire
        import worker
    finally:
        sys.path.pop(0)

    class ShortPipe(io.RawIOBase):
        def __init__(self):
            self.data = bytearray()
            self.calls = 0

        def writable(self):
            return True

        def write(self, view):
            self.calls += 1
            if self.calls % 3 == 0:
                return 0  # a zero-byte write must not end the loop either
            chunk = bytes(view[:65536])
            self.data += chunk
            return len(chunk)

    pipe = ShortPipe()
    payload = np.frombuffer(os.urandom(1_000_000), dtype=np.uint8)
    worker.Worker("numpy", "", "", io.BufferedWriter(pipe)).send({"kind": "result"}, {"out": payload})
    header, specs = wire.parse_header(bytes(pipe.data[wire.HEADER.size:]
                                            [:wire.parse_prefix(bytes(pipe.data[:wire.HEADER.size]))]))
    assert header["kind"] == "result" and pipe.calls > 15
    assert np.array_equal(wire.decode_array(bytes(pipe.data[-specs[0][1]:])), payload)


def _setup_merge(tmp_path: Path, before: str | None) -> tuple[str, dict]:
    """Run only .ci/docker-setup.sh's daemon.json merge (its register_runsc function) on a scratch file."""
    script = (ROOT / ".ci" / "docker-setup.sh").read_text()
    start = script.index("register_runsc() {")
    end = script.index("\n}\n", script.index("PYEOF\n", script.index("PYEOF", start) + 5)) + 3
    path = tmp_path / "daemon.json"
    if before is not None:
        path.write_text(before)
    prog = f'set -euo pipefail\nPY="{sys.executable}"\nDAEMON_JSON="{path}"\ncommand() {{ echo /usr/bin/runsc; }}\n' \
           f'{script[start:end]}\nregister_runsc\n'
    out = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip(), json.loads(path.read_text())


def test_docker_setup_registers_runsc_without_clobbering(tmp_path):
    want = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}
    said, conf = _setup_merge(tmp_path, None)
    assert said == "changed" and conf == {"runtimes": {"runsc": want}}
    existing = {"log-level": "warn", "runtimes": {"other": {"path": "/bin/other"}},
                "default-runtime": "runc"}
    said, conf = _setup_merge(tmp_path, json.dumps(existing))
    assert said == "changed" and conf == {**existing, "runtimes": {"other": {"path": "/bin/other"}, "runsc": want}}
    said, again = _setup_merge(tmp_path, json.dumps(conf))
    assert said == "" and again == conf  # idempotent: nothing written, no reload needed
    custom = {"runtimes": {"runsc": {"path": "/opt/runsc", "runtimeArgs": ["--platform=kvm"]}}}
    said, conf = _setup_merge(tmp_path, json.dumps(custom))  # an operator's own flags stay; ours is added
    assert conf["runtimes"]["runsc"] == {"path": "/opt/runsc", "runtimeArgs": ["--platform=kvm", "--network=none"]}


@pytest.mark.parametrize("command", [["run"], ["batch"], ["serve"], ["worker"], ["sandbox", "doctor"],
                                     ["sandbox", "status"]])
def test_every_command_that_starts_docker_sandboxes_takes_runtime(command, monkeypatch):
    from click.testing import CliRunner

    from harness.cli import main

    monkeypatch.delenv("GRADER_DOCKER_RUNTIME", raising=False)
    runner = CliRunner()
    text = runner.invoke(main, [*command, "--help"]).output
    assert "--runtime [runc|runsc]" in text and "gVisor" in text and "GRADER_DOCKER_RUNTIME" in text
    bad = runner.invoke(main, [*command, "--runtime", "kata", "--help"])
    assert bad.exit_code == 2 and "'kata' is not one of 'runc', 'runsc'" in bad.output
    assert "GRADER_DOCKER_RUNTIME" not in os.environ  # a rejected value is never exported to grading processes


def _sdk_not_found(message: str) -> Exception:
    from docker.errors import NotFound

    return NotFound(message)


def _engine_not_found(message: str) -> Exception:
    from harness.sandbox.engine import NotFound

    return NotFound(404, message, "kill grader-x")


@pytest.mark.parametrize("not_found", [_engine_not_found, _sdk_not_found])  # the unix-socket client's, docker-py's
def test_a_kill_before_the_engine_made_the_container_waits_for_it_rather_than_stopping_its_client(tmp_path,
                                                                                                   not_found):
    """A kill right after the start was asked for (a failed check_at_start, an early timeout on a loaded machine):
    the engine has not made the container yet. Stopping the `docker run` client then would leave the engine to
    finish making a container nobody removes; the kill waits for it while the client runs, and kills it by name.
    (Seen under load: a stale image's container left behind, then every later leftover check of that process.)"""
    from harness.sandbox.docker import DockerHandle

    class Engine:
        def __init__(self, missing: int):
            self.missing, self.kills = missing, 0

        def kill(self, name, signal):
            self.kills += 1
            if self.kills <= self.missing:
                raise not_found("No such container")

        def inspect_container(self, name):
            return {"State": {"Running": False, "ExitCode": 137}}

    client = subprocess.Popen(["sleep", "30"])
    try:
        handle = DockerHandle(client, "grader-x", str(tmp_path), 0.0)
        handle._client = Engine(missing=3)
        assert handle._kill_by_name(wait_s=5) is True and handle._client.kills == 4
        assert client.poll() is None                       # the client was not stopped: the engine's kill ends it
        handle._client = Engine(missing=10 ** 6)           # never made: given up after wait_s
        assert handle._kill_by_name(wait_s=0.2) is False
        client.kill()
        client.wait(timeout=10)
        handle._client = Engine(missing=10 ** 6)           # a client that ended asked for nothing more: no wait
        assert handle._kill_by_name(wait_s=30) is False and handle._client.kills == 1
    finally:
        client.kill()
        client.wait(timeout=10)
