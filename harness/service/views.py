"""The public shape of a submission (API responses, webhook payloads, the pages)."""

from __future__ import annotations

from harness.service.store.repository import iso


def links(sub_id: str) -> dict:
    base = f"/v1/submissions/{sub_id}"
    return {"self": base, "report": f"{base}/report", "report_html": f"{base}/report.html",
            "page": f"/submissions/{sub_id}"}


def submission_view(row: dict) -> dict:
    return {"id": row["id"], "status": row["status"], "exercise": row["exercise"], "track": row["track"],
            "track_requested": row["track_requested"], "candidate": row["candidate"], "filename": row["filename"],
            "seed": row["seed"], "sha256": row["sha256"], "size": row["size"],
            "received_at": iso(row["received_at"]), "started_at": iso(row["started_at"]),
            "finished_at": iso(row["finished_at"]), "attempts": row["attempts"], "verdict": row["verdict"],
            "score": row["score"], "max_score": row["max_score"],
            "error": row["error_message"] if row["status"] == "infrastructure_error" else None,
            "links": links(row["id"])}


def webhook_payload(row: dict) -> dict:
    return {"event": "submission.finished", "submission": submission_view(row)}
