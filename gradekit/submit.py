"""`grade submit FILE --exercise NAME`: send the file to the grading service, print the submission's page, and
with --wait the summary the round's feedback lets the candidate see (all of the candidate view, the summary
without messages, or — feedback after the round closes — only that it was received). Exit codes as `grade run`:
0 passed (or received, when the verdict is held back), 1 failed, 2 bad usage or input, 3 the service failed or
could not be reached."""

from __future__ import annotations

import json
import time
from pathlib import Path

from . import server as srv
from .check import read_source
from .exercises import KitUsageError


class ServiceFault(Exception):
    """The service failed (exit 3): an infrastructure error, a timeout, a 5xx."""


def submit(file: Path, *, exercise: str, server: str | None, token: str | None, track: str = "auto",
           candidate: str | None = None, seed: int | None = None, wait: bool = False, timeout: float = 900.0,
           json_path: Path | None = None, quiet: bool = False, echo=print, render=None) -> int:
    """``render(report, json_written)`` gives the summary lines (default: gradekit.summary)."""
    base, token = srv.resolve(server, token)
    source = read_source(file)
    body = {"exercise": exercise, "track": track, "source": source, "filename": file.name}
    if candidate:
        body["candidate"] = candidate
    if seed is not None:
        body["seed"] = seed
    first_wait = min(60.0, timeout) if wait else 0
    try:
        status, answer = srv.request("POST", f"{base}/v1/submissions?wait={first_wait:g}", token, body,
                                     timeout=first_wait + 30)
    except srv.ServerUnreachable as exc:
        raise ServiceFault(str(exc)) from None
    if status >= 400:
        message = f"the server refused the submission (HTTP {status}): {srv.error_message(status, answer)}"
        raise (KitUsageError if status < 500 else ServiceFault)(message)
    sub_id = answer["id"]
    page = base + answer.get("links", {}).get("page", f"/submissions/{sub_id}")
    echo(f"submitted {sub_id}: {answer['status']}  {page}")
    if not wait:
        return 0
    deadline = time.monotonic() + timeout
    while answer["status"] in ("queued", "running"):
        if time.monotonic() > deadline:
            raise ServiceFault(f"{sub_id} not graded within {timeout:g} s (status {answer['status']}); see {page}")
        time.sleep(1.0)
        try:
            status, answer = srv.request("GET", f"{base}/v1/submissions/{sub_id}", token)
        except srv.ServerUnreachable as exc:
            raise ServiceFault(str(exc)) from None
        if status >= 400:
            raise ServiceFault(f"HTTP {status} while waiting for {sub_id}")
    if answer["status"] == "infrastructure_error":
        raise ServiceFault(f"{sub_id}: the grader failed: {answer.get('error')}")
    report = answer.get("report")
    if report is None:
        status, report = srv.request("GET", f"{base}/v1/submissions/{sub_id}/report", token)
        if status >= 400:
            raise ServiceFault(f"HTTP {status} while fetching the report of {sub_id}")
    if json_path:
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    if report.get("verdict") is None:   # the round holds its feedback back (after_close): no verdict yet
        when = report.get("available_after")
        echo(f"{exercise}: received and graded; this round shows its feedback "
             f"{'after ' + when if when else 'later'}, on {page}")
        return 0
    if render is None:
        from .summary import summary_lines

        lines = summary_lines(report)
    else:
        lines = render(report, json_path is not None)
    for line in lines[:1] if quiet else lines:
        echo(line)
    return 0 if report.get("verdict") == "passed" else 1
