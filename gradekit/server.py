"""Where the grading service is and who the candidate is to it: the server URL (`--server`, GRADER_SERVER or
`grade login`'s file), the bearer token (`--token`, GRADER_TOKEN or the file) and a small JSON client.

An invitation link (`grade login 'https://HOST/join?code=CODE'`, what a round's invitation carries) is exchanged
for a candidate token at login: ``POST /v1/join {"code": CODE}`` → ``{"token": ...}`` (single use: the link
then no longer opens the page either)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .exercises import KitUsageError

SERVER_FORM = "http://HOST:PORT or HOST:PORT (e.g. http://127.0.0.1:8000 or https://grader.example.com)"


class ServerUnreachable(Exception):
    """The server did not answer (exit 3: not the candidate's fault, try again)."""


def normalize_server(url: str, what: str = "--server") -> str:
    """``http(s)://host[:port][/prefix]`` without a trailing slash; a bare ``host:port`` is http."""
    from urllib.parse import urlsplit

    raw = (url or "").strip()
    if not raw:
        raise KitUsageError(f"no server: pass --server or set GRADER_SERVER ({SERVER_FORM})")
    full = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(full)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        port_ok = False
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok \
            or parts.query or parts.fragment or " " in raw:
        raise KitUsageError(f"{what}: {raw!r} is not a server address; expected {SERVER_FORM}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def config_path() -> Path:
    base = os.environ.get("GRADER_CONFIG_DIR") or Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") \
        / "attention-grader"
    return Path(base) / "login.json"


def saved() -> dict:
    try:
        return json.loads(config_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def save(server: str, token: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)   # the token: readable by its owner only
    with os.fdopen(fd, "w") as f:
        json.dump({"server": server, "token": token}, f)
    os.replace(tmp, path)
    return path


def resolve(server: str | None, token: str | None) -> tuple[str, str]:
    """(server, token) from the options (which click/argparse fill from GRADER_SERVER / GRADER_TOKEN), else from
    the file `grade login` wrote."""
    stored = saved()
    base = normalize_server(server or os.environ.get("GRADER_SERVER") or stored.get("server") or "")
    token = token or os.environ.get("GRADER_TOKEN") or stored.get("token")
    if not token:
        raise KitUsageError("no token: run `grade login TOKEN-OR-INVITATION-LINK --server URL`, pass --token or "
                            "set GRADER_TOKEN")
    return base, token


def request(method: str, url: str, token: str | None, body: dict | None = None, timeout: float = 90.0):
    """(status, JSON answer); ServerUnreachable when nothing answered."""
    import urllib.error  # here: `grade check` never pays for urllib/http.client/email
    import urllib.request

    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read() or b"{}")
        except ValueError:
            answer = {}
        return exc.code, answer
    except (urllib.error.URLError, OSError) as exc:
        raise ServerUnreachable(f"cannot reach {url.split('/v1/')[0]}: {getattr(exc, 'reason', exc)}") from None


def error_message(status: int, answer: dict) -> str:
    return (answer.get("error") or {}).get("message") or f"HTTP {status}"


def invitation(value: str) -> tuple[str, str] | None:
    """(server, code) of an invitation link ``http(s)://HOST[/PREFIX]/join?code=CODE``, else None."""
    from urllib.parse import parse_qs, urlsplit

    if "://" not in value:
        return None
    parts = urlsplit(value.strip())
    code = parse_qs(parts.query).get("code", [""])[0]
    if not parts.path.rstrip("/").endswith("/join") or not code:
        return None
    prefix = parts.path.rstrip("/")[: -len("/join")]
    return normalize_server(f"{parts.scheme}://{parts.netloc}{prefix}", "the invitation link"), code


def login(value: str, server: str | None) -> tuple[str, Path]:
    """Save a token (checked against the server) or the token an invitation link is exchanged for."""
    invited = invitation(value)
    if invited:
        base, code = invited
        status, answer = request("POST", f"{base}/v1/join", None, {"code": code})
        if status >= 400 or not answer.get("token"):
            raise KitUsageError(f"{base} refused the invitation (HTTP {status}: {error_message(status, answer)}); "
                                f"an invitation works once and until it expires: ask for a new link or a token")
        token = answer["token"]
    else:
        if "://" in value or "/" in value:
            raise KitUsageError(f"{value!r} is neither a token nor an invitation link (https://HOST/join?code=...)")
        base = normalize_server(server or os.environ.get("GRADER_SERVER") or saved().get("server") or "")
        token = value.strip()
        status, answer = request("GET", f"{base}/v1/exercises", token)
        if status == 401:
            raise KitUsageError(f"{base} does not accept this token (HTTP 401): {error_message(status, answer)}")
        if status >= 400:
            raise KitUsageError(f"{base} answered HTTP {status}: {error_message(status, answer)}")
    return base, save(base, token)
