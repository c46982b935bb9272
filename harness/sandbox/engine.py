"""The Docker engine's HTTP API over its unix socket, for the few calls a grade makes.

A grade asks the engine little: whether it answers (ping, version, the registered runtimes), the sandbox image's
labels, a container's state, a kill, a removal, the labelled containers to sweep. The Docker SDK (docker-py) takes
~100-130 ms to import (requests, urllib3, its API modules), and the one-shot `grade --sandbox docker` paid that on
its critical path (the probe in ``DockerSandbox.check_at_start``). This client is a socket, one HTTP/1.0 request
per call (an HTTP/1.1 server answers it without chunking and ends it by closing the connection: no keep-alive)
and ``json``: nothing it imports is not already loaded by the time a grade runs.

It keeps docker-py's names and arguments for these calls (``inspect_container``, ``remove_container(force=)``...),
so the rest of the sandbox treats either alike. docker-py stays for what this does not do: building the image (a
streamed build context) and an engine that is not on a unix socket (``DOCKER_HOST=tcp://...`` or ``ssh://``).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from urllib.parse import quote, urlencode

from harness.core.errors import InfrastructureError

DEFAULT_SOCKET = "/var/run/docker.sock"
MAX_ANSWER = 64 * 1024 * 1024  # a list of every container on a busy engine is far smaller


class EngineError(InfrastructureError):
    """The engine answered a call with an error status (``status``: the HTTP code, ``detail``: its message)."""

    def __init__(self, status: int, detail: str, what: str):
        super().__init__(f"{what}: {status} {detail}".strip())
        self.status, self.detail = status, detail


class NotFound(EngineError):
    """404: no such container or image."""


def socket_path(host: str | None = None) -> str | None:
    """The engine's unix socket from ``DOCKER_HOST`` (or the default one), or None for a tcp:// or ssh:// engine."""
    host = os.environ.get("DOCKER_HOST", "") if host is None else host
    if not host:
        return DEFAULT_SOCKET
    if host.startswith("unix://"):
        return host[len("unix://"):]
    return None


def is_not_found(exc: BaseException) -> bool:
    """Whether an engine call failed with "no such container/image", from this client or docker-py's."""
    if isinstance(exc, NotFound):
        return True
    sdk_errors = sys.modules.get("docker.errors")  # loaded when docker-py's client is in use (a tcp:// engine)
    return sdk_errors is not None and isinstance(exc, sdk_errors.NotFound)  # ImageNotFound is one too


class EngineClient:
    """A client for the engine on the unix socket at ``path``; ``timeout`` bounds the connection and each read."""

    def __init__(self, path: str = DEFAULT_SOCKET, timeout: float = 15.0):
        self.path, self.timeout = path, timeout

    # -- the calls (a name or tag in a path quoted as docker-py quotes it: ``/`` and ``:`` kept) -----------------
    def ping(self) -> bool:
        return self._call("GET", "/_ping", what="ping") == b"OK"

    def version(self, api_version: bool = False) -> dict:
        return self._json("GET", "/version", what="version")

    def info(self) -> dict:
        return self._json("GET", "/info", what="info")

    def inspect_image(self, image: str) -> dict:
        return self._json("GET", f"/images/{_quoted(image)}/json", what=f"inspect image {image}")

    def inspect_container(self, container: str) -> dict:
        return self._json("GET", f"/containers/{_quoted(container)}/json",
                          what=f"inspect container {container}")

    def containers(self, all: bool = False, filters: dict | None = None) -> list:
        query: dict = {"all": "1" if all else "0"}
        if filters:  # the engine wants every filter's values as a list (docker-py's convert_filters)
            query["filters"] = json.dumps({k: v if isinstance(v, list) else [v] for k, v in filters.items()})
        return self._json("GET", "/containers/json", query, what="list containers")

    def kill(self, container: str, signal: str = "SIGKILL") -> None:
        self._call("POST", f"/containers/{_quoted(container)}/kill", {"signal": signal},
                   what=f"kill {container}")

    def remove_container(self, container: str, force: bool = False) -> None:
        self._call("DELETE", f"/containers/{_quoted(container)}", {"force": "1" if force else "0"},
                   what=f"remove {container}")

    def close(self) -> None:
        """Nothing to close: each call has its own connection (docker-py's APIClient has a pool)."""

    # -- HTTP -----------------------------------------------------------------------------------------------
    def _json(self, method: str, path: str, query: dict | None = None, *, what: str):
        body = self._call(method, path, query, what=what)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise EngineError(0, f"the engine's answer is not JSON ({body[:80]!r})", what) from exc

    def _call(self, method: str, path: str, query: dict | None = None, *, what: str) -> bytes:
        target = f"{path}?{urlencode(query)}" if query else path
        request = f"{method} {target} HTTP/1.0\r\nHost: docker\r\nContent-Length: 0\r\n\r\n".encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(self.timeout)
            conn.connect(self.path)
            conn.sendall(request)
            chunks, size = [], 0
            while True:
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_ANSWER:
                    raise EngineError(0, f"the engine's answer is over {MAX_ANSWER} bytes", what)
        return _body(b"".join(chunks), what)


def _quoted(name: str) -> str:
    return quote(name, safe="/:")


def _body(answer: bytes, what: str) -> bytes:
    """The body of a whole HTTP answer, or :class:`EngineError` / :class:`NotFound` for an error status."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split(None, 2)
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise EngineError(0, f"not an HTTP answer ({answer[:80]!r})", what)
    status = int(parts[1])
    if status >= 400:
        try:
            detail = str(json.loads(body).get("message", ""))
        except (ValueError, AttributeError):
            detail = body[:200].decode("utf-8", "replace")
        raise (NotFound if status == 404 else EngineError)(status, detail, what)
    return body

