"""Terminal rendering of a report: diagnosis first, then a compact summary grouped by category."""

from __future__ import annotations

from harness.core.report import Report
from harness.report_text import category_scores, failure_groups

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "memory": "MEMORY",
        "output_limit": "OUTPUT", "skipped": "SKIP"}
WIDTH = 100  # category summary lines wrap here


def render_summary(report: Report, *, audience: str = "interviewer", max_failures: int = 12) -> list[str]:
    """Plain lines (the CLI styles them): verdict, diagnosis, points per category, failing tests."""
    d = report.to_dict() if hasattr(report, "to_dict") else report
    return render_dict(d, audience=audience, max_failures=max_failures)


def category_line(d: dict, *, width: int = WIDTH) -> list[str]:
    """Points per category (they sum to the score), tests passed in brackets: ``numeric 2/17 pts [2/10 tests]``."""
    parts = [f"{c['category']} {_num(c['score'])}/{_num(c['max_score'])} pts [{c['passed']}/{c['total']} tests]"
             for c in category_scores(d)]
    lines, cur = [], ""
    for p in parts:
        if cur and len(cur) + 3 + len(p) > width - 2:
            lines.append("  " + cur)
            cur = p
        else:
            cur = f"{cur}   {p}" if cur else p
    if cur:
        lines.append("  " + cur)
    return lines


def render_dict(d: dict, *, audience: str = "interviewer", max_failures: int = 12) -> list[str]:
    lines = [f"{d['exercise']} ({d['track']} track): {d['verdict'].upper()}  "
             f"score {_num(d['score'])}/{_num(d['max_score'])}  [{d['environment'].get('sandbox')} sandbox, "
             f"{d['timings'].get('total_s', 0):.2f} s]"]
    for diag in d.get("diagnosis", []):
        lines.append(f"  diagnosis: {diag['bug']}: {diag['summary']}")
        if diag.get("hint"):
            lines.append(f"    hint: {diag['hint']}")
    lines += category_line(d)
    shown = 0
    groups = failure_groups(d["tests"])
    n_tests = len(d["tests"])
    for group in groups:
        if shown >= max_failures:
            break
        t = group[0]
        hidden = audience == "candidate" and all(g.get("visibility") == "hidden" for g in group)
        message = "(hidden test)" if hidden else t.get("message", "")
        mark = MARK.get(t["status"], t["status"].upper())
        if len(group) == 1:
            lines.append(f"  {mark:7} {t['category']:9} {t['id']}: {message}")
        else:  # one line for tests that failed the same way (an import error, a dead worker)
            who = f"all {n_tests} tests" if len(group) == n_tests else \
                f"{len(group)} tests ({t['id']} and {len(group) - 1} more)"
            lines.append(f"  {mark:7} {who}: {message}")
        shown += 1
    rest = sum(len(g) for g in groups[shown:])
    if rest:
        lines.append(f"  ... and {rest} more failing tests (see the JSON report)")
    return lines


def _num(x: float) -> str:
    return f"{round(x, 4):g}"
