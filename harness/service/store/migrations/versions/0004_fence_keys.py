"""a submission's lease fence that never goes back (a regrade resets ``attempts``, not ``lease``), and the
signing keys out of the store (``server_secrets`` dropped: the keys live in the environment or a key file)

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as b:
        b.add_column(sa.Column("lease", sa.Integer, nullable=False, server_default="0"))
    # every fence handed out so far is at most the attempt count: start above it
    op.execute("UPDATE submissions SET lease = attempts")
    op.drop_table("server_secrets")


def downgrade() -> None:
    op.create_table(
        "server_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(200), nullable=False),
    )
    with op.batch_alter_table("submissions") as b:
        b.drop_column("lease")
