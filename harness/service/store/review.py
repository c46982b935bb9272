"""Interviewer review (issue 25): report versions, a candidate's attempts per round and exercise, rubric criteria
and scores, notes, score overrides, the audit log (who, when, before, after), per-round review settings, and the
retention operations (delete a candidate, export one, purge expired rounds)."""

from __future__ import annotations

import datetime as dt
import json
import math

from sqlalchemy import delete, func, or_, select, text

from harness.service.store.models import (Candidate, Invitation, Round, RoundMember, Submission, Token,
                                          WebSession)
from harness.service.store.repository import _row, now
from harness.service.store.review_models import (AuditEntry, ReportVersion, ReviewNote, RoundReview,
                                                 RubricCriterion, RubricScore, ScoreOverride)

DEFAULT_CRITERION = {"name": "Correctness", "max_points": 100.0,
                     "description": "The grade's score, scaled (pre-filled; an interviewer may change it).",
                     "from_grade": True}


def _dump(x) -> str | None:
    return None if x is None else json.dumps(x, sort_keys=True, default=str)


def audit(s, actor: str | None, action: str, *, before=None, after=None, round_id=None, candidate_id=None,
          submission_id=None) -> None:
    s.add(AuditEntry(at=now(), actor=actor, action=action, round_id=round_id, candidate_id=candidate_id,
                     submission_id=submission_id, before=_dump(before), after=_dump(after)))


def audit_trail(store, *, candidate_id=None, round_id=None, submission_ids=(), limit: int = 500) -> list[dict]:
    conds = []
    if candidate_id:
        conds.append(AuditEntry.candidate_id == candidate_id)
    if round_id:
        conds.append(AuditEntry.round_id == round_id)
    if submission_ids:
        conds.append(AuditEntry.submission_id.in_(list(submission_ids)))
    q = select(AuditEntry)
    if conds:
        q = q.where(or_(*conds))
    with store.session() as s:
        out = []
        for e in s.scalars(q.order_by(AuditEntry.id.desc()).limit(limit)):
            d = _row(e)
            d["before"] = json.loads(e.before) if e.before else None
            d["after"] = json.loads(e.after) if e.after else None
            out.append(d)
        return out


# -- report versions -----------------------------------------------------------------------------------------
def keep_version(store, sub_id: str, *, by: str | None, reason: str | None) -> int | None:
    """Before a regrade: the current report becomes a numbered earlier version (None when there is none)."""
    with store.session() as s:
        row = s.scalar(select(Submission).where(Submission.id == sub_id))
        if row is None or row.report_json is None:
            return None
        n = (s.scalar(select(func.max(ReportVersion.version)).where(ReportVersion.submission_id == sub_id)) or 0) + 1
        s.add(ReportVersion(submission_id=sub_id, version=n, seed=row.seed, verdict=row.verdict, score=row.score,
                            max_score=row.max_score, report_json=row.report_json, finished_at=row.finished_at,
                            superseded_at=now(), superseded_by=by, reason=reason))
        audit(s, by, "report.regraded", before={"version": n, "verdict": row.verdict, "score": row.score,
                                                "seed": row.seed},
              after={"reason": reason}, round_id=row.round_id, candidate_id=row.candidate_id, submission_id=sub_id)
        return n


def versions(store, sub_id: str) -> list[dict]:
    """Earlier versions, oldest first (the submission's row is the latest, number len(versions) + 1)."""
    with store.session() as s:
        return [_row(v) for v in s.scalars(select(ReportVersion).where(ReportVersion.submission_id == sub_id)
                                           .order_by(ReportVersion.version))]


def version(store, sub_id: str, number: int) -> dict | None:
    with store.session() as s:
        v = s.scalar(select(ReportVersion).where(ReportVersion.submission_id == sub_id,
                                                 ReportVersion.version == number))
        return None if v is None else _row(v)


# -- a candidate's attempts ----------------------------------------------------------------------------------
def attempts_of(store, candidate_id: str) -> list[dict]:
    """Every submission of this candidate, oldest first, with the row's attempt number per (round, exercise)."""
    with store.session() as s:
        rows = [_row(r) for r in s.scalars(select(Submission).where(Submission.candidate_id == candidate_id)
                                           .order_by(Submission.received_at, Submission.seq))]
        starts = dict(s.execute(select(RoundMember.round_id, RoundMember.started_at)
                                .where(RoundMember.candidate_id == candidate_id)).all())
        overrides = {o.submission_id: _row(o) for o in s.scalars(select(ScoreOverride).where(
            ScoreOverride.submission_id.in_([r["id"] for r in rows])))} if rows else {}
    seen: dict[tuple, int] = {}
    for r in rows:
        key = (r["round_id"], r["exercise"])
        seen[key] = seen.get(key, 0) + 1
        r["attempt"] = seen[key]
        r["round_started_at"] = starts.get(r["round_id"])
        r["override"] = overrides.get(r["id"])
    return rows


