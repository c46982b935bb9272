"""the distributed queue: a submission's queue and outbox columns, worker heartbeats, shared counters

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as b:
        b.add_column(sa.Column("queue", sa.String(16), nullable=False, server_default="interactive"))
        b.add_column(sa.Column("enqueued_at", sa.DateTime(), nullable=True))
        b.add_column(sa.Column("message_id", sa.String(64), nullable=True))
    op.create_index("ix_submissions_status_queue", "submissions", ["status", "queue"])
    op.create_table(
        "workers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("queues", sa.String(200), nullable=False),
        sa.Column("concurrency", sa.Integer, nullable=False),
        sa.Column("busy", sa.Integer, nullable=False, server_default="0"),
        sa.Column("graded", sa.Integer, nullable=False, server_default="0"),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(), nullable=False),
        sa.Column("stopped_at", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "counters",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    op.drop_table("counters")
    op.drop_table("workers")
    op.drop_index("ix_submissions_status_queue", table_name="submissions")
    with op.batch_alter_table("submissions") as b:
        b.drop_column("message_id")
        b.drop_column("enqueued_at")
        b.drop_column("queue")
