"""interviewer review (issue 25): report versions, rubric criteria and scores, notes, score overrides, an audit
log, and per-round review settings (retention period, similarity threshold)

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "report_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("score", sa.Float, nullable=True),
        sa.Column("max_score", sa.Float, nullable=True),
        sa.Column("report_json", sa.Text, nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("superseded_at", sa.DateTime(), nullable=False),
        sa.Column("superseded_by", sa.String(200), nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.UniqueConstraint("submission_id", "version", name="uq_report_version"),
    )
    op.create_table(
        "rubric_criteria",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("round_id", sa.String(32), sa.ForeignKey("rounds.id", ondelete="CASCADE"), nullable=False,
                  index=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("max_points", sa.Float, nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("from_grade", sa.Boolean, nullable=False),
    )
    op.create_table(
        "rubric_scores",
        sa.Column("criterion_id", sa.Integer, sa.ForeignKey("rubric_criteria.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  primary_key=True, index=True),
        sa.Column("points", sa.Float, nullable=False),
        sa.Column("scored_by", sa.String(200), nullable=True),
        sa.Column("scored_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "review_notes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("candidate_id", sa.String(32), sa.ForeignKey("candidates.id", ondelete="CASCADE"), nullable=True,
                  index=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  nullable=True, index=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("author", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "score_overrides",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("score", sa.Float, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("by", sa.String(200), nullable=True),
        sa.Column("at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("actor", sa.String(200), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("round_id", sa.String(32), nullable=True, index=True),
        sa.Column("candidate_id", sa.String(32), nullable=True, index=True),
        sa.Column("submission_id", sa.String(32), nullable=True, index=True),
        sa.Column("before", sa.Text, nullable=True),
        sa.Column("after", sa.Text, nullable=True),
    )
    op.create_table(
        "round_review",
        sa.Column("round_id", sa.String(32), sa.ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("retention_days", sa.Integer, nullable=True),
        sa.Column("similarity_threshold", sa.Float, nullable=True),
    )


def downgrade() -> None:
    for t in ("round_review", "audit_log", "score_overrides", "review_notes", "rubric_scores", "rubric_criteria",
              "report_versions"):
        op.drop_table(t)
