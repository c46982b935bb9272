"""The sandbox's own Docker engine client (harness/sandbox/engine.py): HTTP over the engine's unix socket.

Against a stand-in engine on a unix socket (what goes out, how answers and errors come back, a slow engine), then
against the real engine beside docker-py's client (same answers), and the one-shot docker grade without docker-py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.sandbox import engine
from harness.sandbox.engine import EngineClient, EngineError, NotFound

ROOT = Path(__file__).resolve().parents[1]


class StandIn:
    """A unix-socket server answering each connection with the next canned answer, or with ``answers(request)``
    when it is a function (then ``delay_s`` holds back the first answer only); keeps every request it read."""

    def __init__(self, path: str, answers, delay_s: float = 0.0):
        self.answers = answers if callable(answers) else list(answers)
        self.delay_s, self.requests = delay_s, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while callable(self.answers) or self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(data.decode())
                if callable(self.answers):
                    time.sleep(self.delay_s if len(self.requests) == 1 else 0.0)
                    answer = self.answers(self.requests[-1])
                else:
                    time.sleep(self.delay_s)
                    answer = self.answers.pop(0)
                try:
                    conn.sendall(answer)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def _answer(status: str, body: bytes, *headers: str) -> bytes:
    head = "\r\n".join([f"HTTP/1.0 {status}", "Content-Type: application/json", *headers])
    return head.encode() + b"\r\n\r\n" + body


@pytest.fixture
def stand_in(tmp_path):
    made = []

    def make(answers: list[bytes], delay_s: float = 0.0) -> tuple[EngineClient, StandIn]:
        path = str(tmp_path / f"engine{len(made)}.sock")
        server = StandIn(path, answers, delay_s)
        made.append(server)
        return EngineClient(path, timeout=2.0), server

    yield make
    for server in made:
        server.close()


def test_calls_go_out_as_the_engines_api_has_them_and_answers_come_back_parsed(stand_in):
    listed = [{"Id": "abc", "Names": ["/grader-1-x"], "Labels": {"grader.container": "1"}}]
    client, server = stand_in([_answer("200 OK", b"OK"), _answer("200 OK", json.dumps(listed).encode()),
                               _answer("204 No Content", b""), _answer("204 No Content", b""),
                               _answer("200 OK", b'{"Id": "sha256:1", "Config": {"Labels": {}}}'),
                               _answer("204 No Content", b"")])
    assert client.ping() is True
    assert client.containers(all=True, filters={"label": "grader.container"}) == listed
    client.kill("grader-1-x", signal="SIGKILL")
    client.remove_container("grader-1-x", force=True)
    assert client.inspect_image("attn-grader-sandbox:0.1.0")["Id"] == "sha256:1"
    client.kill("a name?#", signal="SIGKILL")
    lines = [r.split("\r\n")[0] for r in server.requests]
    assert lines == [
        "GET /_ping HTTP/1.0",
        # the filter's value as a list, as the engine wants it (docker-py's convert_filters)
        "GET /containers/json?all=1&filters=%7B%22label%22%3A+%5B%22grader.container%22%5D%7D HTTP/1.0",
        "POST /containers/grader-1-x/kill?signal=SIGKILL HTTP/1.0",
        "DELETE /containers/grader-1-x?force=1 HTTP/1.0",
        "GET /images/attn-grader-sandbox:0.1.0/json HTTP/1.0",  # a tag's colon kept, as docker-py keeps it
        "POST /containers/a%20name%3F%23/kill?signal=SIGKILL HTTP/1.0",  # what else a path cannot hold, quoted
    ]
    assert all("Content-Length: 0" in r for r in server.requests)


def test_an_error_status_is_an_engine_error_with_the_engines_message_and_404_is_not_found(stand_in):
    client, _ = stand_in([_answer("404 Not Found", b'{"message": "No such container: grader-9"}'),
                          _answer("409 Conflict", b'{"message": "removal of container x is already in progress"}'),
                          _answer("500 Internal Server Error", b"not json at all")])
    with pytest.raises(NotFound, match="No such container: grader-9") as missing:
        client.inspect_container("grader-9")
    assert missing.value.status == 404 and engine.is_not_found(missing.value)
    with pytest.raises(EngineError, match="already in progress") as conflict:
        client.remove_container("x", force=True)
    assert conflict.value.status == 409 and not engine.is_not_found(conflict.value)
    with pytest.raises(EngineError, match="500 not json at all"):
        client.info()


def test_a_garbled_answer_is_an_engine_error(stand_in):
    client, _ = stand_in([b"SSH-2.0-OpenSSH\r\n", _answer("200 OK", b"{\"truncated\": ")])
    with pytest.raises(EngineError, match="not an HTTP answer"):
        client.version()
    with pytest.raises(EngineError, match="not JSON"):
        client.version()


def test_a_slow_engine_times_out_as_a_timeout_which_the_availability_check_asks_again(stand_in, monkeypatch):
    """A socket timeout is what `--sandbox auto` reads as a busy engine (asked once more, patiently), not as a
    missing one: the same rule as with docker-py's client (tests/test_cli.py)."""
    from harness.sandbox import docker as docker_backend

    client, _ = stand_in([_answer("200 OK", b"OK")], delay_s=0.5)
    client.timeout = 0.1
    with pytest.raises(TimeoutError) as slow:
        client.ping()
    assert docker_backend._timed_out(slow.value)

    def engine_answer(request: str) -> bytes:
        if request.startswith("GET /_ping "):
            return _answer("200 OK", b"OK")
        if request.startswith("GET /version "):
            return _answer("200 OK", b'{"Version": "99.0"}')
        return _answer("404 Not Found", b'{"message": "No such image"}')

    path = str(Path(client.path).with_name("busy.sock"))
    busy = StandIn(path, engine_answer, delay_s=docker_backend.PROBE_TIMEOUT_S + 0.3)  # the first ping: too late
    asked = []
    real = engine.EngineClient

    def counting(path: str, timeout: float) -> EngineClient:
        asked.append(timeout)
        return real(path, timeout)

    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setattr(engine, "EngineClient", counting)
    monkeypatch.setattr(docker_backend, "docker_cli", lambda: "/usr/bin/docker")
    docker_backend._available_cache.clear()
    try:
        reason = docker_backend.DockerSandbox.unavailable_reason(runtime="runc")
    finally:
        docker_backend._available_cache.clear()
        busy.close()
    # timed out, then asked again and answered: the stand-in has no image, so the check got past the engine
    assert asked == [docker_backend.PROBE_TIMEOUT_S, docker_backend.BUSY_PROBE_TIMEOUT_S]
    assert reason is not None and reason[0] == "image" and "is missing" in reason[1], reason


