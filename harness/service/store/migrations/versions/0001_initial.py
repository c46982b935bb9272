"""initial schema: tokens, submissions, artifacts, webhooks, server secrets

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "submissions",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(32), nullable=False, unique=True),
        sa.Column("exercise", sa.String(64), nullable=False),
        sa.Column("track_requested", sa.String(16), nullable=False),
        sa.Column("track", sa.String(16), nullable=False),
        sa.Column("candidate", sa.String(200), nullable=True),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("callback_url", sa.Text, nullable=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("token_id", sa.Integer, nullable=True),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("not_before", sa.DateTime(), nullable=True),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("score", sa.Float, nullable=True),
        sa.Column("max_score", sa.Float, nullable=True),
        sa.Column("report_json", sa.Text, nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("reports_written", sa.Integer, nullable=False, server_default="0"),
        sa.UniqueConstraint("token_id", "idempotency_key", name="uq_submission_idempotency"),
    )
    op.create_index("ix_submissions_status", "submissions", ["status"])
    op.create_index("ix_submissions_candidate", "submissions", ["candidate"])
    op.create_index("ix_submissions_exercise", "submissions", ["exercise"])
    op.create_table(
        "artifacts",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("npz", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_at", sa.DateTime(), nullable=False),
        sa.Column("delivered", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("gave_up", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("last_error", sa.Text, nullable=True),
    )
    op.create_index("ix_webhooks_pending", "webhooks", ["delivered", "gave_up", "next_at"])
    op.create_table(
        "server_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    for table in ("server_secrets", "webhooks", "artifacts", "submissions", "tokens"):
        op.drop_table(table)
