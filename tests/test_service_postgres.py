"""`grade serve --db postgresql://...`: the same service on Postgres — grading, kill -9 and restart (what the
dead server left running is taken back at once), and two servers sharing one store without grading anything
twice. Needs GRADER_TEST_POSTGRES_URL (`bash .ci/postgres-setup.sh` prints one); never skipped when CI=true."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.service.support import FreshPostgres, Server, make_tokens, postgres_url_or_skip, submit, wait_done

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()


@pytest.fixture
def pg():
    db = FreshPostgres(postgres_url_or_skip())
    yield db
    db.drop()


def _head() -> str:
    """The newest migration (whatever its number: revisions are added by other changes too)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(ROOT / "harness" / "service" / "store" / "migrations"))
    return ScriptDirectory.from_config(cfg).get_current_head()


def rows(url: str) -> list[dict]:
    eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.connect() as c:
        out = [dict(r._mapping) for r in c.execute(text("SELECT * FROM submissions ORDER BY seq"))]
    eng.dispose()
    return out


def test_serve_on_postgres_grades_and_survives_kill_9(pg, tmp_path):
    tokens = make_tokens(tmp_path / "a", ("interviewer", "ivy"), db=pg.url)
    server = Server(tmp_path / "a", env={"GRADER_DATABASE_URL": pg.url}).start()
    try:
        ivy = server.client(tokens["ivy"])
        r = submit(ivy, "mha", WRONG, wait=60)
        assert r.status_code == 200 and r.json()["verdict"] == "failed", r.text
        assert server.client().get("/readyz").json()["checks"]["store"]["detail"] == "postgres"
        slow = "import time\ntime.sleep(3)\n" + REF
        ids = [submit(ivy, "mha", slow, candidate=f"c{i}").json()["id"] for i in range(4)]
        time.sleep(1.5)                          # two are running, two queued
        server.close_clients()
        server.kill9()
        t0 = time.monotonic()
        server.start()
        ivy = server.client(tokens["ivy"])
        for sid in ids:
            assert wait_done(ivy, sid, timeout=120)["verdict"] == "passed"
        assert time.monotonic() - t0 < 50, "recovery waited for the lease to expire"
        for row in rows(pg.url):
            assert row["status"] == "done" and row["reports_written"] == 1
            assert json.loads(row["report_json"])["verdict"] == row["verdict"]
    finally:
        server.stop()


def test_two_servers_share_one_postgres_store(pg, tmp_path):
    tokens = make_tokens(tmp_path / "a", ("interviewer", "ivy"), db=pg.url)
    a = Server(tmp_path / "a", env={"GRADER_DATABASE_URL": pg.url}).start()
    b = Server(tmp_path / "b", env={"GRADER_DATABASE_URL": pg.url}).start()
    try:
        ids = []
        for i in range(12):
            srv = a if i % 2 else b
            r = submit(srv.client(tokens["ivy"]), "mha", REF if i % 3 else WRONG, candidate=f"c{i}")
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        for sid in ids:
            wait_done(a.client(tokens["ivy"]), sid, timeout=180)
        got = rows(pg.url)
        assert [r["id"] for r in got] == ids
        assert all(r["status"] == "done" and r["attempts"] == 1 and r["reports_written"] == 1 for r in got)
        owners = {r["id"]: r for r in got}
        assert len(owners) == 12
    finally:
        a.stop()
        b.stop()


def test_servers_starting_together_migrate_one_at_a_time(pg, tmp_path):
    import threading

    from harness.service.server import open_store
    from harness.service.settings import Settings

    errors = []

    def start(i):
        try:
            open_store(Settings.resolve(tmp_path / f"d{i}", pg.url)).dispose()
        except Exception as exc:  # pragma: no cover - the failure this test is about
            errors.append(repr(exc))

    threads = [threading.Thread(target=start, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    eng = create_engine(pg.url.replace("postgresql://", "postgresql+psycopg://", 1))
    with eng.connect() as c:
        assert c.execute(text("SELECT version_num FROM alembic_version")).scalar() == _head()
    eng.dispose()


def _head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(ROOT / "harness" / "service" / "store" / "migrations"))
    return ScriptDirectory.from_config(cfg).get_current_head()
