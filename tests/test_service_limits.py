"""Per-candidate rate limit and in-flight cap (429 + Retry-After), a full queue (503 + Retry-After), signed and
retried webhooks, and `grade submit` (same summary and exit codes as `grade run`), against a real server."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.service.support import Server, error_of, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()


def slow(seconds: float = 5.0) -> str:
    """The reference, whose import waits until ``seconds`` from now (wall clock): submissions sent in that time are
    all in flight together, and those that start after it grade at once (a fixed sleep in each made the last of a
    full queue wait for every other's sleep in turn)."""
    return f"import time\ntime.sleep(max(0.0, {time.time() + seconds!r} - time.time()))\n" + REF


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("svclim") / "data"
    tokens = make_tokens(data, ("admin", "boss"), ("interviewer", "ivy"), ("candidate", "fay"),
                         ("candidate", "gus"))
    server = Server(data, workers=1, env={"GRADER_RATE_PER_MINUTE": "3", "GRADER_MAX_IN_FLIGHT": "2",
                                          "GRADER_QUEUE_MAX": "3", "GRADER_WEBHOOK_BACKOFF_S": "0.2",
                                          "GRADER_WEBHOOK_ALLOW": "127.0.0.1/32"}).start()
    server.tokens = tokens
    yield server
    server.stop()


def test_in_flight_cap_is_429_with_retry_after(srv):
    fay = srv.client(srv.tokens["fay"])
    source = slow()
    codes = [submit(fay, "mha", source).status_code for _ in range(2)]
    assert codes == [202, 202]
    r = submit(fay, "mha", source)
    assert r.status_code == 429 and error_of(r)["code"] == "too_many_in_flight"
    assert int(r.headers["retry-after"]) >= 1
    assert sum(row["candidate"] == "fay" for row in store_rows(srv.data_dir)) == 2
    assert 'grader_rejections_total{reason="in_flight"} 1' in srv.client(srv.tokens["ivy"]).get("/metrics").text
    for row in store_rows(srv.data_dir):
        wait_done(srv.client(srv.tokens["ivy"]), row["id"])


def test_rate_limit_is_429_with_retry_after(srv):
    gus = srv.client(srv.tokens["gus"])
    for _ in range(3):
        r = submit(gus, "mha", REF, wait=60)
        assert r.status_code == 200, r.text
    r = submit(gus, "mha", REF)
    assert r.status_code == 429 and error_of(r)["code"] == "rate_limited"
    assert 1 <= int(r.headers["retry-after"]) <= 60
    text = srv.client(srv.tokens["ivy"]).get("/metrics").text
    assert 'grader_rejections_total{reason="rate_limit"} 1' in text


def test_full_queue_is_503_with_retry_after(srv):
    ivy = srv.client(srv.tokens["ivy"])
    codes, source = [], slow()
    for _ in range(6):
        r = submit(ivy, "mha", source)
        codes.append(r.status_code)
        if r.status_code == 503:
            assert error_of(r)["code"] == "queue_full" and r.headers["retry-after"] == "10"
            break
    assert codes[-1] == 503 and set(codes[:-1]) == {202}
    for row in store_rows(srv.data_dir):
        wait_done(ivy, row["id"], timeout=240)


class _Hooks(BaseHTTPRequestHandler):
    hits: list = []
    fail_first = 1

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).hits.append((dict(self.headers), body))
        code = 500 if len(type(self).hits) <= type(self).fail_first else 204
        self.send_response(code)
        self.end_headers()

    def log_message(self, *a):
        pass


