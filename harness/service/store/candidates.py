"""Candidates: records with an id (what tokens, sessions and submissions belong to), a display name (a label
that may repeat and never grants anything), an optional e-mail and an external reference (an ATS id)."""

from __future__ import annotations

import secrets

from sqlalchemy import func, select

from harness.service.store.models import Candidate, Submission
from harness.service.store.repository import IN_FLIGHT, _row, now


def new_id() -> str:
    return "cand_" + secrets.token_hex(8)


def add(s, *, display_name: str, email: str | None = None, external_ref: str | None = None) -> Candidate:
    """A new candidate in the open session ``s`` (always new: names may repeat)."""
    c = Candidate(id=new_id(), display_name=display_name, email=email or None, external_ref=external_ref or None,
                  created_at=now())
    s.add(c)
    s.flush()
    return c


def create(store, **fields) -> dict:
    with store.session() as s:
        return _row(add(s, **fields))


def get(store, candidate_id: str) -> dict | None:
    if not candidate_id or len(candidate_id) > 32:
        return None
    with store.session() as s:
        c = s.get(Candidate, candidate_id)
        return None if c is None else _row(c)


def name_matches(column, text: str):
    """Case-insensitive substring match of ``text`` (LIKE wildcards in it taken literally)."""
    esc = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return func.lower(column).like(f"%{esc}%", escape="\\")


def search(store, text: str | None = None, limit: int = 200) -> list[dict]:
    q = select(Candidate)
    if text:
        q = q.where(name_matches(Candidate.display_name, text))
    with store.session() as s:
        return [_row(c) for c in s.scalars(q.order_by(Candidate.created_at.desc()).limit(limit))]


def in_flight(store, candidate_id: str) -> int:
    """This candidate's submissions queued or running (the per-candidate limit counts ids, not names)."""
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(Submission).where(
            Submission.candidate_id == candidate_id, Submission.status.in_(IN_FLIGHT)))


def received_since(store, candidate_id: str, since) -> tuple[int, object]:
    with store.session() as s:
        n, oldest = s.execute(select(func.count(), func.min(Submission.received_at)).where(
            Submission.candidate_id == candidate_id, Submission.received_at >= since)).one()
        return n, oldest
