"""kill -9 of `grade serve` at random moments under load, then restart: every submission that got a 2xx ends
with exactly one report; none is lost, none is stored twice, none is graded into two reports.

Clients retry with the same Idempotency-Key until they get a 2xx (as a real client must when the server
vanishes mid-request), so a submission stored just before the kill is not stored again on the retry."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.service.support import Server, grading_processes_of, make_tokens, store_rows

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
N_SUBMISSIONS = 24
N_CLIENTS = 6
KILLS = 4


@pytest.mark.slow
@pytest.mark.matrix   # a load run (issue 24): the default run's kill -9 and restart is tests/test_service_postgres.py's
def test_kill_9_under_load_then_restart_loses_nothing_and_writes_one_report_each(tmp_path):
    rng = random.Random(11)
    data = tmp_path / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"))
    server = Server(data, workers=2, env={"GRADER_MAX_IN_FLIGHT": "0", "GRADER_RATE_PER_MINUTE": "0"}).start()
    acked: dict[str, str] = {}
    expected: dict[str, str] = {}
    lock = threading.Lock()
    todo = list(range(N_SUBMISSIONS))
    stop_killing = threading.Event()

    def client():
        with httpx.Client(base_url=server.url, timeout=30,
                          headers={"Authorization": f"Bearer {tokens['ivy']}"}) as c:
            while True:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                key = f"crash-{i}"
                source = REF if i % 3 else WRONG
                expected[key] = "passed" if i % 3 else "failed"
                for _ in range(600):
                    try:
                        r = c.post("/v1/submissions", headers={"Idempotency-Key": key},
                                   json={"exercise": "mha", "source": source, "candidate": f"c{i % 5}"})
                    except httpx.HTTPError:
                        time.sleep(0.2)
                        continue
                    if r.status_code in (200, 202):
                        with lock:
                            acked[key] = r.json()["id"]
                        break
                    assert r.status_code in (429, 503) or r.status_code >= 500, r.text
                    time.sleep(0.2)
                else:
                    raise AssertionError(f"{key} never accepted")

    def killer():
        for _ in range(KILLS):
            if stop_killing.wait(rng.uniform(0.5, 3.0)):
                return
            server.kill9()
            time.sleep(rng.uniform(0.0, 0.5))
            server.start()

    threads = [threading.Thread(target=client) for _ in range(N_CLIENTS)]
    k = threading.Thread(target=killer)
    for t in threads:
        t.start()
    k.start()
    for t in threads:
        t.join(timeout=600)
    k.join(timeout=600)
    stop_killing.set()
    try:
        assert server.starts >= 2, "the server was never killed"
        assert len(acked) == N_SUBMISSIONS
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            rows = store_rows(data)
            if all(r["status"] in ("done", "infrastructure_error") for r in rows):
                break
            time.sleep(0.5)
        # one row per idempotency key, and it is the id the client was given
        by_key = {}
        for r in rows:
            assert r["idempotency_key"] not in by_key, f"{r['idempotency_key']} stored twice"
            by_key[r["idempotency_key"]] = r
        assert set(by_key) == set(acked)
        for key, sub_id in acked.items():
            r = by_key[key]
            assert r["id"] == sub_id
            assert r["status"] == "done", (key, r["status"], r["error_message"])
            assert r["reports_written"] == 1, f"{key}: {r['reports_written']} reports"
            report = json.loads(r["report_json"])
            assert report["verdict"] == expected[key] == r["verdict"]
        print(f"\n{server.starts - 1} kill -9s; attempts per submission: "
              f"{sorted(r['attempts'] for r in rows)}")
    finally:
        server.stop()
    deadline = time.monotonic() + 20
    while grading_processes_of(server.pids, server.tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert grading_processes_of(server.pids, server.tag) == [], "grading processes outlived their server"