def test_webhook_is_signed_retried_and_only_for_staff(srv):
    hooks = ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    t = threading.Thread(target=hooks.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{hooks.server_address[1]}/hook"
        ivy = srv.client(srv.tokens["ivy"])
        r = submit(ivy, "mha", REF, callback_url=url, candidate="hal", wait=60)
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 30
        while len(_Hooks.hits) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_Hooks.hits) == 2, "the webhook was not retried after a 500"
        from harness.service.keys import server_key

        secret = server_key(srv.data_dir, "webhook")
        for headers, body in _Hooks.hits:
            ts = headers["X-Grader-Timestamp"]
            want = "sha256=" + hmac.new(secret.encode(), ts.encode() + b"." + body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(headers["X-Grader-Signature"], want)
            payload = json.loads(body)
            assert payload["event"] == "submission.finished"
            assert payload["submission"]["id"] == r.json()["id"] and payload["submission"]["verdict"] == "passed"
        fay = srv.client(srv.tokens["fay"])
        assert submit(fay, "mha", REF, callback_url=url).status_code == 403
    finally:
        hooks.shutdown()
        hooks.server_close()


def _grade(*args, env=None, cwd=None):
    import os

    return subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "GRADER_SANDBOX": "local", "PYTHONWARNINGS": "ignore", **(env or {})})


def test_grade_submit_prints_what_grade_run_prints_with_the_same_exit_codes(srv, tmp_path):
    wrong = ROOT / "examples" / "mha_wrong_scale.py"
    env = {"GRADER_TOKEN": srv.tokens["ivy"]}
    via_api = _grade("submit", wrong, "--exercise", "mha", "--server", srv.url, "--wait", "--seed", "0", env=env,
                     cwd=tmp_path)   # grade run's default seed (the service draws a random one unless staff name it)
    local = _grade("run", "mha", wrong, "--sandbox", "local", cwd=tmp_path)
    assert via_api.returncode == local.returncode == 1, via_api.stderr
    # timings differ; so does where the failing tests not shown can be read (the JSON report, the page)
    strip = lambda out: [ln.split("  [")[0].split(" more failing tests")[0] for ln in out.splitlines()]  # noqa: E731
    first, *summary = via_api.stdout.splitlines()
    assert re.fullmatch(rf"submitted \w+: (queued|running|done)  {srv.url}/submissions/\w+", first), first
    assert strip("\n".join(summary)) == strip(local.stdout)
    assert "more failing tests (see the submission's page)" in via_api.stdout and "JSON" not in via_api.stdout
    assert "more failing tests (--json PATH writes them all)" in local.stdout
    ok = _grade("submit", ROOT / "reference" / "mha_numpy.py", "--exercise", "mha", "--server", srv.url, "--wait",
                env=env, cwd=tmp_path)
    assert ok.returncode == 0 and "PASSED" in ok.stdout
    bad = _grade("submit", wrong, "--exercise", "mah", "--server", srv.url, "--wait", env=env, cwd=tmp_path)
    assert bad.returncode == 2 and "did you mean 'mha'" in bad.stderr
    noauth = _grade("submit", wrong, "--exercise", "mha", "--server", srv.url, "--token", "gr_wrong", cwd=tmp_path)
    assert noauth.returncode == 2 and "401" in noauth.stderr
    down = _grade("submit", wrong, "--exercise", "mha", "--server", "http://127.0.0.1:9", "--wait", env=env,
                  cwd=tmp_path)
    assert down.returncode == 3 and "cannot reach" in down.stderr
    missing = _grade("submit", tmp_path / "nope.py", "--exercise", "mha", "--server", srv.url, env=env)
    assert missing.returncode == 2


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.2:6379/",
                                 "http://[::1]:5432/", "http://10.0.0.5/", "http://[::ffff:10.0.0.5]/",
                                 "http://0.0.0.0:8080/", "http://[fd00:ec2::254]/"])
def test_a_callback_to_an_internal_address_is_refused_at_intake(srv, url):
    """Issue 28 #1: literal internal addresses are a 422 at once (names are checked at every delivery)."""
    r = submit(srv.client(srv.tokens["ivy"]), "mha", REF, callback_url=url, candidate="ssrf")
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_callback_url", r.text
