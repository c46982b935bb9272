"""Who reads a report: interviewers see everything; candidates never see the messages, inputs or plots of
hidden tests."""

from __future__ import annotations

import copy
import re

from harness.core.errors import UsageError
from harness.core.report import Report, TestResult

AUDIENCES = ("interviewer", "candidate")
HIDDEN_NOTE = "hidden test: details are not shown to candidates"


def for_audience(report: Report, audience: str = "interviewer") -> Report:
    """A copy of ``report`` fit for ``audience``. For candidates, hidden tests keep only their id, category,
    status and points (``redacted``): no message, no diagnostics (which hold the inputs), no description, no
    plots; the diagnosis keeps its summary and hint but not its evidence."""
    if audience not in AUDIENCES:
        raise UsageError(f"unknown audience {audience!r}; choose {' or '.join(AUDIENCES)}")
    r = copy.deepcopy(report)
    if audience == "interviewer":
        return r
    hidden = set()
    for t in r.tests:
        if t.visibility == "hidden":
            hidden.add(t.id)
            t.message = HIDDEN_NOTE if t.status != "passed" else ""
            t.diagnostics, t.description, t.redacted = {}, "", True
    for diag in r.diagnosis:
        diag.evidence = {}
    if r.sidecar is not None:
        r.sidecar["items"] = [i for i in r.sidecar.get("items", []) if i["test_id"] not in hidden]
    r.environment.pop("collection_errors", None)
    _withhold_seed(r.tests, r.environment.pop("seed", None))
    return r


def _withhold_seed(tests: list[TestResult], seed) -> None:
    """The inputs are a function of (seed, test): a candidate who knew the seed could replay the hidden
    inputs offline, so the seed leaves their view everywhere it is written (messages, diagnostics)."""
    if seed is None:
        return
    replay = re.compile(r"\s*`grade [^`]*--seed \d+` replays it\.")
    named = re.compile(rf"\bseed {int(seed)}\b")
    for t in tests:
        if t.message:
            t.message = named.sub("seed withheld", replay.sub("", t.message))
        _drop_seed_keys(t.diagnostics)


def _drop_seed_keys(x) -> None:
    if isinstance(x, dict):
        for k in [k for k in x if "seed" in str(k)]:
            del x[k]
        for v in x.values():
            _drop_seed_keys(v)
    elif isinstance(x, list):
        for v in x:
            _drop_seed_keys(v)
