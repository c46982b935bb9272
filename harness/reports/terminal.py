"""Reports in the terminal: the compact summary `grade run` prints (diagnosis first, points per category, failing
tests grouped) and the full text of `grade report`. Plain lines; styling is the caller's business."""

from __future__ import annotations

from harness.core.audience import for_audience
from harness.core.report import Report, TestResult, batch_error
from harness.reports.style import MARK
from harness.reports.summary import category_scores, failure_groups, fmt, title_of

WIDTH = 100  # category summary lines wrap here


def render_summary(report: Report, *, audience: str = "interviewer", max_failures: int = 12,
                   more: str = " (see the JSON report)") -> list[str]:
    """Plain lines (the CLI styles them): verdict, diagnosis, points per category, failing tests. ``audience``
    candidate: a group of hidden tests shows no message (the report is taken as it is, not filtered: the
    service's candidate view is filtered already). ``more`` ends the line that counts the failing tests not
    shown (where the rest can be read)."""
    lines = [f"{report.exercise} ({report.track} track): {report.verdict.upper()}  "
             f"score {_num(report.score)}/{_num(report.max_score)}  [{sandbox_label(report.environment)}, "
             f"{report.timings.get('total_s', 0):.2f} s]"]
    for diag in report.diagnosis:
        lines.append(f"  diagnosis: {diag.bug}: {diag.summary}")
        if diag.hint:
            lines.append(f"    hint: {diag.hint}")
    lines += category_line(report)
    shown = 0
    groups = failure_groups(report.tests)
    n_tests = len(report.tests)
    for group in groups:
        if shown >= max_failures:
            break
        t = group[0]
        hidden = audience == "candidate" and all(g.visibility == "hidden" for g in group)
        message = "(hidden test)" if hidden else t.message
        mark = MARK.get(t.status, t.status.upper())
        if len(group) == 1:
            lines.append(f"  {mark:7} {t.category:9} {t.id}: {message}")
        else:  # one line for tests that failed the same way (an import error, a dead worker)
            who = f"all {n_tests} tests" if len(group) == n_tests else \
                f"{len(group)} tests ({t.id} and {len(group) - 1} more)"
            lines.append(f"  {mark:7} {who}: {message}")
        shown += 1
    rest = sum(len(g) for g in groups[shown:])
    if rest:
        lines.append(f"  ... and {rest} more failing tests{more}")
    return lines


def category_line(report: Report, *, width: int = WIDTH) -> list[str]:
    """Points per category (they sum to the score), tests passed in brackets: ``numeric 2/17 pts [2/10 tests]``."""
    parts = [f"{c['category']} {_num(c['score'])}/{_num(c['max_score'])} pts [{c['passed']}/{c['total']} tests]"
             for c in category_scores(report)]
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


def sandbox_label(env: dict) -> str:
    """"docker sandbox", "docker sandbox (gVisor)" under the runsc runtime, "local sandbox"."""
    gvisor = " (gVisor)" if env.get("docker_runtime") == "runsc" else ""
    return f"{env.get('sandbox')} sandbox{gvisor}"


def _num(x: float) -> str:
    return f"{round(x, 4):g}"


def render_text(report: Report, *, audience: str = "interviewer", width: int = 24) -> list[str]:
    """Plain lines: verdict and score, the diagnosis (hint first), score by category, failing tests with their
    diagnostics. Styling is the caller's business."""
    d = for_audience(report, audience)
    env, timings = d.environment, d.timings
    pct = f" ({100 * d.score / d.max_score:.0f}%)" if d.max_score else ""
    lines = [f"{title_of(d)}: {d.exercise} ({d.track} track)",
             f"verdict: {d.verdict.upper()}   score {d.score:g}/{d.max_score:g}{pct}   "
             f"[{sandbox_label(env)}, {timings.get('total_s', 0):.2f} s, seed {env.get('seed')}]"]
    err = batch_error(d)
    if err:
        lines.append(f"not graded ({err.get('kind')}): {err.get('message', '')}")
    if d.diagnosis:
        lines.append("")
        lines.append("diagnosis:")
        for diag in d.diagnosis:
            lines.append(f"  {diag.bug}")
            if diag.hint:
                lines.append(f"    hint: {diag.hint}")
            lines.append(f"    {diag.summary}")
    cats = category_scores(d)
    if cats:
        lines.append("")
        lines.append("score by category:")
        for c in cats:
            frac = c["score"] / c["max_score"] if c["max_score"] else (1.0 if c["passed"] == c["total"] else 0.0)
            bar = "#" * round(frac * width) + "." * (width - round(frac * width))
            lines.append(f"  {c['category']:10} {bar} {c['score']:g}/{c['max_score']:g} points, "
                         f"{c['passed']}/{c['total']} tests")
    failing = [t for t in d.tests if t.status not in ("passed", "skipped")]
    if failing:
        lines.append("")
        lines.append(f"failing tests ({len(failing)}):")
        for group in failure_groups(failing):
            t = group[0]
            mark = MARK.get(t.status, t.status.upper())
            if len(group) == 1:
                lines.append(f"  {mark:7} {t.category:9} {t.id}  ({t.points:g}/{t.max_points:g})")
            else:  # the same failure in many tests (an import error, a dead worker): its details once
                lost = sum(x.max_points - x.points for x in group)
                every = "all of them" if len(group) == len(d.tests) else ""
                lines.append(f"  {mark:7} {len(group)} tests{' (' + every + ')' if every else ''}, "
                             f"{lost:g} points lost: {_ids(group)}")
            if t.message:
                lines.append(f"          {t.message}")
            for key, value in t.diagnostics.items():
                if key == "traceback":
                    lines.append("          traceback:")
                    lines.extend(f"            {ln}" for ln in str(value).splitlines()[-12:])
                else:
                    lines.append(f"          {key}: {fmt(value)}")
    elif d.tests:
        lines.append("")
        lines.append("every test passed" if d.verdict == "passed" else "no failing tests")
    return lines


def _ids(group: list[TestResult], shown: int = 4) -> str:
    ids = ", ".join(t.id for t in group[:shown])
    return ids + (f" and {len(group) - shown} more" if len(group) > shown else "")
