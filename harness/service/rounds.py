"""What a round allows a candidate: which exercises they see, whether a submission is admitted (window, time
limit from their first open, attempts per exercise, tracks) and how much of a report they may read (the round's
feedback policy). A refusal is an ApiError 403 whose code says which limit and whose message says until when;
it is raised before anything is stored or graded."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib

from harness.service import grading
from harness.service.grading import Report
from harness.service.auth import Principal
from harness.service.errors import ApiError
from harness.service.store import rounds as store_rounds
from harness.service.store.repository import iso, now

SUMMARY_NOTE = "this round's feedback is a summary: test messages and inputs are not shown"


def deadline(r: dict) -> dt.datetime:
    """When this candidate's time in round ``r`` (a membership row) ends: the close, or the time limit counted
    from their first open, whichever is first."""
    end = r["ends_at"]
    if r.get("time_limit_s") and r.get("started_at"):
        end = min(end, r["started_at"] + dt.timedelta(seconds=r["time_limit_s"]))
    return end


def state(r: dict, t: dt.datetime | None = None) -> str:
    t = t or now()
    if t < r["opens_at"]:
        return "scheduled"
    if t >= r["ends_at"]:
        return "closed"
    return "open"


def candidate_view(r: dict, attempts: dict[str, int] | None = None) -> dict:
    """A round as its candidate sees it (no other candidates, no interviewer fields)."""
    t = now()
    end = deadline(r)
    left = max(0, int((end - t).total_seconds())) if state(r, t) == "open" else 0
    return {"id": r["id"], "name": r["name"], "exercises": r["exercises"], "state": state(r, t),
            "opens_at": iso(r["opens_at"]), "closes_at": iso(r["ends_at"]),
            "time_limit_s": r["time_limit_s"], "started_at": iso(r.get("started_at")),
            "deadline": iso(end), "seconds_left": left, "max_attempts": r["max_attempts"],
            "attempts": attempts or {}, "feedback": r["feedback"], "time_left": _span(left)}


def _span(seconds: int) -> str:
    h, m = divmod(round(seconds / 60), 60)
    return f"{h} h {m:02d} min" if h else f"{m} min"


def _restricted(who: Principal) -> bool:
    return who.role == "candidate"


def memberships(store, who: Principal) -> list[dict]:
    return store_rounds.memberships(store, who.candidate_id) if _restricted(who) else []


def visible_exercises(store, who: Principal) -> list[str]:
    """The exercises this caller may see: all for staff and for candidates in no round; otherwise those of the
    candidate's rounds."""
    ms = memberships(store, who)
    if not ms:
        return grading.exercise_names()
    wanted = {e for r in ms for e in r["exercises"]}
    return [n for n in grading.exercise_names() if n in wanted]


def open_rounds(store, who: Principal) -> list[dict]:
    """The candidate opens their rounds (a page or /v1/me): the time limit of each open round starts now if it
    has not already; returns the rounds as the candidate sees them."""
    out = []
    for r in memberships(store, who):
        if state(r) == "open" and r["started_at"] is None:
            r["started_at"] = store_rounds.start(store, r["id"], who.candidate_id)
        out.append(candidate_view(r, store_rounds.attempts(store, r["id"], who.candidate_id)))
    return out


def _refuse(code: str, message: str, until: dt.datetime | None, round_id: str) -> ApiError:
    return ApiError(403, code, message, details={"round": round_id, "until": iso(until)})


def _when(t: dt.datetime) -> str:
    return f"{t:%Y-%m-%d %H:%M} UTC"


@contextlib.contextmanager
def serialized(store, who: Principal):
    """Hold a candidate's admissions one at a time across API processes (Postgres: an advisory lock on a
    connection of its own, while the limits are checked and the row is inserted). SQLite has one server per
    store, whose intake lock already serializes them."""
    if store.is_sqlite or who.role != "candidate" or not who.candidate_id:
        yield
        return
    key = int.from_bytes(hashlib.sha256(b"admit:" + who.candidate_id.encode()).digest()[:8], "big", signed=True)
    with store.engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            conn.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (key,))
            conn.commit()


