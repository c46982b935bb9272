"""Tables (datetimes are naive UTC). Changes go through an Alembic migration in migrations/versions/ (the store runs them at start)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String, Text,
                        UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Token(Base):
    __tablename__ = "tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20))            # admin | interviewer | candidate
    candidate: Mapped[str | None] = mapped_column(String(200), nullable=True)   # the display name (a label)
    candidate_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)   # what grants access
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)   # sha256 hex of the secret
    prefix: Mapped[str] = mapped_column(String(16))          # shown in listings, never enough to use
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)


class Submission(Base):
    __tablename__ = "submissions"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)  # order; list cursors
    id: Mapped[str] = mapped_column(String(32), unique=True)        # public id (random, not guessable)
    exercise: Mapped[str] = mapped_column(String(64))
    track_requested: Mapped[str] = mapped_column(String(16))
    track: Mapped[str] = mapped_column(String(16))
    candidate: Mapped[str | None] = mapped_column(String(200), nullable=True)   # display name at intake
    candidate_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    round_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    filename: Mapped[str] = mapped_column(String(255))
    seed: Mapped[int] = mapped_column(BigInteger)
    callback_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    source: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    token_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    status: Mapped[str] = mapped_column(String(32))               # queued | running | done | infrastructure_error
    attempts: Mapped[int] = mapped_column(Integer, default=0)     # grading attempts since intake or regrade
    # the grader's fence: +1 at every claim, never reset (a regrade resets attempts, so they cannot fence)
    lease: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    not_before: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    received_at: Mapped[dt.datetime] = mapped_column(DateTime())
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    report_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    reports_written: Mapped[int] = mapped_column(Integer, default=0)   # audit: must end at exactly 1
    queue: Mapped[str] = mapped_column(String(16), default="interactive")   # interactive | bulk | ci
    # the outbox: set when a message for the row's current "queued" state was handed to the broker (NULL:
    # not yet, or the message is known lost); the reconciler enqueues what is NULL or no longer held
    enqueued_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    message_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    __table_args__ = (
        UniqueConstraint("token_id", "idempotency_key", name="uq_submission_idempotency"),
        Index("ix_submissions_status", "status"),
        Index("ix_submissions_candidate", "candidate"),
        Index("ix_submissions_exercise", "exercise"),
        Index("ix_submissions_status_queue", "status", "queue"),
    )


class Artifact(Base):
    """The report's .npz sidecar (plot arrays), kept in the store so any machine can render the page."""
    __tablename__ = "artifacts"
    submission_id: Mapped[str] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"),
                                               primary_key=True)
    npz: Mapped[bytes] = mapped_column(LargeBinary)


class Webhook(Base):
    __tablename__ = "webhooks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    submission_id: Mapped[str] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(Text)
    payload: Mapped[str] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_at: Mapped[dt.datetime] = mapped_column(DateTime())
    delivered: Mapped[bool] = mapped_column(Boolean, default=False)
    gave_up: Mapped[bool] = mapped_column(Boolean, default=False)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (Index("ix_webhooks_pending", "delivered", "gave_up", "next_at"),)


class WorkerRow(Base):
    """A grading worker (a `grade worker` process, or the in-process workers of `grade serve`): its heartbeat."""
    __tablename__ = "workers"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))              # worker | embedded
    queues: Mapped[str] = mapped_column(String(200))
    concurrency: Mapped[int] = mapped_column(Integer)
    busy: Mapped[int] = mapped_column(Integer, default=0)
    graded: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[dt.datetime] = mapped_column(DateTime())
    last_heartbeat: Mapped[dt.datetime] = mapped_column(DateTime())
    stopped_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)


class Counter(Base):
    """Counters shared by every process on the store (redeliveries, lease expiries), read by /metrics."""
    __tablename__ = "counters"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, default=0)


# -- hiring rounds (issue 20): candidates are records, pages sign in with server-side sessions ------------------
class Candidate(Base):
    """A person being assessed. The id grants access (through tokens and sessions); the name is only a label."""
    __tablename__ = "candidates"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)        # cand_<16 hex>
    display_name: Mapped[str] = mapped_column(String(200))
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    external_ref: Mapped[str | None] = mapped_column(String(200), nullable=True)   # an ATS id
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())


class WebSession(Base):
    """A signed-in browser: the cookie holds a random id, the store its SHA-256 (and the token it acts as)."""
    __tablename__ = "sessions"
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int] = mapped_column(Integer, ForeignKey("tokens.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime())
    ended_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)


class Round(Base):
    __tablename__ = "rounds"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)        # round_<16 hex>
    name: Mapped[str] = mapped_column(String(200))
    exercises: Mapped[str] = mapped_column(Text)                          # JSON {exercise: [tracks]}
    opens_at: Mapped[dt.datetime] = mapped_column(DateTime())
    closes_at: Mapped[dt.datetime] = mapped_column(DateTime())
    time_limit_s: Mapped[int | None] = mapped_column(Integer, nullable=True)   # from the candidate's first open
    max_attempts: Mapped[int | None] = mapped_column(Integer, nullable=True)   # per exercise
    feedback: Mapped[str] = mapped_column(String(16))                     # full | summary | after_close
    feedback_after: Mapped[str | None] = mapped_column(String(16), nullable=True)   # after_close: then this
    created_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())
    closed_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)   # closed by hand


class RoundMember(Base):
    """A candidate invited to a round; ``started_at`` is their first open (the time limit counts from it)."""
    __tablename__ = "round_members"
    round_id: Mapped[str] = mapped_column(String(32), ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True)
    candidate_id: Mapped[str] = mapped_column(String(32), ForeignKey("candidates.id", ondelete="CASCADE"),
                                              primary_key=True, index=True)
    invited_at: Mapped[dt.datetime] = mapped_column(DateTime())
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)


class Invitation(Base):
    """A single-use, expiring sign-in link for one candidate to one round (the secret is stored hashed)."""
    __tablename__ = "invitations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(String(32), ForeignKey("rounds.id", ondelete="CASCADE"), index=True)
    candidate_id: Mapped[str] = mapped_column(String(32), ForeignKey("candidates.id", ondelete="CASCADE"))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime())
    used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
