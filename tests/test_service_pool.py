"""The grading state machine on a real SQLite store, without a server: claims are exclusive, only the attempt
holding the claim writes the report, infrastructure faults are retried a bounded number of times and never
become the candidate's verdict, recovery re-queues what a dead process left running."""

from __future__ import annotations

import threading

import pytest

from harness.service.queue.pool import grade_submission
from harness.service.server import open_store
from harness.service.settings import Settings
from tests.service.support import FreshPostgres, postgres_url_or_skip

REPORT = {"schema": "attention-grader/report/v1", "exercise": "mha", "track": "numpy", "verdict": "passed",
          "score": 3.0, "max_score": 3.0, "tests": [], "diagnosis": [], "environment": {"sandbox": "local"},
          "submission": {"sha256": "x", "size": 1}, "timings": {}}


class FakeRunner:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0
        self.tasks = []

    def run(self, task, timeout, heartbeat=None, every=10.0):
        self.calls += 1
        self.tasks.append(task)
        if heartbeat:
            heartbeat()
        return self.answers.pop(0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(tmp_path, request):
    """The same store tests on SQLite (always) and Postgres (GRADER_TEST_POSTGRES_URL; never skipped in CI)."""
    pg = None
    db = None
    if request.param == "postgres":
        pg = FreshPostgres(postgres_url_or_skip())
        db = pg.url
    settings = Settings.resolve(tmp_path / "data", db, retry_backoff_s=0.0, max_attempts=3)
    (settings.data_dir / "work").mkdir(parents=True)
    store = open_store(settings)
    yield store, settings
    store.dispose()
    if pg is not None:
        pg.drop()


def new(store, **kw):
    row, created = store.create_submission(**{"exercise": "mha", "track_requested": "auto", "track": "numpy",
                                              "candidate": "alice", "filename": "a.py", "seed": 0,
                                              "callback_url": None, "source": "x = 1\n", "token_id": 1,
                                              "idempotency_key": None, **kw})
    assert created
    return row["id"]


def test_report_is_written_once_and_a_second_call_is_a_no_op(env):
    store, settings = env
    sid = new(store)
    runner = FakeRunner({"kind": "report", "report": REPORT})
    assert grade_submission(store, settings, sid, runner, owner="t") == "done"
    assert grade_submission(store, settings, sid, runner, owner="t") is None
    row = store.get(sid)
    assert row["status"] == "done" and row["reports_written"] == 1 and runner.calls == 1
    # a fresh seed per submission: its oracle answers are kept in memory only (tests/test_answers.py)
    assert runner.tasks[0]["answers_on_disk"] is False and runner.tasks[0]["warm"] is True
    assert runner.tasks[0]["keep_answers"] is False   # its fresh seed: no answer is kept, not even in memory


def test_infrastructure_faults_are_retried_then_graded(env):
    store, settings = env
    sid = new(store)
    fault = {"kind": "infrastructure", "message": "sandbox could not start"}
    runner = FakeRunner(fault, fault, {"kind": "report", "report": REPORT})
    assert grade_submission(store, settings, sid, runner, owner="t") == "queued"
    assert store.get(sid)["error_message"] == "sandbox could not start"
    assert grade_submission(store, settings, sid, runner, owner="t") == "queued"
    assert grade_submission(store, settings, sid, runner, owner="t") == "done"
    row = store.get(sid)
    assert row["attempts"] == 3 and row["verdict"] == "passed" and row["reports_written"] == 1


def test_infrastructure_faults_past_the_cap_end_as_infrastructure_error_not_a_verdict(env):
    store, settings = env
    sid = new(store)
    fault = {"kind": "infrastructure", "message": "the grading process died"}
    runner = FakeRunner(fault, fault, fault)
    statuses = [grade_submission(store, settings, sid, runner, owner="t") for _ in range(3)]
    assert statuses == ["queued", "queued", "infrastructure_error"]
    row = store.get(sid)
    assert row["verdict"] is None and row["report_json"] is None and row["reports_written"] == 0
    assert grade_submission(store, settings, sid, runner, owner="t") is None   # nothing left to do


def test_a_stale_attempt_cannot_write_its_report(env):
    store, settings = env
    sid = new(store)
    first = store.claim(sid, "a", 60)
    assert store.claim(sid, "b", 60) is None                     # exclusive
    assert store.recover(all_running=True) == [sid]               # the process holding it died
    second = store.claim(sid, "b", 60)
    assert second["attempts"] == first["attempts"] + 1
    assert store.finish(sid, first["attempts"], report=REPORT, npz=None, webhook=None) is None
    assert store.finish(sid, second["attempts"], report=REPORT, npz=b"npz", webhook=None)["status"] == "done"
    assert store.get(sid)["reports_written"] == 1 and store.get_artifact(sid) == b"npz"


def test_a_regrade_does_not_reopen_the_fence_for_a_grader_of_an_earlier_life(env):
    """Issue 28 #3: grader 1 claims, its lease expires, recovery, regrade, grader 2 claims: grader 1's late finish
    is refused and grader 2's report is kept. A regrade starts the retry count again, not the fence."""
    store, settings = env
    sid = new(store)
    one = store.claim(sid, "grader-1", -1)          # its lease is already over
    assert one["attempts"] == 1
    assert store.recover(all_running=False) == [sid]
    assert store.regrade(sid)["status"] == "queued"
    two = store.claim(sid, "grader-2", 60)
    assert two["attempts"] == 1                     # retries are counted afresh...
    assert two["lease"] != one["lease"]             # ...the fence is not
    assert store.finish(sid, one["lease"], report=dict(REPORT, verdict="failed"), npz=None, webhook=None) is None
    assert store.renew(sid, one["lease"], 60) is False
    assert store.fail(sid, one["lease"], "late", max_attempts=3, backoff_s=0) is None
    assert store.finish(sid, two["lease"], report=REPORT, npz=None, webhook=None)["verdict"] == "passed"
    row = store.get(sid)
    assert row["verdict"] == "passed" and row["reports_written"] == 1


def test_webhooks_are_claimed_once_and_their_attempts_counted_in_the_store(env):
    """Issue 28 #5 (the store's half): two senders claiming at once get disjoint hooks; a failed delivery is
    due again after its backoff with its attempt counted once."""
    store, settings = env
    sid = new(store)
    row = store.claim(sid, "g", 60)
    store.finish(sid, row["lease"], report=REPORT, npz=None, webhook=("http://example.invalid/h", "{}"))
    got: list[list[dict]] = []
    barrier = threading.Barrier(4)

    def take():
        barrier.wait()
        got.append(store.claim_webhooks(hold_s=60))
    threads = [threading.Thread(target=take) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    claimed = [h for batch in got for h in batch]
    assert len(claimed) == 1 and claimed[0]["attempts"] == 1
    assert store.claim_webhooks() == []             # held while it is being sent
    store.webhook_result(claimed[0], ok=False, error="HTTP 500", max_attempts=2, backoff_s=0)
    again = store.claim_webhooks()
    assert [h["attempts"] for h in again] == [2]
    store.webhook_result(again[0], ok=False, error="HTTP 500", max_attempts=2, backoff_s=0)
    hook = store.webhooks_for(sid)[0]
    assert hook["gave_up"] and hook["attempts"] == 2 and store.claim_webhooks() == []


def test_lease_recovery_only_takes_expired_rows(env):
    store, settings = env
    a, b = new(store), new(store)
    store.claim(a, "x", -1)     # already expired
    store.claim(b, "y", 600)
    assert store.recover(all_running=False) == [a]
    assert store.get(b)["status"] == "running"


def test_concurrent_claims_have_one_winner(env):
    store, settings = env
    sid = new(store)
    wins = []

    def claim(i):
        if store.claim(sid, f"o{i}", 60) is not None:
            wins.append(i)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1


def test_idempotency_key_is_per_token(env):
    store, settings = env
    kw = {"exercise": "mha", "track_requested": "auto", "track": "numpy", "candidate": None, "filename": "a.py",
          "seed": 0, "callback_url": None, "source": "x = 1\n", "idempotency_key": "k"}
    a, created_a = store.create_submission(token_id=1, **kw)
    b, created_b = store.create_submission(token_id=1, **kw)
    c, created_c = store.create_submission(token_id=2, **kw)
    assert created_a and not created_b and created_c and a["id"] == b["id"] != c["id"]


def test_sqlite_reads_do_not_wait_for_the_write_lock_and_writes_still_do(tmp_path):
    """issue 27: the status poll and every request's token check read in a deferred transaction (a WAL snapshot),
    so a write holding SQLite's lock does not hold them up (nor they it); writes still take the lock first
    (BEGIN IMMEDIATE) and wait for it, one at a time. Here another connection holds the lock for 3 s."""
    import sqlite3
    import time

    settings = Settings.resolve(tmp_path / "data", None)
    store = open_store(settings)
    try:
        sid = new(store)
        secret, _ = store.create_token(role="candidate", name="alice")
        holder = sqlite3.connect(store.url.split("///", 1)[1], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE submissions SET filename = 'b.py' WHERE id = ?", (sid,))
        wrote = threading.Event()
        writer = threading.Thread(target=lambda: (store.bump("redeliveries"), wrote.set()))
        t0 = time.monotonic()
        writer.start()
        row, token = store.get(sid), store.find_token(secret)
        read_s = time.monotonic() - t0
        assert read_s < 1.5, read_s                              # not held up by the lock
        assert row["filename"] == "a.py" and token is not None    # the last committed state
        assert not wrote.wait(1.5)                               # the write waits for the lock ...
        holder.execute("COMMIT")
        assert wrote.wait(30)                                    # ... and gets it once it is free
        writer.join(30)
        assert store.get(sid)["filename"] == "b.py"
        holder.close()
    finally:
        store.dispose()


def test_sqlite_connections_are_kept_for_as_many_threads_as_the_api_runs_at_once(tmp_path):
    """issue 27: the API answers on up to 40 threads at once; with SQLAlchemy's default pool (5 kept) every
    checkout past the fifth opened a connection, ran the pragmas and closed it again (~a third of the API's CPU
    per submission under bench_service's 20 clients). Twenty threads reading at once, three times over, open
    twenty connections, not one a checkout."""
    import time

    from sqlalchemy import event

    store = open_store(Settings.resolve(tmp_path / "data", None))
    try:
        sid = new(store)
        opened = []
        event.listen(store.engine, "connect", lambda *_: opened.append(1))
        store.engine.dispose()                                   # start from an empty pool
        barrier = threading.Barrier(20)

        def read():
            for _ in range(3):
                barrier.wait(30)
                with store.engine.connect() as conn:            # what every request's session checks out
                    conn.exec_driver_sql("SELECT 1")
                    time.sleep(0.05)                             # all twenty hold one at once
                assert store.get(sid)["id"] == sid

        threads = [threading.Thread(target=read) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(opened) <= 20, len(opened)                    # the default pool: 35 here
    finally:
        store.dispose()


def test_a_postgres_that_never_answers_is_an_error_in_seconds_not_a_wait_for_tcp(monkeypatch):
    """A store whose server takes the connection but never speaks (a dead host behind a live port, a namespace
    whose packets go nowhere) failed only when TCP gave up, minutes later: a worker that never reports alive,
    a request that never ends. Now the connection attempt ends after PG_CONNECT_TIMEOUT_S (libpq's floor is 2 s)."""
    import socket
    import time

    from sqlalchemy.exc import OperationalError

    from harness.service.store import repository
    from harness.service.store.repository import Store

    monkeypatch.setattr(repository, "PG_CONNECT_TIMEOUT_S", 2)
    with socket.socket() as mute:               # accepts into its backlog, never answers the startup packet
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        store = Store(f"postgresql+psycopg://grader@127.0.0.1:{mute.getsockname()[1]}/grader")
        t0 = time.monotonic()
        try:
            with pytest.raises(OperationalError):
                store.ping()
        finally:
            store.dispose()
        assert time.monotonic() - t0 < 8
