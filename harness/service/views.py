"""The public shape of a submission (API responses, webhook payloads, the pages)."""

from __future__ import annotations

from harness.service.store.repository import iso


def links(sub_id: str) -> dict:
    base = f"/v1/submissions/{sub_id}"
    return {"self": base, "report": f"{base}/report", "report_html": f"{base}/report.html",
            "page": f"/submissions/{sub_id}"}


# what a candidate reads for an infrastructure error: the raw message (exception text, host paths, the
# sandbox's stderr) is for staff only
CANDIDATE_INFRA_ERROR = ("The grader itself failed on this submission; this is not a fault of your code. "
                         "Please submit again later, or tell your interviewer.")


def submission_view(row: dict, audience: str = "interviewer") -> dict:
    """The submission for ``audience``: a candidate sees neither its seed (the test inputs are a function of
    it) nor the text of an infrastructure error."""
    staff = audience != "candidate"
    error = None
    if row["status"] == "infrastructure_error":
        error = row["error_message"] if staff else CANDIDATE_INFRA_ERROR
    return {"id": row["id"], "status": row["status"], "exercise": row["exercise"], "track": row["track"],
            "track_requested": row["track_requested"], "candidate": row["candidate"], "filename": row["filename"],
            "seed": row["seed"] if staff else None, "sha256": row["sha256"], "size": row["size"],
            "received_at": iso(row["received_at"]), "started_at": iso(row["started_at"]),
            "finished_at": iso(row["finished_at"]), "attempts": row["attempts"], "verdict": row["verdict"],
            "score": row["score"], "max_score": row["max_score"],
            "error": error,
            "queue": row.get("queue") or "interactive", "candidate_id": row.get("candidate_id"),
            "round_id": row.get("round_id"), "links": links(row["id"])}


def received_html(row: dict) -> str:
    """The page a candidate gets instead of a report while the round holds feedback back."""
    from html import escape

    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Received</title></head><body>"
            f"<h1>Received</h1><p id=received>Your submission <code>{escape(row['filename'])}</code> "
            f"({escape(row['exercise'])}) was received. Its feedback is shown after the round closes.</p>"
            "</body></html>")


def webhook_payload(row: dict) -> dict:
    return {"event": "submission.finished", "submission": submission_view(row)}


def worker_view(w: dict, heartbeat_s: float) -> dict:
    from harness.service.store.repository import now

    age = (now() - w["last_heartbeat"]).total_seconds()
    return {"id": w["id"], "host": w["host"], "pid": w["pid"], "kind": w["kind"], "queues": w["queues"].split(","),
            "concurrency": w["concurrency"], "busy": w["busy"], "graded": w["graded"], "version": w["version"],
            "started_at": iso(w["started_at"]), "last_heartbeat": iso(w["last_heartbeat"]),
            "heartbeat_age_s": round(age, 1),
            "alive": w["stopped_at"] is None and age <= 3 * heartbeat_s + 5,
            "stopped_at": iso(w["stopped_at"])}
