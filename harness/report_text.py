"""Reading a saved report and showing it: the audience filter (candidates never see the messages, inputs or
plots of hidden tests), per-category scores, and the terminal rendering used by `grade report`."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

from harness.core.errors import UsageError
from harness.core.report import CATEGORIES

AUDIENCES = ("interviewer", "candidate")
HIDDEN_NOTE = "hidden test: details are not shown to candidates"
MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "memory": "MEMORY",
        "output_limit": "OUTPUT", "skipped": "SKIP"}


def load_report_file(path: str | os.PathLike) -> dict:
    """A report from disk, validated against the schema; UsageError (exit 2) when it is not one."""
    from harness.batch import validate_report

    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"report {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{str(p)!r} is not a JSON report ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not validate_report(data):
        raise UsageError(f"{str(p)!r} is not a valid grading report (schema attention-grader/report/v1)")
    return data


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


def category_scores(report: dict) -> list[dict]:
    cats: dict[str, dict] = {}
    for t in report.get("tests", []):
        c = cats.setdefault(t["category"], {"category": t["category"], "score": 0.0, "max_score": 0.0,
                                            "passed": 0, "total": 0})
        c["score"] += t["points"]
        c["max_score"] += t["max_points"]
        c["passed"] += t["status"] == "passed"
        c["total"] += 1
    return [cats[c] for c in CATEGORIES if c in cats] + [v for k, v in cats.items() if k not in CATEGORIES]


def failure_groups(tests: list[dict]) -> list[list[dict]]:
    """Failing tests (not passed, not skipped) grouped by identical status, message and diagnostics, in order
    of first appearance: an import error or a worker that stopped answering fails every test the same way,
    and is shown once."""
    groups: dict[str, list[dict]] = {}
    for t in tests:
        if t["status"] in ("passed", "skipped"):
            continue
        key = json.dumps([t["status"], t.get("message", ""), t.get("diagnostics", {})], sort_keys=True,
                         default=str)
        groups.setdefault(key, []).append(t)
    return list(groups.values())


def error_reason(report: dict, limit: int = 100) -> str:
    """Why a report's verdict is ``error``, in one short line: the batch's own error (``usage: ...``,
    ``infrastructure: ...``), else the failure most tests share (an import error, a dead worker). Empty for
    other verdicts."""
    err = not_graded(report)
    if err:
        text = f"{err.get('kind')}: {err.get('message', '')}"
    elif report.get("verdict") == "error":
        groups = failure_groups(report.get("tests", []))
        biggest = max(groups, key=len) if groups else None
        text = biggest[0].get("message", "") if biggest else "no test ran"
    else:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def title_of(report: dict) -> str:
    return report.get("submission", {}).get("path") or report.get("submission", {}).get("sha256", "")[:12]


def not_graded(report: dict) -> dict | None:
    return report.get("environment", {}).get("batch", {}).get("error")


def fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k}={fmt(v)}" for k, v in x.items()) + "}"
    return str(x)


def render_text(report: dict, *, audience: str = "interviewer", width: int = 24) -> list[str]:
    """Plain lines: verdict and score, the diagnosis (hint first), score by category, failing tests with their
    diagnostics. Styling is the caller's business."""
    d = for_audience(report, audience)
    env, timings = d.get("environment", {}), d.get("timings", {})
    pct = f" ({100 * d['score'] / d['max_score']:.0f}%)" if d["max_score"] else ""
    lines = [f"{title_of(d)}: {d['exercise']} ({d['track']} track)",
             f"verdict: {d['verdict'].upper()}   score {d['score']:g}/{d['max_score']:g}{pct}   "
             f"[{env.get('sandbox')} sandbox, {timings.get('total_s', 0):.2f} s, seed {env.get('seed')}]"]
    err = not_graded(d)
    if err:
        lines.append(f"not graded ({err.get('kind')}): {err.get('message', '')}")
    if d.get("diagnosis"):
        lines.append("")
        lines.append("diagnosis:")
        for diag in d["diagnosis"]:
            lines.append(f"  {diag['bug']}")
            if diag.get("hint"):
                lines.append(f"    hint: {diag['hint']}")
            lines.append(f"    {diag['summary']}")
    cats = category_scores(d)
    if cats:
        lines.append("")
        lines.append("score by category:")
        for c in cats:
            frac = c["score"] / c["max_score"] if c["max_score"] else (1.0 if c["passed"] == c["total"] else 0.0)
            bar = "#" * round(frac * width) + "." * (width - round(frac * width))
            lines.append(f"  {c['category']:10} {bar} {c['score']:g}/{c['max_score']:g} points, "
                         f"{c['passed']}/{c['total']} tests")
    failing = [t for t in d.get("tests", []) if t["status"] not in ("passed", "skipped")]
    if failing:
        lines.append("")
        lines.append(f"failing tests ({len(failing)}):")
        for group in failure_groups(failing):
            t = group[0]
            mark = MARK.get(t["status"], t["status"].upper())
            if len(group) == 1:
                lines.append(f"  {mark:7} {t['category']:9} {t['id']}  ({t['points']:g}/{t['max_points']:g})")
            else:  # the same failure in many tests (an import error, a dead worker): its details once
                lost = sum(x["max_points"] - x["points"] for x in group)
                every = "all of them" if len(group) == len(d.get("tests", [])) else ""
                lines.append(f"  {mark:7} {len(group)} tests{' (' + every + ')' if every else ''}, "
                             f"{lost:g} points lost: {_ids(group)}")
            if t.get("message"):
                lines.append(f"          {t['message']}")
            for key, value in t.get("diagnostics", {}).items():
                if key == "traceback":
                    lines.append("          traceback:")
                    lines.extend(f"            {ln}" for ln in str(value).splitlines()[-12:])
                else:
                    lines.append(f"          {key}: {fmt(value)}")
    elif d.get("tests"):
        lines.append("")
        lines.append("every test passed" if d["verdict"] == "passed" else "no failing tests")
    return lines


def _ids(group: list[dict], shown: int = 4) -> str:
    ids = ", ".join(t["id"] for t in group[:shown])
    return ids + (f" and {len(group) - shown} more" if len(group) > shown else "")