def final_score(row: dict) -> float | None:
    o = row.get("override")
    return o["score"] if o else row.get("score")


def summarise(attempts: list[dict]) -> dict:
    """Best and last score, attempts used, time from the first open (or first attempt) to the first pass."""
    graded = [a for a in attempts if a["status"] == "done"]
    scores = [final_score(a) for a in graded if final_score(a) is not None]
    first_pass = next((a for a in graded if a["verdict"] == "passed"), None)
    start = attempts[0].get("round_started_at") or attempts[0]["received_at"] if attempts else None
    to_pass = None
    if first_pass is not None and start is not None:
        to_pass = max(0.0, ((first_pass["finished_at"] or first_pass["received_at"]) - start).total_seconds())
    return {"attempts": len(attempts), "best": max(scores) if scores else None,
            "last": final_score(graded[-1]) if graded else None,
            "max_score": graded[-1]["max_score"] if graded else None,
            "passed": first_pass is not None, "seconds_to_pass": to_pass,
            "first_pass_attempt": first_pass["attempt"] if first_pass else None}


# -- rubric ----------------------------------------------------------------------------------------------------
def criteria(store, round_id: str) -> list[dict]:
    with store.session() as s:
        return [_row(c) for c in s.scalars(select(RubricCriterion).where(RubricCriterion.round_id == round_id)
                                           .order_by(RubricCriterion.position))]


def set_criteria(store, round_id: str, items: list[dict], *, by: str | None) -> list[dict]:
    """Replace the round's rubric (criteria kept by name keep their scores)."""
    with store.session() as s:
        old = {c.name: c for c in s.scalars(select(RubricCriterion).where(RubricCriterion.round_id == round_id))}
        before = [{"name": c.name, "max_points": c.max_points, "description": c.description} for c in old.values()]
        keep = set()
        for i, it in enumerate(items):
            c = old.get(it["name"])
            if c is None:
                c = RubricCriterion(round_id=round_id, name=it["name"])
                s.add(c)
            c.position, c.max_points = i, float(it["max_points"])
            c.description, c.from_grade = it.get("description") or None, bool(it.get("from_grade"))
            keep.add(it["name"])
        for name, c in old.items():
            if name not in keep:
                s.delete(c)
        audit(s, by, "rubric.changed", before=before, round_id=round_id,
              after=[{"name": it["name"], "max_points": float(it["max_points"]),
                      "description": it.get("description") or None} for it in items])
    return criteria(store, round_id)


def rubric_for(store, sub: dict) -> list[dict]:
    """The round's criteria with this submission's points: scored by an interviewer, else (correctness) the
    grade scaled to the criterion's maximum."""
    if not sub.get("round_id"):
        return []
    crit = criteria(store, sub["round_id"]) or []
    with store.session() as s:
        scored = {r.criterion_id: _row(r) for r in s.scalars(select(RubricScore).where(
            RubricScore.submission_id == sub["id"]))}
    out = []
    for c in crit:
        got = scored.get(c["id"])
        pre = None
        if c["from_grade"] and sub.get("score") is not None and sub.get("max_score"):
            pre = round(c["max_points"] * sub["score"] / sub["max_score"], 2)
        out.append({**c, "points": got["points"] if got else pre, "prefilled": got is None and pre is not None,
                    "scored_by": got["scored_by"] if got else None})
    return out


def score_criterion(store, sub: dict, criterion_id: int, points: float, *, by: str | None) -> dict:
    with store.session() as s:
        c = s.get(RubricCriterion, criterion_id)
        if c is None or c.round_id != sub.get("round_id"):
            raise KeyError(criterion_id)
        if not 0 <= points <= c.max_points:
            raise ValueError(f"{c.name}: points must be between 0 and {c.max_points:g}")
        r = s.get(RubricScore, (criterion_id, sub["id"]))
        before = None if r is None else r.points
        if r is None:
            r = RubricScore(criterion_id=criterion_id, submission_id=sub["id"], points=points, scored_at=now())
            s.add(r)
        r.points, r.scored_by, r.scored_at = points, by, now()
        audit(s, by, "rubric.scored", before={"criterion": c.name, "points": before},
              after={"criterion": c.name, "points": points}, round_id=sub.get("round_id"),
              candidate_id=sub.get("candidate_id"), submission_id=sub["id"])
        return _row(r)


