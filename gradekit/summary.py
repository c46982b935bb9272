"""The summary `grade submit --wait` prints in the kit: verdict and score, the diagnosis when the round's
feedback shows one, points per category and the failing tests, as far as the (audience-filtered) report the
server returned holds them. The full package prints `grade run`'s summary instead (harness/reports/terminal.py)."""

from __future__ import annotations

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "memory": "MEMORY",
        "output_limit": "OUTPUT", "skipped": "SKIP"}


def _num(x) -> str:
    return f"{round(float(x), 4):g}"


def summary_lines(report: dict, max_failures: int = 12) -> list[str]:
    lines = [f"{report.get('exercise')} ({report.get('track')} track): {str(report.get('verdict')).upper()}"
             + (f"  score {_num(report['score'])}/{_num(report['max_score'])}" if report.get("max_score") is not None
                else "")]
    for diag in report.get("diagnosis") or []:
        lines.append(f"  diagnosis: {diag.get('bug')}: {diag.get('summary', '')}")
        if diag.get("hint"):
            lines.append(f"    hint: {diag['hint']}")
    cats: dict[str, list] = {}
    for t in report.get("tests") or []:
        c = cats.setdefault(t.get("category", "?"), [0.0, 0.0, 0, 0])
        c[0] += t.get("points", 0)
        c[1] += t.get("max_points", 0)
        c[2] += t.get("status") == "passed"
        c[3] += 1
    if cats:
        lines.append("  " + "   ".join(f"{k} {_num(v[0])}/{_num(v[1])} pts [{v[2]}/{v[3]} tests]"
                                       for k, v in cats.items()))
    failing = [t for t in report.get("tests") or [] if t.get("status") not in ("passed", "skipped")]
    for t in failing[:max_failures]:
        hidden = t.get("redacted") or t.get("visibility") == "hidden"
        message = "(hidden test)" if hidden and not t.get("message") else t.get("message", "")
        lines.append(f"  {MARK.get(t.get('status'), str(t.get('status')).upper()):7} {t.get('category', ''):9} "
                     f"{t.get('id')}: {message}")
    if len(failing) > max_failures:
        lines.append(f"  ... and {len(failing) - max_failures} more failing tests (on the submission's page)")
    return lines
