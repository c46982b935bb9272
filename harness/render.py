"""Terminal rendering of a report: diagnosis first, then a compact summary grouped by category."""

from __future__ import annotations

from harness.core.report import CATEGORIES, Report

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "memory": "MEMORY",
        "output_limit": "OUTPUT", "skipped": "SKIP"}


def render_summary(report: Report, *, audience: str = "interviewer", max_failures: int = 12) -> list[str]:
    """Plain lines (the CLI styles them): verdict, diagnosis, per-category counts, failing tests."""
    d = report.to_dict() if hasattr(report, "to_dict") else report
    return render_dict(d, audience=audience, max_failures=max_failures)


def render_dict(d: dict, *, audience: str = "interviewer", max_failures: int = 12) -> list[str]:
    lines = [f"{d['exercise']} ({d['track']} track): {d['verdict'].upper()}  "
             f"score {_num(d['score'])}/{_num(d['max_score'])}  [{d['environment'].get('sandbox')} sandbox, "
             f"{d['timings'].get('total_s', 0):.2f} s]"]
    for diag in d.get("diagnosis", []):
        lines.append(f"  diagnosis: {diag['bug']}: {diag['summary']}")
        if diag.get("hint"):
            lines.append(f"    hint: {diag['hint']}")
    cats: dict = {}
    for t in d["tests"]:
        c = cats.setdefault(t["category"], [0, 0])
        c[0] += t["status"] == "passed"
        c[1] += 1
    order = [c for c in CATEGORIES if c in cats]
    lines.append("  " + "   ".join(f"{c} {cats[c][0]}/{cats[c][1]}" for c in order))
    failing = [t for t in d["tests"] if t["status"] not in ("passed", "skipped")]
    for t in failing[:max_failures]:
        hidden = audience == "candidate" and t.get("visibility") == "hidden"
        message = "(hidden test)" if hidden else t.get("message", "")
        lines.append(f"  {MARK.get(t['status'], t['status'].upper()):7} {t['category']:9} {t['id']}: {message}")
    if len(failing) > max_failures:
        lines.append(f"  ... and {len(failing) - max_failures} more failing tests (see the JSON report)")
    return lines


def _num(x: float) -> str:
    return f"{x:g}"
