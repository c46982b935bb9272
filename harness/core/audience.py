"""Who reads a report: interviewers see everything; candidates never see the messages, inputs or plots of
hidden tests."""

from __future__ import annotations

import copy
import re

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
    _withhold_seed(d, env.pop("seed", None))
    return d


def _withhold_seed(d: dict, seed) -> None:
    """The inputs are a function of (seed, test): a candidate who knew the seed could replay the hidden
    inputs offline, so the seed leaves their view everywhere it is written (messages, diagnostics)."""
    if seed is None:
        return
    replay = re.compile(r"\s*`grade [^`]*--seed \d+` replays it\.")
    named = re.compile(rf"\bseed {int(seed)}\b")
    for t in d.get("tests", []):
        if t.get("message"):
            t["message"] = named.sub("seed withheld", replay.sub("", t["message"]))
        _drop_seed_keys(t.get("diagnostics"))


def _drop_seed_keys(x) -> None:
    if isinstance(x, dict):
        for k in [k for k in x if "seed" in str(k)]:
            del x[k]
        for v in x.values():
            _drop_seed_keys(v)
    elif isinstance(x, list):
        for v in x:
            _drop_seed_keys(v)