# -- notes and overrides ---------------------------------------------------------------------------------------
def add_note(store, *, body: str, by: str | None, candidate_id: str | None, submission: dict | None = None) -> dict:
    with store.session() as s:
        n = ReviewNote(candidate_id=candidate_id, submission_id=submission["id"] if submission else None,
                       body=body, author=by, created_at=now())
        s.add(n)
        s.flush()
        audit(s, by, "note.added", after={"note": n.id, "body": body},
              round_id=submission.get("round_id") if submission else None, candidate_id=candidate_id,
              submission_id=n.submission_id)
        return _row(n)


def notes(store, *, candidate_id: str) -> list[dict]:
    with store.session() as s:
        sub_ids = select(Submission.id).where(Submission.candidate_id == candidate_id)
        return [_row(n) for n in s.scalars(select(ReviewNote).where(or_(
            ReviewNote.candidate_id == candidate_id, ReviewNote.submission_id.in_(sub_ids)))
            .order_by(ReviewNote.id))]


def set_override(store, sub: dict, score: float | None, reason: str, *, by: str | None) -> dict | None:
    """Override the submission's final score (None: remove the override); a reason is required either way."""
    if not reason.strip():
        raise ValueError("an override needs a reason")
    if score is not None and not math.isfinite(score):
        raise ValueError("the score must be a number")
    with store.session() as s:
        o = s.get(ScoreOverride, sub["id"])
        before = {"score": o.score if o else sub.get("score"), "overridden": o is not None}
        if score is None:
            if o is not None:
                s.delete(o)
        else:
            if sub.get("max_score") is not None and not 0 <= score <= sub["max_score"]:
                raise ValueError(f"the score must be between 0 and {sub['max_score']:g}")
            if o is None:
                o = ScoreOverride(submission_id=sub["id"], score=score, reason=reason, by=by, at=now())
                s.add(o)
            o.score, o.reason, o.by, o.at = score, reason, by, now()
        audit(s, by, "score.overridden" if score is not None else "override.removed", before=before,
              after={"score": score if score is not None else sub.get("score"), "reason": reason},
              round_id=sub.get("round_id"), candidate_id=sub.get("candidate_id"), submission_id=sub["id"])
        return None if score is None else _row(o)


def overrides(store, sub_ids: list[str]) -> dict[str, dict]:
    if not sub_ids:
        return {}
    with store.session() as s:
        return {o.submission_id: _row(o) for o in s.scalars(select(ScoreOverride).where(
            ScoreOverride.submission_id.in_(list(sub_ids))))}


def rubric_scores(store, sub_ids: list[str]) -> dict[str, dict[str, float]]:
    """{submission id: {criterion name: points scored}} (explicit scores only)."""
    if not sub_ids:
        return {}
    out: dict[str, dict[str, float]] = {}
    with store.session() as s:
        for sc, name in s.execute(select(RubricScore, RubricCriterion.name).join(
                RubricCriterion, RubricCriterion.id == RubricScore.criterion_id)
                .where(RubricScore.submission_id.in_(list(sub_ids)))).all():
            out.setdefault(sc.submission_id, {})[name] = sc.points
    return out


# -- per-round settings ----------------------------------------------------------------------------------------
def settings_of(store, round_id: str) -> dict:
    with store.session() as s:
        r = s.get(RoundReview, round_id)
        return {"retention_days": r.retention_days if r else None,
                "similarity_threshold": r.similarity_threshold if r else None}


def set_settings(store, round_id: str, *, by: str | None, **values) -> dict:
    with store.session() as s:
        r = s.get(RoundReview, round_id)
        if r is None:
            r = RoundReview(round_id=round_id)
            s.add(r)
        before = {"retention_days": r.retention_days, "similarity_threshold": r.similarity_threshold}
        for k, v in values.items():
            setattr(r, k, v)
        audit(s, by, "round.review_settings", before=before, after=values, round_id=round_id)
    return settings_of(store, round_id)


# -- retention ---------------------------------------------------------------------------------------------------
def _delete_candidates(s, candidate_ids: list[str]) -> dict:
    """Every row of these candidates (submissions with their reports, versions, sidecars, webhooks, scores,
    notes and overrides by cascade; tokens and their sessions; invitations; memberships; audit entries)."""
    if not candidate_ids:
        return {"candidates": 0, "submissions": 0, "tokens": 0}
    sub_ids = list(s.scalars(select(Submission.id).where(Submission.candidate_id.in_(candidate_ids))))
    token_ids = list(s.scalars(select(Token.id).where(Token.candidate_id.in_(candidate_ids))))
    s.execute(delete(AuditEntry).where(or_(AuditEntry.candidate_id.in_(candidate_ids),
                                           AuditEntry.submission_id.in_(sub_ids or [""]))))
    s.execute(delete(ReviewNote).where(or_(ReviewNote.candidate_id.in_(candidate_ids),
                                           ReviewNote.submission_id.in_(sub_ids or [""]))))
    s.execute(delete(Submission).where(Submission.candidate_id.in_(candidate_ids)))
    if token_ids:
        s.execute(delete(WebSession).where(WebSession.token_id.in_(token_ids)))
        s.execute(delete(Token).where(Token.id.in_(token_ids)))
    s.execute(delete(Invitation).where(Invitation.candidate_id.in_(candidate_ids)))
    s.execute(delete(RoundMember).where(RoundMember.candidate_id.in_(candidate_ids)))
    s.execute(delete(Candidate).where(Candidate.id.in_(candidate_ids)))
    return {"candidates": len(candidate_ids), "submissions": len(sub_ids), "tokens": len(token_ids)}


