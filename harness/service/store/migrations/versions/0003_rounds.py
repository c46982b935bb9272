"""hiring rounds: candidates as records (each distinct candidate name of the older store becomes one candidate,
its tokens and submissions bound to the new id), server-side sessions, rounds, round members, invitations

Revision ID: 0003
Revises: 0002
"""
import datetime as dt
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "candidates",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("external_ref", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    with op.batch_alter_table("tokens") as b:
        b.add_column(sa.Column("candidate_id", sa.String(32), nullable=True))
    op.create_index("ix_tokens_candidate_id", "tokens", ["candidate_id"])
    with op.batch_alter_table("submissions") as b:
        b.add_column(sa.Column("candidate_id", sa.String(32), nullable=True))
        b.add_column(sa.Column("round_id", sa.String(32), nullable=True))
    op.create_index("ix_submissions_candidate_id", "submissions", ["candidate_id"])
    op.create_index("ix_submissions_round_id", "submissions", ["round_id"])
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("token_id", sa.Integer, sa.ForeignKey("tokens.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_sessions_token_id", "sessions", ["token_id"])
    op.create_table(
        "rounds",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("exercises", sa.Text, nullable=False),
        sa.Column("opens_at", sa.DateTime(), nullable=False),
        sa.Column("closes_at", sa.DateTime(), nullable=False),
        sa.Column("time_limit_s", sa.Integer, nullable=True),
        sa.Column("max_attempts", sa.Integer, nullable=True),
        sa.Column("feedback", sa.String(16), nullable=False),
        sa.Column("feedback_after", sa.String(16), nullable=True),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("closed_at", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "round_members",
        sa.Column("round_id", sa.String(32), sa.ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("candidate_id", sa.String(32), sa.ForeignKey("candidates.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("invited_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_round_members_candidate_id", "round_members", ["candidate_id"])
    op.create_table(
        "invitations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("round_id", sa.String(32), sa.ForeignKey("rounds.id", ondelete="CASCADE"), nullable=False),
        sa.Column("candidate_id", sa.String(32), sa.ForeignKey("candidates.id", ondelete="CASCADE"), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_by", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_invitations_round_id", "invitations", ["round_id"])
    _candidates_from_names()


def _candidates_from_names() -> None:
    """Each distinct candidate name (of candidate tokens and of submissions) becomes one candidate record; the
    rows that carried the name get its id. The name columns stay, as the display name at the time."""
    conn = op.get_bind()
    names = set(conn.execute(sa.text("SELECT DISTINCT candidate FROM tokens WHERE candidate IS NOT NULL")).scalars())
    names |= set(conn.execute(sa.text("SELECT DISTINCT candidate FROM submissions WHERE candidate IS NOT NULL"))
                 .scalars())
    t = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    for name in sorted(names):
        cid = "cand_" + secrets.token_hex(8)
        conn.execute(sa.text("INSERT INTO candidates (id, display_name, created_at) VALUES (:i, :n, :t)"),
                     {"i": cid, "n": name, "t": t})
        conn.execute(sa.text("UPDATE tokens SET candidate_id = :i WHERE candidate = :n"), {"i": cid, "n": name})
        conn.execute(sa.text("UPDATE submissions SET candidate_id = :i WHERE candidate = :n"), {"i": cid, "n": name})


def downgrade() -> None:
    op.drop_index("ix_invitations_round_id", table_name="invitations")
    op.drop_table("invitations")
    op.drop_index("ix_round_members_candidate_id", table_name="round_members")
    op.drop_table("round_members")
    op.drop_table("rounds")
    op.drop_index("ix_sessions_token_id", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index("ix_submissions_round_id", table_name="submissions")
    op.drop_index("ix_submissions_candidate_id", table_name="submissions")
    with op.batch_alter_table("submissions") as b:
        b.drop_column("round_id")
        b.drop_column("candidate_id")
    op.drop_index("ix_tokens_candidate_id", table_name="tokens")
    with op.batch_alter_table("tokens") as b:
        b.drop_column("candidate_id")
    op.drop_table("candidates")
