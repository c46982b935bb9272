"""`grade tokens ...` and `grade serve` from the command line: tokens hashed and revocable, the shared
--data-dir / GRADER_DATA_DIR settings, one server per data directory; and a grader fault that never becomes
the candidate's verdict (the grading watchdog kills the grading process: retried, then infrastructure_error)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service.support import Server, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()


def grade(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})})


def test_tokens_create_list_revoke_and_expiry(tmp_path):
    data = tmp_path / "data"
    r = grade("tokens", "create", "--role", "candidate", "--name", "Ada", "--expires", "12h", "--data-dir", data)
    assert r.returncode == 0, r.stderr
    secret = r.stdout.strip()
    assert secret.startswith("gr_") and len(secret) > 40 and "candidate 'Ada'" in r.stderr
    with sqlite3.connect(data / "grader.db") as con:
        stored = con.execute("SELECT token_hash, candidate, expires_at FROM tokens").fetchall()
    assert secret not in str(stored) and stored[0][1] == "Ada" and stored[0][2] is not None
    r = grade("tokens", "list", env={"GRADER_DATA_DIR": str(data)})        # the env var, same store
    assert r.returncode == 0 and "Ada" in r.stdout and secret not in r.stdout and secret[:10] in r.stdout
    assert grade("tokens", "revoke", "1", "--data-dir", data).returncode == 0
    assert "revoked" in grade("tokens", "list", "--data-dir", data).stdout
    assert grade("tokens", "revoke", "1", "--data-dir", data).returncode == 2
    bad = grade("tokens", "create", "--role", "admin", "--name", "x", "--expires", "soon", "--data-dir", data)
    assert bad.returncode == 2 and "--expires" in bad.stderr
    assert grade("tokens", "create", "--role", "wizard", "--name", "x", "--data-dir", data).returncode == 2
    assert len(grade("tokens", "webhook-secret", "--data-dir", data).stdout.strip()) == 64


def test_serve_prints_its_data_dir_and_refuses_a_second_server_on_it(tmp_path):
    data = tmp_path / "data"
    make_tokens(data, ("admin", "a"))
    server = Server(data).start()
    try:
        assert f"data directory {data}" in server.log()
        second = grade("serve", "--data-dir", data, "--port", "9", timeout=60)
        assert second.returncode == 2 and "another `grade serve` is using" in second.stderr
        assert httpx.get(server.url + "/healthz").status_code == 200
    finally:
        server.stop()


def test_a_grader_fault_is_retried_then_infrastructure_error_never_a_verdict(tmp_path):
    data = tmp_path / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"))
    server = Server(data, workers=1, env={"GRADER_SUBMISSION_TIMEOUT_S": "3", "GRADER_MAX_ATTEMPTS": "2",
                                          "GRADER_RETRY_BACKOFF_S": "0.2",
                                          "GRADER_WEBHOOK_ALLOW": "127.0.0.1/32"}).start()
    try:
        hits = []

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                hits.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=hook.serve_forever, daemon=True).start()
        ivy = server.client(tokens["ivy"])
        stuck = submit(ivy, "mha", "import time\ntime.sleep(30)\n" + REF,
                       callback_url=f"http://127.0.0.1:{hook.server_address[1]}/h").json()
        t0 = time.monotonic()
        done = wait_done(ivy, stuck["id"], timeout=90)
        assert done["status"] == "infrastructure_error" and done["verdict"] is None and done["attempts"] == 2
        assert "did not finish within 3 s" in done["error"]
        r = ivy.get(f"/v1/submissions/{stuck['id']}/report")
        assert r.status_code == 409
        assert time.monotonic() - t0 < 60
        # the pool replaced its grading process and goes on grading
        ok = submit(ivy, "mha", REF, wait=60).json()
        assert ok["verdict"] == "passed"
        text = ivy.get("/metrics").text
        assert 'grader_verdicts_total{exercise="mha",verdict="infrastructure_error"} 1' in text
        assert 'grader_grading_retries_total{exercise="mha"} 1' in text
        assert [r["reports_written"] for r in store_rows(data)] == [0, 1]
        deadline = time.monotonic() + 20
        while not hits and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hits and hits[0]["submission"]["status"] == "infrastructure_error"
        assert hits[0]["submission"]["verdict"] is None and hits[0]["submission"]["id"] == stuck["id"]
        hook.shutdown()
        hook.server_close()
    finally:
        server.stop()