def delete_candidate(store, candidate_id: str, *, by: str | None) -> dict | None:
    """Delete everything of one candidate; the audit entry says what was deleted, by whom, never of whom."""
    with store.session() as s:
        if s.get(Candidate, candidate_id) is None:
            return None
        _secure_delete(store, s)
        counts = _delete_candidates(s, [candidate_id])
        audit(s, by, "candidate.deleted", after=counts)
    _truncate_wal(store)
    return counts


def _secure_delete(store, s) -> None:
    """SQLite: deleted rows are overwritten with zeros (not left in free pages of the file)."""
    if store.is_sqlite:
        s.execute(text("PRAGMA secure_delete=ON"))


def _truncate_wal(store) -> None:
    """SQLite: the file is rebuilt (VACUUM: old versions of rows left in free space by earlier updates go) and the
    write-ahead log, which still holds pages as they were, is checkpointed and emptied."""
    if store.is_sqlite:
        raw = store.engine.raw_connection()    # outside a transaction (neither can run in one)
        try:
            cur = raw.cursor()
            cur.execute("VACUUM")
            cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cur.close()
        finally:
            raw.close()


def purge_expired(store, at: dt.datetime | None = None) -> list[dict]:
    """Rounds whose retention period ended (counted from when they closed): their submissions, their invitations,
    the round, and candidates left in no other round. Returns one summary per purged round."""
    t = at or now()
    done = []
    with store.session() as s:
        _secure_delete(store, s)
        rows = s.execute(select(Round, RoundReview.retention_days).join(RoundReview, RoundReview.round_id == Round.id)
                         .where(RoundReview.retention_days.isnot(None))).all()
        for r, days in rows:
            ended = min(r.closes_at, r.closed_at) if r.closed_at else r.closes_at
            if ended + dt.timedelta(days=days) > t:
                continue
            members = list(s.scalars(select(RoundMember.candidate_id).where(RoundMember.round_id == r.id)))
            elsewhere = set(s.scalars(select(RoundMember.candidate_id).where(
                RoundMember.candidate_id.in_(members or [""]), RoundMember.round_id != r.id)))
            sub_ids = list(s.scalars(select(Submission.id).where(Submission.round_id == r.id)))
            s.execute(delete(AuditEntry).where(or_(AuditEntry.round_id == r.id,
                                                   AuditEntry.submission_id.in_(sub_ids or [""]))))
            s.execute(delete(ReviewNote).where(ReviewNote.submission_id.in_(sub_ids or [""])))
            s.execute(delete(Submission).where(Submission.round_id == r.id))
            counts = _delete_candidates(s, [m for m in members if m not in elsewhere])
            s.execute(delete(Round).where(Round.id == r.id))
            summary = {"submissions": len(sub_ids), "candidates_deleted": counts["candidates"],
                       "retention_days": days}
            audit(s, "retention", "round.purged", after=summary)
            done.append(summary)
    if done:
        _truncate_wal(store)
    return done


def candidate_data(store, candidate_id: str) -> dict | None:
    """One candidate's data: the record, rounds, submissions (with sources, reports and earlier versions)."""
    with store.session() as s:
        c = s.get(Candidate, candidate_id)
        if c is None:
            return None
        rounds = [{"round_id": m.round_id, "invited_at": m.invited_at, "started_at": m.started_at}
                  for m in s.scalars(select(RoundMember).where(RoundMember.candidate_id == candidate_id))]
        subs = [_row(r) for r in s.scalars(select(Submission).where(Submission.candidate_id == candidate_id)
                                           .order_by(Submission.seq))]
        vers = {}
        for v in s.scalars(select(ReportVersion).where(ReportVersion.submission_id.in_([x["id"] for x in subs]
                                                                                          or [""]))):
            vers.setdefault(v.submission_id, []).append(_row(v))
        return {"candidate": _row(c), "rounds": rounds, "submissions": subs, "versions": vers}
