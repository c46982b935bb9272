"""Who reads a report: interviewers see everything; candidates never see the messages, inputs or plots of
hidden tests."""

from __future__ import annotations

import copy

from harness.core.errors import UsageError

AUDIENCES = ("interviewer", "candidate")
HIDDEN_NOTE = "hidden test: details are not shown to candidates"


def for_audience(report: dict, audience: str = "interviewer") -> dict:
    """A copy of ``report`` fit for ``audience``. For candidates, hidden tests keep only their id, category,
    status and points: no message, no diagnostics (which hold the inputs), no description, no plots; the
    diagnosis keeps its summary and hint but not its evidence."""
    if audience not in AUDIENCES:
        raise UsageError(f"unknown audience {audience!r}; choose {' or '.join(AUDIENCES)}")
    d = copy.deepcopy(report)
    if audience == "interviewer":
        return d
    hidden = set()
    for t in d.get("tests", []):
        if t.get("visibility") == "hidden":
            hidden.add(t["id"])
            t["message"] = HIDDEN_NOTE if t["status"] != "passed" else ""
            t["diagnostics"] = {}
            t["description"] = ""
            t["redacted"] = True
    for diag in d.get("diagnosis", []):
        diag["evidence"] = {}
    if "artifacts" in d:
        d["artifacts"]["items"] = [i for i in d["artifacts"].get("items", []) if i["test_id"] not in hidden]
    env = d.get("environment", {})
    env.pop("collection_errors", None)
    return d