def test_only_a_unix_socket_engine_gets_this_client():
    assert engine.socket_path("") == engine.DEFAULT_SOCKET
    assert engine.socket_path("unix:///run/user/1000/docker.sock") == "/run/user/1000/docker.sock"
    assert engine.socket_path("tcp://10.0.0.2:2376") is None and engine.socket_path("ssh://me@host") is None


# -- the real engine ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_engine():
    """The engine's socket (the docker marker: skipped outside CI without an engine, tests/conftest.py)."""
    path = engine.socket_path()
    assert path is not None, "the tests' engine is on a unix socket"
    return path


@pytest.mark.docker
def test_the_real_engine_answers_this_client_as_it_answers_docker_py(real_engine):
    from harness.sandbox.docker import LABEL, default_image, sdk_client

    ours, theirs = EngineClient(real_engine, timeout=15), sdk_client(timeout=15)
    try:
        assert ours.ping() and theirs.ping()
        assert ours.version()["Version"] == theirs.version(api_version=False)["Version"]
        assert ours.info()["Runtimes"].keys() == theirs.info()["Runtimes"].keys()
        image = default_image()
        assert ours.inspect_image(image)["Id"] == theirs.inspect_image(image)["Id"]
        assert ours.inspect_image(image)["Config"]["Labels"] == theirs.inspect_image(image)["Config"]["Labels"]
        ids = {c["Id"] for c in ours.containers(all=True, filters={"label": LABEL})}
        assert ids == {c["Id"] for c in theirs.containers(all=True, filters={"label": LABEL})}
        for client in (ours, theirs):
            with pytest.raises(Exception) as missing:
                client.inspect_container(f"grader-none-{os.getpid()}")
            assert engine.is_not_found(missing.value), missing.value
    finally:
        theirs.close()


@pytest.mark.docker
def test_a_one_shot_docker_grade_never_imports_docker_py(real_engine, tmp_path):
    """The point of the client: the one-shot `grade --sandbox docker` checks the engine and the image, sweeps
    and grades without the Docker SDK's ~100-130 ms import on its way."""
    out = tmp_path / "r.json"
    reference = str(ROOT / "reference" / "mha_numpy.py")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", "mha", reference,
                           "--sandbox", "docker", "--quiet", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "harness.sandbox.engine" in imported and "numpy" in imported  # the listing is the grade's
    assert not {"docker", "docker.api.client", "requests", "urllib3"} & imported
    report = json.loads(out.read_text())
    assert report["environment"]["sandbox"] == "docker" and report["score"] == report["max_score"]
