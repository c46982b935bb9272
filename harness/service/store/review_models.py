"""Tables of interviewer review (issue 25; migration 0005): report versions, rubric criteria and scores, notes,
score overrides, the audit log and per-round review settings. Registered on models.Base."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from harness.service.store.models import Base


class ReportVersion(Base):
    """A report a regrade superseded (the submission's row always holds the latest)."""
    __tablename__ = "report_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    submission_id: Mapped[str] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"),
                                               index=True)
    version: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    report_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(), nullable=True)
    superseded_at: Mapped[dt.datetime] = mapped_column(DateTime())
    superseded_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (UniqueConstraint("submission_id", "version", name="uq_report_version"),)


class RubricCriterion(Base):
    __tablename__ = "rubric_criteria"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(String(32), ForeignKey("rounds.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    max_points: Mapped[float] = mapped_column(Float)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    from_grade: Mapped[bool] = mapped_column(Boolean)     # correctness: pre-filled from the grade


class RubricScore(Base):
    __tablename__ = "rubric_scores"
    criterion_id: Mapped[int] = mapped_column(Integer, ForeignKey("rubric_criteria.id", ondelete="CASCADE"),
                                              primary_key=True)
    submission_id: Mapped[str] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"),
                                               primary_key=True, index=True)
    points: Mapped[float] = mapped_column(Float)
    scored_by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    scored_at: Mapped[dt.datetime] = mapped_column(DateTime())


class ReviewNote(Base):
    """An interviewer's note on a submission or on a candidate (never shown to candidates)."""
    __tablename__ = "review_notes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    candidate_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("candidates.id", ondelete="CASCADE"),
                                                     nullable=True, index=True)
    submission_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"),
                                                      nullable=True, index=True)
    body: Mapped[str] = mapped_column(Text)
    author: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime())


class ScoreOverride(Base):
    __tablename__ = "score_overrides"
    submission_id: Mapped[str] = mapped_column(String(32), ForeignKey("submissions.id", ondelete="CASCADE"),
                                               primary_key=True)
    score: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    by: Mapped[str | None] = mapped_column(String(200), nullable=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime())


class AuditEntry(Base):
    """Who changed what, when, before and after (JSON). A deleted candidate's entries are removed with them;
    the deletion's own entry names no one."""
    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime())
    actor: Mapped[str | None] = mapped_column(String(200), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    round_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    candidate_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    submission_id: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    before: Mapped[str | None] = mapped_column(Text, nullable=True)
    after: Mapped[str | None] = mapped_column(Text, nullable=True)


class RoundReview(Base):
    __tablename__ = "round_review"
    round_id: Mapped[str] = mapped_column(String(32), ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True)
    retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    similarity_threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