def admit(store, who: Principal, exercise: str, track: str) -> str | None:
    """The round a candidate's submission counts in (None: a candidate in no round, or staff), or a 403."""
    ms = memberships(store, who)
    if not ms:
        return None
    t = now()
    having = [r for r in ms if exercise in r["exercises"]]
    if not having:
        mine = sorted({e for r in ms for e in r["exercises"]})
        raise ApiError(403, "not_in_round", f"exercise {exercise!r} is not part of your round "
                                            f"(yours: {', '.join(mine)})", details={"until": None})
    r = next((r for r in having if state(r, t) == "open"), None)
    if r is None:
        later = [r for r in having if state(r, t) == "scheduled"]
        if later:
            r = min(later, key=lambda x: x["opens_at"])
            raise _refuse("round_not_open", f"round {r['name']!r} opens at {_when(r['opens_at'])}; submissions "
                                            "are refused until then", r["opens_at"], r["id"])
        r = max(having, key=lambda x: x["ends_at"])
        raise _refuse("round_closed", f"round {r['name']!r} closed at {_when(r['ends_at'])}; it takes no more "
                                      "submissions", None, r["id"])
    if track not in r["exercises"][exercise]:
        raise _refuse("track_not_in_round", f"round {r['name']!r} takes {exercise} on the "
                                            f"{' or '.join(r['exercises'][exercise])} track only (yours: {track})",
                      None, r["id"])
    started = r["started_at"] or store_rounds.start(store, r["id"], who.candidate_id)
    if r["time_limit_s"] and started + dt.timedelta(seconds=r["time_limit_s"]) <= t:
        end = started + dt.timedelta(seconds=r["time_limit_s"])
        raise _refuse("time_limit", f"your {r['time_limit_s'] // 60}-minute time limit in round {r['name']!r} "
                                    f"ended at {_when(end)}; it takes no more submissions from you", None, r["id"])
    used = store_rounds.attempts(store, r["id"], who.candidate_id).get(exercise, 0)
    if r["max_attempts"] and used >= r["max_attempts"]:
        raise _refuse("attempt_limit", f"you have used all {r['max_attempts']} attempts at {exercise} in round "
                                       f"{r['name']!r}; no more until the round closes at {_when(r['ends_at'])} "
                                       "(and none after)", None, r["id"])
    return r["id"]


# -- feedback ------------------------------------------------------------------------------------------------
def policy(store, who: Principal, row: dict) -> str:
    """How much of this submission's report the caller reads: interviewer | full | summary | received."""
    if who.is_staff:
        return "interviewer"
    if not row.get("round_id"):
        return "full"
    r = store_rounds.get(store, row["round_id"])
    if r is None:
        return "full"
    if r["feedback"] != "after_close":
        return r["feedback"]
    if now() < r["ends_at"]:
        return "received"
    return r["feedback_after"] or "full"


def summary_report(report: Report) -> Report:
    """The candidate view cut to the verdict, the points per test and category and the diagnosis: no test
    messages, descriptions, diagnostics, inputs or plots."""
    r = grading.for_audience(report, "candidate")
    for t in r.tests:
        t.message, t.diagnostics, t.description = "", {}, ""
    for diag in r.diagnosis:
        diag.evidence = {}
    if r.sidecar is not None:
        r.sidecar["items"] = []
    r.feedback = "summary"
    r.environment["note"] = SUMMARY_NOTE
    return r


def received_report(row: dict, r: dict | None) -> dict:
    return {"schema": "attention-grader/received/v1", "submission": row["id"], "exercise": row["exercise"],
            "status": "received", "feedback": "after_close",
            "available_after": iso(r["ends_at"]) if r else None,
            "message": "your submission was received; its feedback is shown after the round closes"}


def report_for(store, who: Principal, row: dict, report: Report) -> Report | None:
    """``report`` (the full, interviewer report, freshly loaded: the caller's own, returned as it is to staff) cut
    to what the caller may read; None while the round holds its feedback back (after_close, before the close:
    :func:`received_report` says so)."""
    p = policy(store, who, row)
    if p == "interviewer":
        return report
    if p == "summary":
        return summary_report(report)
    if p == "received":
        return None
    return grading.for_audience(report, "candidate")


def report_json(store, who: Principal, row: dict, report: Report) -> dict:
    """The JSON the API answers with: the report cut for the caller, or that it was received."""
    cut = report_for(store, who, row, report)
    return received_report(row, store_rounds.get(store, row["round_id"])) if cut is None else cut.to_dict()


def row_for(store, who: Principal, row: dict) -> dict:
    """The submission row with the verdict and score hidden while the round's feedback is held back."""
    if who.is_staff or not row.get("round_id") or policy(store, who, row) != "received":
        return row
    return {**row, "verdict": None, "score": None, "max_score": None}
