"""The durable store (SQLAlchemy 2): SQLite (WAL) under the data directory, or Postgres. The row is the truth."""

from harness.service.store.repository import Store  # noqa: F401
