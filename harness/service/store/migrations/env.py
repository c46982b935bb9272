"""Alembic environment: the store passes its open connection in ``config.attributes["connection"]``; run from
the command line (``alembic -x url=...``) it connects to ``sqlalchemy.url``."""

from alembic import context
from sqlalchemy import create_engine

from harness.service.store.models import Base
from harness.service.store import review_models  # noqa: F401,E402

target_metadata = Base.metadata
config = context.config


def run_migrations_online() -> None:
    conn = config.attributes.get("connection")
    if conn is not None:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():  # pragma: no cover
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
