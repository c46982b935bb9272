"""Comparing candidates: one row per report (verdict, score per category, diagnosed bugs, time taken), as
rows for a terminal table or a self-contained HTML table sortable by any column (a few lines of inline JS)."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

from harness.core.errors import UsageError
from harness.core.report import CATEGORIES, Report
from harness.core.report import read_report as load_report_file
from harness.reports.style import css_rules
from harness.reports.summary import category_scores, error_reason, title_of

_SORT_JS = """
document.querySelectorAll("table.cmp th").forEach(function (th, col) {
  th.addEventListener("click", function () {
    var body = th.closest("table").tBodies[0], rows = Array.from(body.rows);
    var asc = th.getAttribute("aria-sort") !== "ascending";
    th.closest("tr").querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.sort, y = b.cells[col].dataset.sort, nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""

_CSS = """
body{font:14px/1.45 -apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:24px;color:#1d2330}
table.cmp{border-collapse:collapse} .cmp th,.cmp td{border-bottom:1px solid #e3e6eb;padding:6px 10px;text-align:left}
.cmp th{background:#f0f2f5;cursor:pointer;user-select:none;white-space:nowrap}
.cmp th[aria-sort=ascending]::after{content:" \\25B2"} .cmp th[aria-sort=descending]::after{content:" \\25BC"}
.v{font-weight:700}
.cmp td.num{text-align:right;white-space:nowrap} .warn{color:#8a5a00;font-weight:600} code{font-size:12px} h1{font-size:22px}
""" + css_rules(".v")


def collect_reports(paths) -> list[tuple[Path, Report]]:
    """Reports from files and folders (every ``*.json`` directly in a folder that is a valid report)."""
    found = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(p.glob("*.json")):
                try:
                    found.append((f, load_report_file(f)))
                except UsageError:
                    continue  # junit.xml neighbours, Gradescope files, ... are not reports
        else:
            found.append((p, load_report_file(p)))
    if not found:
        raise UsageError("no grading reports found")
    return found


def rows(reports: list[tuple[Path, Report]]) -> tuple[list[str], list[dict]]:
    """Columns present (categories in canonical order) and one row per report."""
    cats = [c for c in CATEGORIES if any(t.category == c for _, d in reports for t in d.tests)]
    out = []
    for path, d in reports:
        by_cat = {c["category"]: c for c in category_scores(d)}
        out.append({"candidate": title_of(d) or path.name, "report": str(path), "exercise": d.exercise,
                    "track": d.track, "verdict": d.verdict, "score": d.score, "max_score": d.max_score,
                    "categories": {c: by_cat.get(c) for c in cats},
                    "bugs": [x.bug for x in d.diagnosis],
                    "not_graded": error_reason(d, limit=200),
                    "time_s": float(d.timings.get("total_s", 0.0))})
    return cats, out


def candidates(n: int) -> str:
    return f"{n} candidate" + ("" if n == 1 else "s")


def mixed_exercises(reports: list[tuple[Path, Report]]) -> str:
    """A warning when the reports are not all for one exercise and track (their scores are not comparable),
    else ''."""
    kinds = sorted({f"{d.exercise} ({d.track})" for _, d in reports})
    if len({d.exercise for _, d in reports}) > 1:
        return (f"these reports are for different exercises ({', '.join(kinds)}): their scores and categories "
                "are not comparable")
    return ""


def _pct(score, max_score) -> float:
    return 100.0 * score / max_score if max_score else 0.0


def render_html(reports: list[tuple[Path, Report]]) -> str:
    cats, table = rows(reports)
    e = lambda x: html.escape(str(x), quote=True)  # noqa: E731
    head = ["candidate", "exercise", "verdict", "score", *cats, "diagnosed bugs", "time"]
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Candidates compared</title>'
           f"<style>{_CSS}</style></head><body><h1>{e(candidates(len(table)))} compared</h1>"
           + (f'<p class="warn" id="mixed">Warning: {e(mixed_exercises(reports))}.</p>' if mixed_exercises(reports)
              else "")
           + "<p>Click a column header to sort. Category columns are points earned / available.</p><table class=\"cmp\" id=\"compare\"><thead><tr>",
           "".join(f"<th>{e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    rank = {"passed": 0, "failed": 1, "error": 2}
    for r in table:
        cells = [f'<td data-sort="{e(r["candidate"])}">{e(r["candidate"])}</td>',
                 f'<td data-sort="{e(r["exercise"] + "/" + r["track"])}">{e(r["exercise"])} ({e(r["track"])})</td>',
                 f'<td data-sort="{rank.get(r["verdict"], 3)}" class="v {e(r["verdict"])}">{e(r["verdict"])}</td>',
                 f'<td class="num" data-sort="{_pct(r["score"], r["max_score"]):.4f}">'
                 f'{r["score"]:g}/{r["max_score"]:g}</td>']
        for c in cats:
            v = r["categories"][c]
            cells.append('<td class="num" data-sort="-1">–</td>' if v is None else
                         f'<td class="num" data-sort="{_pct(v["score"], v["max_score"]):.4f}">'
                         f'{v["score"]:g}/{v["max_score"]:g}</td>')
        bugs = ", ".join(r["bugs"]) or r["not_graded"]
        cells.append(f'<td data-sort="{e(bugs)}"><code>{e(bugs)}</code></td>')
        cells.append(f'<td class="num" data-sort="{r["time_s"]:.4f}">{r["time_s"]:.2f} s</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append(f"</tbody></table><script>{_SORT_JS}</script></body></html>")
    return "".join(out)


def write_html(path: str | os.PathLike, reports: list[tuple[Path, Report]]) -> None:
    from harness.core.report import write_atomic

    write_atomic(Path(path), render_html(reports))


def to_json(reports: list[tuple[Path, Report]]) -> str:
    return json.dumps(rows(reports)[1], indent=2)
