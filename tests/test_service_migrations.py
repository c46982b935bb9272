"""The Alembic migrations and the SQLAlchemy models agree (no drift), and migrate down and up again, on SQLite
(always) and Postgres (GRADER_TEST_POSTGRES_URL; never skipped in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from harness.service.store import Store
from harness.service.store.models import Base
from tests.service.support import FreshPostgres, postgres_url_or_skip

MIGRATIONS = Path(__file__).resolve().parent.parent / "harness" / "service" / "store" / "migrations"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    pg = None
    if request.param == "postgres":
        pg = FreshPostgres(postgres_url_or_skip())
        url = pg.url.replace("postgresql://", "postgresql+psycopg://", 1)
    else:
        url = f"sqlite:///{tmp_path / 'g.db'}"
    s = Store(url)
    s.migrate()
    yield s
    s.dispose()
    if pg is not None:
        pg.drop()


def _cfg(conn) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


def test_models_match_the_migrations(store):
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], diff


def test_downgrade_to_base_and_upgrade_again(store):
    with store.engine.connect() as conn:
        command.downgrade(_cfg(conn), "base")
        conn.commit()
        assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    store.migrate()
    store.migrate()   # idempotent
    with store.engine.connect() as conn:
        assert {"tokens", "submissions", "artifacts", "webhooks"} <= set(
            inspect(conn).get_table_names())
