"""Two `grade serve` processes on one Postgres store, as behind a load balancer (docs/deploy.md): each webhook
is delivered once (issue 28 #5), the per-candidate limits hold across both (issue 24 #7), both sign with the
one key they are given, and no key material is in the database (issue 28 #6). Needs GRADER_TEST_POSTGRES_URL;
never skipped in CI."""

from __future__ import annotations

import collections
import hashlib
import hmac
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from tests.service.support import FreshPostgres, Server, make_tokens, postgres_url_or_skip, submit, wait_done

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parent.parent
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
MASTER = secrets.token_hex(32)


@pytest.fixture(scope="module")
def apis(tmp_path_factory):
    pg = FreshPostgres(postgres_url_or_skip())
    base = tmp_path_factory.mktemp("two-apis")
    tokens = make_tokens(base / "a", ("interviewer", "ivy"), ("candidate", "rita"), db=pg.url)
    env = {"GRADER_DATABASE_URL": pg.url, "GRADER_SECRET_KEY": MASTER, "GRADER_WEBHOOK_ALLOW": "127.0.0.1/32",
           "GRADER_RATE_PER_MINUTE": "4", "GRADER_MAX_IN_FLIGHT": "0", "GRADER_WEBHOOK_BACKOFF_S": "0.2"}
    servers = [Server(base / name, workers=1, env=env) for name in ("a", "b")]
    try:
        for s in servers:
            s.start()
        yield servers, tokens, pg
    finally:
        for s in servers:
            s.stop()
        pg.drop()


class _SlowReceiver:
    """Answers 200 after 0.3 s, so two senders that both picked a hook would both be seen sending it."""

    def __init__(self):
        self.hits: list[tuple[dict, bytes]] = []
        hits = self.hits

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hits.append((dict(self.headers), body))
                time.sleep(0.3)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/hook"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def test_each_webhook_is_delivered_once_by_two_api_processes(apis, monkeypatch, tmp_path):
    from harness.service.keys import server_key

    servers, tokens, _ = apis
    rx = _SlowReceiver()
    try:
        ids = []
        for i in range(6):
            ivy = servers[i % 2].client(tokens["ivy"])
            r = submit(ivy, "mha", WRONG, callback_url=rx.url, candidate=f"hook{i}")
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        for sid in ids:
            wait_done(servers[0].client(tokens["ivy"]), sid, timeout=180)
        deadline = time.monotonic() + 30
        while len({h["X-Grader-Delivery"] for h, _ in rx.hits}) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(2.0)     # both senders poll every 0.5 s: a second delivery would have come by now
        # one send per attempt: a second send of one attempt is two senders at once (a retry after a timeout
        # under load is another attempt, and allowed: delivery is at least once)
        per_attempt = collections.Counter((h["X-Grader-Delivery"], h["X-Grader-Attempt"]) for h, _ in rx.hits)
        assert len({d for d, _ in per_attempt}) == len(ids) and set(per_attempt.values()) == {1}, per_attempt
        monkeypatch.setenv("GRADER_SECRET_KEY", MASTER)
        key = server_key(tmp_path, "webhook")   # from GRADER_SECRET_KEY, as both servers have it
        for headers, body in rx.hits:
            want = "sha256=" + hmac.new(key.encode(), headers["X-Grader-Timestamp"].encode() + b"." + body,
                                        hashlib.sha256).hexdigest()
            assert hmac.compare_digest(headers["X-Grader-Signature"], want)
    finally:
        rx.close()


def test_the_rate_limit_holds_across_two_api_processes(apis):
    servers, tokens, _ = apis
    clients = [s.client(tokens["rita"]) for s in servers]

    def post(i):
        return submit(clients[i % 2], "mha", WRONG).status_code
    with ThreadPoolExecutor(12) as ex:
        codes = list(ex.map(post, range(12)))
    assert collections.Counter(codes) == {202: 4, 429: 8}, codes


def test_no_key_material_in_the_database(apis, monkeypatch, tmp_path):
    from harness.service.keys import server_key

    servers, tokens, pg = apis
    monkeypatch.setenv("GRADER_SECRET_KEY", MASTER)
    needles = [MASTER] + [server_key(tmp_path, p) for p in ("webhook", "session")]
    eng = create_engine(pg.url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with eng.connect() as c:
            tables = inspect(c).get_table_names()
            assert "server_secrets" not in tables
            dump = "\n".join(repr(tuple(r)) for t in tables for r in c.execute(text(f'SELECT * FROM "{t}"')))
    finally:
        eng.dispose()
    assert "hook0" in dump                      # the dump did read the rows
    for n in needles:
        assert n not in dump
