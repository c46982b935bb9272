"""The queue's parts against a real Redis (GRADER_TEST_REDIS_URL, one clean database per test) and the store
on SQLite and Postgres: the outbox (a broker outage at submit delays, never loses), messages the broker lost
are sent again, a redelivered message for a finished row does nothing, an expired lease is taken over,
interactive work goes before CI batches, `grade reconcile`, the workers API and page."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from harness.service.queue.actors import WorkerContext, declare_actors
from harness.service.queue.broker import Broker
from harness.service.queue.engine import reconcile
from harness.service.server import open_store
from harness.service.settings import Settings
from tests.service.support import FreshPostgres, Server, make_tokens, postgres_url_or_skip, submit, wait_done
from tests.test_service_pool import REPORT, FakeRunner, new

pytestmark = pytest.mark.redis


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def env(tmp_path, request, redis_url):
    pg = None
    db = None
    if request.param == "postgres":
        pg = FreshPostgres(postgres_url_or_skip())
        db = pg.url
    settings = Settings.resolve(tmp_path / "data", db, retry_backoff_s=0.0, max_attempts=3, broker_url=redis_url,
                                outbox_grace_s=0.0, lease_s=30.0)
    (settings.data_dir / "work").mkdir(parents=True)
    store = open_store(settings)
    broker = Broker(redis_url, settings)
    yield store, settings, broker
    broker.close()
    store.dispose()
    if pg is not None:
        pg.drop()


def test_a_broker_outage_at_submit_delays_and_the_reconciler_sends_it(env):
    from harness.service.queue.engine import QueueEngine

    store, settings, broker = env
    down = Settings.resolve(settings.data_dir, settings.database_url, broker_url="redis://127.0.0.1:1/0")
    engine = QueueEngine(store, down, embedded=False)
    sid = new(store)
    engine.enqueue(sid, "interactive")          # logs, does not raise: the row is committed already
    engine.broker.close()
    row = store.get(sid)
    assert row["status"] == "queued" and row["enqueued_at"] is None
    actors = declare_actors(broker, lambda: None)
    assert reconcile(store, broker, actors, settings) == {"expired": 0, "sent": 1, "lost": 0}
    row = store.get(sid)
    assert row["enqueued_at"] is not None and broker.holds("interactive", row["message_id"]) is True
    assert reconcile(store, broker, actors, settings)["sent"] == 0    # held: nothing sent twice
    assert broker.depths()["interactive"] == 1


def test_messages_the_broker_lost_are_sent_again_and_counted(env):
    import redis

    store, settings, broker = env
    actors = declare_actors(broker, lambda: None)
    ids = [new(store, candidate=f"c{i}") for i in range(3)]
    assert reconcile(store, broker, actors, settings)["sent"] == 3
    redis.Redis.from_url(settings.broker_url).flushdb()    # a Redis restart without persistence
    assert all(broker.holds("interactive", store.get(i)["message_id"]) is False for i in ids)
    assert reconcile(store, broker, actors, settings) == {"expired": 0, "sent": 3, "lost": 3}
    assert store.counters()["redeliveries"] == 3
    assert broker.depths()["interactive"] == 3


def test_a_redelivered_message_for_a_finished_row_does_nothing(env):
    store, settings, broker = env
    sid = new(store)
    runner = FakeRunner({"kind": "report", "report": REPORT})
    ctx = WorkerContext(store, settings, broker, owner="w1", kind="worker", concurrency=1,
                        runner_factory=lambda: runner)
    assert ctx.grade(sid) == "done"
    assert ctx.grade(sid) is None           # the same message again (at-least-once): no second grading
    row = store.get(sid)
    assert row["reports_written"] == 1 and runner.calls == 1 and ctx.graded == 1


def test_an_expired_lease_is_taken_over_and_only_the_new_attempt_writes(env):
    from harness.service.queue.pool import grade_submission

    store, settings, broker = env
    sid = new(store)
    first = store.claim(sid, "dead-worker", lease_s=-1.0)      # claimed by a worker that then died
    assert first["attempts"] == 1
    runner = FakeRunner({"kind": "report", "report": REPORT})
    assert grade_submission(store, settings, sid, runner, owner="w2") == "done"
    row = store.get(sid)
    assert row["attempts"] == 2 and row["reports_written"] == 1
    assert store.finish(sid, 1, report=REPORT, npz=None, webhook=None) is None   # the dead one can't write
    assert store.counters()["lease_expiries"] == 1


def test_a_live_lease_is_not_taken_over(env):
    from harness.service.queue.pool import grade_submission

    store, settings, broker = env
    sid = new(store)
    store.claim(sid, "busy-worker", lease_s=60.0)
    runner = FakeRunner({"kind": "report", "report": REPORT})
    assert grade_submission(store, settings, sid, runner, owner="w2") is None
    assert runner.calls == 0 and store.get(sid)["status"] == "running"


def test_a_message_for_a_row_another_grader_leases_comes_back_when_the_lease_ends(env):
    store, settings, broker = env
    sid = new(store)
    store.claim(sid, "other-worker", lease_s=3.0)
    calls = []
    ctx = WorkerContext(store, settings, broker, owner="w1", kind="worker", concurrency=1,
                        runner_factory=lambda: FakeRunner())
    assert ctx.grade(sid, again=lambda delay_ms, waits: calls.append((delay_ms, waits))) is None
    (delay_ms, waits), = calls
    assert 2500 <= delay_ms <= 3600 and waits == 1
    done = new(store, candidate="b")
    ctx2 = WorkerContext(store, settings, broker, owner="w1", kind="worker", concurrency=1,
                         runner_factory=lambda: FakeRunner({"kind": "report", "report": REPORT}))
    assert ctx2.grade(done) == "done"
    assert ctx2.grade(done, again=lambda *a: calls.append(a)) is None and len(calls) == 1   # finished: dropped


def test_interactive_goes_before_ci_batches(env):
    import dramatiq

    store, settings, broker = env
    order, lock = [], threading.Lock()

    class Recording(FakeRunner):
        def run(self, task, timeout, heartbeat=None, every=10.0):
            with lock:
                order.append(task["id"])
            time.sleep(0.05)
            return {"kind": "report", "report": REPORT}

    ctx = WorkerContext(store, settings, broker, owner="w1", kind="worker", concurrency=1,
                        runner_factory=Recording)
    actors = declare_actors(broker, lambda: ctx)
    batch = [new(store, candidate=None, queue="ci") for _ in range(6)]
    for sid in batch:
        broker.send(actors["ci"], sid)
    urgent = new(store, candidate="ada")
    broker.send(actors["interactive"], urgent)
    worker = dramatiq.Worker(broker.dramatiq, worker_threads=1, worker_timeout=100)
    worker.queue_prefetch = 1
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(order) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop(timeout=10000)
    assert len(order) == 7
    assert order.index(urgent) <= 1, order    # at most the one CI message already in hand went first


def test_grade_reconcile_command(env):
    store, settings, broker = env
    sid = new(store)
    common = ["--broker", settings.broker_url, "--data-dir", str(settings.data_dir)]
    if not settings.is_sqlite:
        common += ["--db", settings.database_url.replace("postgresql+psycopg://", "postgresql://", 1)]
    grade = [sys.executable, "-c", "from harness.cli import main; main()", "reconcile", *common]
    envv = {"PATH": "/usr/bin:/bin", "GRADER_OUTBOX_GRACE_S": "0", "PYTHONWARNINGS": "ignore"}
    dry = subprocess.run([*grade, "--dry-run"], capture_output=True, text=True, timeout=120, env=envv)
    assert dry.returncode == 0, dry.stderr
    assert "would send 1 messages" in dry.stdout and sid in dry.stdout
    assert store.get(sid)["enqueued_at"] is None
    real = subprocess.run(grade, capture_output=True, text=True, timeout=120, env=envv)
    assert real.returncode == 0, real.stderr
    assert "sent 1 messages" in real.stdout
    assert broker.holds("interactive", store.get(sid)["message_id"]) is True


def test_embedded_mode_shows_its_workers_and_queue_metrics(tmp_path):
    data = tmp_path / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"), ("candidate", "cara"))
    server = Server(data, workers=2).start()
    try:
        ivy = server.client(tokens["ivy"])
        r = submit(ivy, "mha", (__import__("pathlib").Path(__file__).parent.parent / "reference" / "mha_numpy.py")
                   .read_text(), queue="bulk")
        assert r.status_code == 202 and r.json()["queue"] == "bulk", r.text
        assert wait_done(ivy, r.json()["id"])["verdict"] == "passed"
        cara = server.client(tokens["cara"])
        refused = submit(cara, "mha", "x = 1\n", queue="ci")
        assert refused.status_code == 403, refused.text
        workers = ivy.get("/v1/workers").json()
        assert workers["mode"] == "embedded"
        (w,) = [w for w in workers["workers"] if w["alive"]]
        assert w["kind"] == "embedded" and w["concurrency"] == 2 and w["queues"] == ["interactive", "bulk", "ci"]
        assert cara.get("/v1/workers").status_code == 403
        metrics = ivy.get("/metrics").text
        for needle in ('grader_queue_depth_by_queue{queue="bulk"} 0', "grader_workers_alive 1",
                       "grader_redeliveries_total 0", "grader_lease_expiries_total 0",
                       'grader_broker_queue_depth{queue="interactive"}'):
            assert needle in metrics, needle
        from tests.service.rounds import signed_in

        with signed_in(server.url, tokens["ivy"]) as c:
            page = c.get("/workers")
        assert page.status_code == 200 and "embedded" in page.text and w["id"] in page.text
        with signed_in(server.url, tokens["cara"]) as c:
            denied = c.get("/workers")
        assert denied.status_code == 403
    finally:
        server.stop()


def test_the_commands_refuse_what_cannot_work(tmp_path):
    grade = [sys.executable, "-c", "from harness.cli import main; main()"]
    envv = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "ignore"}
    serve = subprocess.run([*grade, "serve", "--data-dir", str(tmp_path / "d"), "--broker", "redis://127.0.0.1:1/0"],
                           capture_output=True, text=True, timeout=60, env=envv)
    assert serve.returncode == 2 and "--broker needs a store the workers can reach" in serve.stderr, serve.stderr
    worker = subprocess.run([*grade, "worker", "--data-dir", str(tmp_path / "d")], capture_output=True, text=True,
                            timeout=60, env=envv)
    assert worker.returncode == 2 and "--broker" in worker.stderr, worker.stderr
    queues = subprocess.run([*grade, "worker", "--broker", "redis://127.0.0.1:1/0", "--queues", "urgent"],
                            capture_output=True, text=True, timeout=60, env=envv)
    assert queues.returncode == 2 and "unknown queue urgent" in queues.stderr, queues.stderr
