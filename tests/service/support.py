"""A real `grade serve` on a loopback port, for the service tests: started as a subprocess (the same command a
user runs), with its own data directory, local sandbox and tokens created in the store beforehand."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-c", "from harness.cli import main; main()", "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tokens(data_dir: Path, *specs, db: str | None = None) -> dict:
    """{"boss": secret, ...} for specs like ("admin", "boss"), ("candidate", "alice")."""
    from harness.service.server import open_store
    from harness.service.settings import Settings

    store = open_store(Settings.resolve(data_dir, db))
    out = {}
    for role, name in specs:
        secret, _ = store.create_token(role=role, name=name)
        out[name] = secret
    store.dispose()
    return out


class Server:
    def __init__(self, data_dir: Path, *, workers: int = 2, env: dict | None = None, sandbox: str = "local"):
        self.data_dir = Path(data_dir)
        self.workers = workers
        self.tag = secrets.token_hex(8)   # inherited by its grading processes: pids get reused, this does not
        self.env = {**os.environ, "GRADER_SANDBOX": sandbox, "PYTHONWARNINGS": "ignore", "GRADER_TEST_SERVER": self.tag,
                    **(env or {})}
        if "GRADER_DATABASE_URL" not in (env or {}):
            self.env.pop("GRADER_DATABASE_URL", None)     # SQLite in the data dir unless the test says so
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-serve.log"
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "Server":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([*SERVE, "--data-dir", str(self.data_dir), "--port", str(self.port),
                                      "--workers", str(self.workers)], stdout=log, stderr=log, env=self.env,
                                     cwd=str(self.data_dir.parent), start_new_session=True)
        log.close()
        self.starts += 1
        self.pids = getattr(self, "pids", []) + [self.proc.pid]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"grade serve exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"grade serve did not answer within {timeout} s:\n{self.log()[-3000:]}")

    def kill9(self) -> None:
        """SIGKILL the server process only (its grading processes die with it through PDEATHSIG)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.close_clients()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def client(self, token: str | None = None) -> httpx.Client:
        """One client per token, closed by :meth:`close_clients` (the fixtures' teardown)."""
        if not hasattr(self, "_clients"):
            self._clients = {}
        if (token, self.port) not in self._clients:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            self._clients[(token, self.port)] = httpx.Client(base_url=self.url, headers=headers, timeout=90)
        return self._clients[(token, self.port)]

    def close_clients(self) -> None:
        for c in getattr(self, "_clients", {}).values():
            c.close()
        self._clients = {}


def submit(client: httpx.Client, exercise: str, source: str, *, wait: float = 0, **fields) -> httpx.Response:
    return client.post("/v1/submissions", params={"wait": wait} if wait else None,
                       json={"exercise": exercise, "source": source, **fields})


def wait_done(client: httpx.Client, sub_id: str, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = client.get(f"/v1/submissions/{sub_id}")
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] in ("done", "infrastructure_error"):
            return body
        time.sleep(0.1)  # a grading takes ~0.3-1 s here: 0.25 s added ~0.12 s of waiting to each
    raise AssertionError(f"{sub_id} not graded within {timeout} s")


def store_rows(data_dir: Path) -> list[dict]:
    """Every submission row, read straight from the SQLite file (the truth)."""
    import sqlite3

    con = sqlite3.connect(str(Path(data_dir) / "grader.db"), timeout=30)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM submissions ORDER BY seq")]
    finally:
        con.close()


def error_of(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"}, body
    assert body["error"]["status"] == r.status_code
    return body["error"]


def dumps(x) -> str:
    return json.dumps(x, indent=1)[:2000]


def grading_processes_of(server_pids, tag: str | None = None) -> list[int]:
    """Grading processes (harness.service.queue.worker) whose server is one of ``server_pids`` and, given
    ``tag`` (a Server's), was started by that Server: a pid of a server killed long ago may be another test's
    server now."""
    wanted = {f"GRADER_SERVICE_PARENT={p}".encode() for p in server_pids}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"harness.service.queue.worker" not in (entry / "cmdline").read_bytes():
                continue
            env = set((entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if env & wanted and (tag is None or f"GRADER_TEST_SERVER={tag}".encode() in env):
            found.append(int(entry.name))
    return found


POSTGRES_ENV = "GRADER_TEST_POSTGRES_URL"


def postgres_url_or_skip() -> str:
    """The test Postgres (``bash .ci/postgres-setup.sh`` prints one); skipped outside CI when there is none."""
    import pytest

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{POSTGRES_ENV} is not set: CI must start a Postgres (.ci/postgres-setup.sh)")
        pytest.skip(f"no Postgres: set {POSTGRES_ENV} (e.g. $(bash .ci/postgres-setup.sh)); never skipped in CI")
    return url


class FreshPostgres:
    """A new database on the test server for one test, dropped afterwards."""

    def __init__(self, base_url: str):
        import secrets as _s

        from sqlalchemy import create_engine, text

        self.name = "t_" + _s.token_hex(6)
        self._admin_url = _driver(base_url)
        eng = create_engine(self._admin_url, isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(text(f'CREATE DATABASE "{self.name}"'))
        eng.dispose()
        self.url = base_url.rsplit("/", 1)[0] + "/" + self.name

    def drop(self) -> None:
        from sqlalchemy import create_engine, text

        eng = create_engine(self._admin_url, isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        eng.dispose()


def _driver(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1) if url.startswith("postgresql://") else url
