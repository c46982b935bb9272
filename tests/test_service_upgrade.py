"""A store made by the release before hiring rounds (tests/fixtures/store-0002.sqlite: `grade serve` at Alembic
revision 0002 graded five submissions — two candidate tokens named "Ada Lovelace", one "Alan Turing", an
interviewer's for "carol" and an anonymous one, with a webhook and plot artifacts) upgrades to the newest
revision with every submission, report, artifact, webhook and token intact, and each distinct candidate name
becomes one candidate record; on SQLite and on Postgres (the same rows loaded into a revision-0002 database)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, create_engine, inspect, text

from harness.service.store import Store
from tests.service.support import FreshPostgres, postgres_url_or_skip

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "store-0002.sqlite"
MIGRATIONS = Path(__file__).resolve().parent.parent / "harness" / "service" / "store" / "migrations"
TABLES = ("tokens", "submissions", "artifacts", "webhooks", "server_secrets", "workers", "counters")
KEPT = tuple(t for t in TABLES if t != "server_secrets")   # signing keys leave the database (0004, issue 28)


def _snapshot(url: str, tables=TABLES) -> dict:
    eng = create_engine(url)
    with eng.connect() as c:
        out = {t: sorted((dict(r._mapping) for r in c.execute(text(f"SELECT * FROM {t}"))),
                         key=lambda r: str(r.get("id") or r.get("submission_id") or r.get("name")))
               for t in tables}
    eng.dispose()
    return out


def _load_into_postgres(pg_url: str) -> None:
    """Revision 0002 on a fresh Postgres, then the fixture's rows, as the older release would have stored them."""
    store = Store(pg_url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with store.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
        conn.commit()
    src = create_engine(f"sqlite:///{FIXTURE}")
    meta = MetaData()
    meta.reflect(store.engine, only=TABLES)
    with src.connect() as s, store.engine.begin() as d:
        for t in TABLES:
            rows = [dict(r._mapping) for r in s.execute(text(f"SELECT * FROM {t}"))]
            for r in rows:
                for k, v in r.items():
                    if meta.tables[t].c[k].type.python_type is bool and v is not None:
                        r[k] = bool(v)
            if rows:
                d.execute(meta.tables[t].insert(), rows)
        for t, col in (("tokens", "id"), ("submissions", "seq"), ("webhooks", "id")):
            d.execute(text(f"SELECT setval(pg_get_serial_sequence('{t}', '{col}'), (SELECT max({col}) FROM {t}))"))
    src.dispose()
    store.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_store(request, tmp_path):
    if request.param == "sqlite":
        path = tmp_path / "grader.db"
        shutil.copy(FIXTURE, path)
        yield f"sqlite:///{path}"
        return
    pg = FreshPostgres(postgres_url_or_skip())
    url = pg.url.replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        _load_into_postgres(url)
        yield url
    finally:
        pg.drop()


def test_fixture_is_the_older_release():
    con = sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True)
    try:
        assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [("0002",)]
        assert con.execute("SELECT count(*) FROM submissions WHERE status = 'done'").fetchone() == (5,)
    finally:
        con.close()


def test_upgrade_keeps_everything_and_makes_candidates(old_store):
    before = _snapshot(old_store)
    store = Store(old_store)
    store.migrate()
    try:
        after = _snapshot(old_store, KEPT)
        for t in KEPT:
            assert len(after[t]) == len(before[t]), t
            for old, new in zip(before[t], after[t]):
                assert {k: new[k] for k in old} == old, (t, old.get("id"))   # every old column, unchanged
        subs = {s["id"]: s for s in after["submissions"]}
        assert all(s["report_json"] and s["reports_written"] == 1 for s in subs.values())
        with store.engine.connect() as c:
            cands = {r.display_name: r.id for r in c.execute(text("SELECT id, display_name FROM candidates"))}
            version = c.execute(text("SELECT version_num FROM alembic_version")).scalar()
            tables = set(inspect(c).get_table_names())
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        assert version == ScriptDirectory.from_config(cfg).get_current_head()
        assert before["server_secrets"] and "server_secrets" not in tables   # no key material left behind
        assert sorted(cands) == ["Ada Lovelace", "Alan Turing", "carol"]      # one per distinct name
        toks = {t["id"]: t for t in after["tokens"]}
        assert toks[3]["candidate_id"] == toks[4]["candidate_id"] == cands["Ada Lovelace"]
        assert toks[5]["candidate_id"] == cands["Alan Turing"]
        assert toks[1]["candidate_id"] is None and toks[2]["candidate_id"] is None
        for s in subs.values():
            assert s["candidate_id"] == (cands[s["candidate"]] if s["candidate"] else None)
            assert s["round_id"] is None
        ada = store.list_submissions(candidate_id=cands["Ada Lovelace"])
        assert sorted(r["verdict"] for r in ada) == ["failed", "passed"]
        # the upgraded store takes new rows (sequences and ids carry on)
        _, tok = store.create_token(role="candidate", name="Ada Lovelace")
        assert tok["id"] == 6 and tok["candidate_id"] not in cands.values()
    finally:
        store.dispose()
