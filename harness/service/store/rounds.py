"""Rounds: the exercises (and tracks) a group of invited candidates may submit, a window, an optional time
limit from each candidate's first open, a maximum of attempts per exercise and a feedback policy."""

from __future__ import annotations

import datetime as dt
import json
import secrets

from sqlalchemy import func, select, update

from harness.service.store.models import Candidate, Round, RoundMember, Submission
from harness.service.store.repository import _row, now

FEEDBACK = ("full", "summary", "after_close")


def _view(r: Round) -> dict:
    d = _row(r)
    d["exercises"] = json.loads(r.exercises)
    d["ends_at"] = min(r.closes_at, r.closed_at) if r.closed_at else r.closes_at
    return d


def create(store, *, name: str, exercises: dict[str, list[str]], opens_at: dt.datetime, closes_at: dt.datetime,
           time_limit_s: int | None, max_attempts: int | None, feedback: str, feedback_after: str | None,
           created_by: int | None) -> dict:
    r = Round(id="round_" + secrets.token_hex(8), name=name, exercises=json.dumps(exercises), opens_at=opens_at,
              closes_at=closes_at, time_limit_s=time_limit_s, max_attempts=max_attempts, feedback=feedback,
              feedback_after=feedback_after if feedback == "after_close" else None, created_by=created_by,
              created_at=now())
    with store.session() as s:
        s.add(r)
        s.flush()
        return _view(r)


def get(store, round_id: str) -> dict | None:
    if not round_id or len(round_id) > 32:
        return None
    with store.session() as s:
        r = s.get(Round, round_id)
        return None if r is None else _view(r)


def list_all(store, limit: int = 200) -> list[dict]:
    with store.session() as s:
        counts = dict(s.execute(select(RoundMember.round_id, func.count()).group_by(RoundMember.round_id)).all())
        out = []
        for r in s.scalars(select(Round).order_by(Round.created_at.desc()).limit(limit)):
            d = _view(r)
            d["candidates"] = counts.get(r.id, 0)
            out.append(d)
        return out


def close(store, round_id: str) -> dict | None:
    """Close now (no effect on a round already closed by hand)."""
    with store.session() as s:
        s.execute(update(Round).where(Round.id == round_id, Round.closed_at.is_(None)).values(closed_at=now()))
    return get(store, round_id)


def add_member(s, round_id: str, candidate_id: str) -> None:
    if s.get(RoundMember, (round_id, candidate_id)) is None:
        s.add(RoundMember(round_id=round_id, candidate_id=candidate_id, invited_at=now()))
        s.flush()


def members(store, round_id: str) -> list[dict]:
    with store.session() as s:
        rows = s.execute(select(Candidate, RoundMember.invited_at, RoundMember.started_at)
                         .join(RoundMember, RoundMember.candidate_id == Candidate.id)
                         .where(RoundMember.round_id == round_id).order_by(RoundMember.invited_at)).all()
        return [{**_row(c), "invited_at": inv, "started_at": st} for c, inv, st in rows]


def memberships(store, candidate_id: str | None) -> list[dict]:
    """The rounds this candidate is invited to, each with the candidate's ``started_at``."""
    if not candidate_id:
        return []
    with store.session() as s:
        rows = s.execute(select(Round, RoundMember.started_at).join(RoundMember, RoundMember.round_id == Round.id)
                         .where(RoundMember.candidate_id == candidate_id).order_by(Round.opens_at)).all()
        return [{**_view(r), "started_at": st} for r, st in rows]


def is_member(store, round_id: str, candidate_id: str) -> bool:
    with store.session() as s:
        return s.get(RoundMember, (round_id, candidate_id)) is not None


def start(store, round_id: str, candidate_id: str) -> dt.datetime | None:
    """The candidate opens the round: their clock starts now unless it already has."""
    with store.session() as s:
        s.execute(update(RoundMember).where(RoundMember.round_id == round_id,
                                            RoundMember.candidate_id == candidate_id,
                                            RoundMember.started_at.is_(None)).values(started_at=now()))
        m = s.get(RoundMember, (round_id, candidate_id))
        return None if m is None else m.started_at


def attempts(store, round_id: str, candidate_id: str) -> dict[str, int]:
    """{exercise: submissions stored} for this candidate in this round."""
    with store.session() as s:
        return dict(s.execute(select(Submission.exercise, func.count()).where(
            Submission.round_id == round_id, Submission.candidate_id == candidate_id)
            .group_by(Submission.exercise)).all())
