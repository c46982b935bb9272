"""Interviewer review, computed (issue 25): a candidate's attempts per round and exercise (timeline, highlighted
sources, diffs between consecutive attempts), cohort analytics with server-rendered SVG bar charts, and one
candidate's data as a zip. The store's side is store/review.py; similarity is similarity.py."""

from __future__ import annotations

import difflib
import io
import json
import statistics
import zipfile
from collections import Counter

from markupsafe import Markup, escape

from harness.service import grading
from harness.service.store import review as store_review
from harness.service.store.repository import iso


def highlight(source: str) -> Markup:
    """The source as HTML, highlighted by pygments (inline styles: no stylesheet to load), line-numbered."""
    from pygments import highlight as hl
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return Markup(hl(source, PythonLexer(), HtmlFormatter(noclasses=True, linenos="inline", nowrap=False,
                                                            style="friendly")))


def diff_table(before: dict, after: dict) -> Markup:
    """Side by side, changed lines with context (difflib escapes the text)."""
    table = difflib.HtmlDiff(tabsize=4, wrapcolumn=64).make_table(
        before["source"].splitlines(), after["source"].splitlines(),
        f"attempt {before['attempt']}", f"attempt {after['attempt']}", context=True, numlines=3)
    return Markup(table)


def _diagnosis(report: grading.Report | None) -> list[str]:
    return [d.bug for d in report.diagnosis if d.bug] if report else []


def attempt_view(row: dict) -> dict:
    report = grading.load_report(row["report_json"]) if row.get("report_json") else None
    return {"id": row["id"], "attempt": row["attempt"], "exercise": row["exercise"], "received_at": iso(row["received_at"]),
            "finished_at": iso(row["finished_at"]), "status": row["status"], "verdict": row["verdict"],
            "score": row["score"], "max_score": row["max_score"], "final_score": store_review.final_score(row),
            "override": row.get("override"), "filename": row["filename"], "sha256": row["sha256"],
            "categories": grading.category_scores(report) if report else [], "diagnosis": _diagnosis(report)}


def candidate_story(store, candidate_id: str, round_id: str | None = None) -> list[dict]:
    """[{round_id, exercise, summary, attempts: [view], diffs: [(a, b, table)]}] per round and exercise."""
    rows = store_review.attempts_of(store, candidate_id)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if round_id and r["round_id"] != round_id:
            continue
        groups.setdefault((r["round_id"], r["exercise"]), []).append(r)
    out = []
    for (rid, ex), atts in groups.items():
        out.append({"round_id": rid, "exercise": ex, "summary": store_review.summarise(atts),
                    "attempts": [attempt_view(a) for a in atts],
                    "diffs": [{"from": a["attempt"], "to": b["attempt"], "from_id": a["id"], "to_id": b["id"],
                               "same": a["sha256"] == b["sha256"]} for a, b in zip(atts, atts[1:])]})
    return out


# -- cohort analytics -----------------------------------------------------------------------------------------------
def analytics(rows: list[dict], overrides: dict[str, dict], started: dict[str, object]) -> list[dict]:
    """Per exercise of a round's submissions: candidates, pass rate, a histogram of each candidate's best final
    score (tenths of the maximum), the tests failed most, the bug ids diagnosed most, median attempts and
    median time from first open to first pass."""
    by_ex: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["seq"]):
        by_ex.setdefault(r["exercise"], []).append(r)
    out = []
    for ex, subs in sorted(by_ex.items()):
        per_cand: dict[str, list[dict]] = {}
        failed, bugs = Counter(), Counter()
        for r in subs:
            per_cand.setdefault(r.get("candidate_id") or r["id"], []).append(r)
            if r["status"] == "done" and r["report_json"]:
                rep = grading.load_report(r["report_json"])
                failed.update(t.id for t in rep.tests if t.status not in ("passed", "skipped"))
                bugs.update(_diagnosis(rep))
        hist = [0] * 10
        passed, to_pass, attempts = 0, [], []
        for cid, atts in per_cand.items():
            attempts.append(len(atts))
            done = [a for a in atts if a["status"] == "done" and a["max_score"]]
            if done:
                best = max((overrides[a["id"]]["score"] if a["id"] in overrides else a["score"]) / a["max_score"]
                           for a in done)
                hist[min(9, int(best * 10))] += 1
            first = next((a for a in done if a["verdict"] == "passed"), None)
            if first is not None:
                passed += 1
                start = started.get(cid) or atts[0]["received_at"]
                to_pass.append(max(0.0, ((first["finished_at"] or first["received_at"]) - start).total_seconds()))
        n = len(per_cand)
        out.append({"exercise": ex, "candidates": n, "submissions": len(subs), "passed": passed,
                    "pass_rate": passed / n if n else 0.0, "histogram": hist,
                    "tests_failed": failed.most_common(10), "bugs": bugs.most_common(10),
                    "median_attempts": statistics.median(attempts) if attempts else None,
                    "median_seconds_to_pass": statistics.median(to_pass) if to_pass else None})
    return out


def _short(name: str, n: int = 30) -> str:
    return name if len(name) <= n else name[:n - 1] + "…"


def bar_svg(items: list[tuple[str, float]], *, title: str, unit: str = "", width: int = 520) -> Markup:
    """A horizontal bar chart as inline SVG (no script, no CDN): one <rect class="bar"> per item, its width
    proportional to the value, labelled with the name and the value."""
    row_h, label_w = 22, 200
    peak = max((v for _, v in items), default=0) or 1
    h = row_h * max(1, len(items)) + 26
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="chart" width="{width}" height="{h}" '
             f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
             f'<text x="0" y="14" font-size="13" font-weight="bold">{escape(title)}</text>']
    for i, (name, v) in enumerate(items):
        y = 22 + i * row_h
        w = (width - label_w - 50) * v / peak
        parts.append(f'<text x="0" y="{y + 14}" font-size="12">{escape(_short(str(name)))}</text>'
                     f'<rect class="bar" data-label="{escape(str(name))}" data-value="{v:g}" x="{label_w}" '
                     f'y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="#2457c5"/>'
                     f'<text x="{label_w + w + 4:.1f}" y="{y + 14}" font-size="12">{v:g}{escape(unit)}</text>')
    if not items:
        parts.append('<text x="0" y="40" font-size="12">none</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


# -- one candidate's data -------------------------------------------------------------------------------------------
def export_zip(store, candidate_id: str) -> bytes | None:
    """candidate.json (the record, rounds, submissions without sources), sources/<id>-<file>, reports/<id>.json
    (the latest report) and reports/<id>.v<N>.json (earlier versions). Interviewer notes stay out."""
    data = store_review.candidate_data(store, candidate_id)
    if data is None:
        return None
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        meta = {"candidate": data["candidate"], "rounds": data["rounds"], "submissions": []}
        for s in data["submissions"]:
            meta["submissions"].append({k: v for k, v in s.items() if k in (
                "id", "exercise", "track", "round_id", "filename", "sha256", "size", "status", "verdict", "score",
                "max_score", "received_at", "finished_at", "seed")})
            z.writestr(f"sources/{s['id']}-{s['filename']}", s["source"])
            if s["report_json"]:
                z.writestr(f"reports/{s['id']}.json", s["report_json"])
            for v in data["versions"].get(s["id"], []):
                if v["report_json"]:
                    z.writestr(f"reports/{s['id']}.v{v['version']}.json", v["report_json"])
        z.writestr("candidate.json", json.dumps(meta, indent=1, default=lambda x: iso(x) if hasattr(x, "isoformat")
                                                else str(x)))
    return buf.getvalue()


# -- exports ------------------------------------------------------------------------------------------------------
CATEGORY_COLUMNS = ("shape", "numeric", "edge", "gradient", "structure")


def export_columns(store, rows: list[dict], reports: dict[str, grading.Report]) -> tuple[list[str], dict[str, list]]:
    """The CSV's review columns: points per category, the attempt number, attempts used, best and last final score
    of the candidate on that round's exercise, the rubric's points per criterion, and the override."""
    sub_ids = [r["id"] for r in rows]
    ovr = store_review.overrides(store, sub_ids)
    rubric = store_review.rubric_scores(store, sub_ids)
    names = sorted({n for d in rubric.values() for n in d})
    stories: dict[str, dict] = {}
    for cid in {r["candidate_id"] for r in rows if r.get("candidate_id")}:
        atts = store_review.attempts_of(store, cid)
        groups: dict[tuple, list[dict]] = {}
        for a in atts:
            groups.setdefault((a["round_id"], a["exercise"]), []).append(a)
        for key, g in groups.items():
            summ = store_review.summarise(g)
            for a in g:
                stories[a["id"]] = {"attempt": a["attempt"], **summ}
    header = ([f"points_{c}" for c in CATEGORY_COLUMNS] + ["attempt", "attempts_used", "best_score", "last_score"]
              + [f"rubric:{n}" for n in names] + ["override_score", "override_reason", "final_score"])
    out = {}
    for r in rows:
        cats = {c["category"]: c["score"] for c in grading.category_scores(reports[r["id"]])} if r["id"] in reports \
            else {}
        st = stories.get(r["id"], {})
        o = ovr.get(r["id"])
        out[r["id"]] = ([cats.get(c) for c in CATEGORY_COLUMNS]
                        + [st.get("attempt"), st.get("attempts"), st.get("best"), st.get("last")]
                        + [rubric.get(r["id"], {}).get(n) for n in names]
                        + [o["score"] if o else None, o["reason"] if o else None, o["score"] if o else r["score"]])
    return header, out


# -- whose a report is ---------------------------------------------------------------------------------------------
def whose(store, row: dict, *, staff: bool) -> Markup:
    """A line for the top of a report: candidate, round, exercise, attempt number, and a link back (staff: to the
    attempt's review; a candidate: to the submission's page)."""
    from harness.service.store import rounds as store_rounds

    attempt = None
    if row.get("candidate_id"):
        attempt = next((a["attempt"] for a in store_review.attempts_of(store, row["candidate_id"])
                        if a["id"] == row["id"]), None)
    r = store_rounds.get(store, row["round_id"]) if row.get("round_id") else None
    back = f"/review/{row['id']}" if staff else f"/submissions/{row['id']}"
    return Markup('<p class="whose" id="whose" style="font:14px sans-serif;margin:8px 0">') + escape(
        f"{row.get('candidate') or 'anonymous'} · {('round ' + r['name']) if r else 'no round'} · "
        f"{row['exercise']} · attempt {attempt or 1} · ") + Markup(
        f'<a id="whose-back" href="{escape(back)}">back to the {"review" if staff else "submission"}</a></p>')


def with_whose(page: str, line: Markup) -> str:
    for marker in ("<body><main>", "<body>"):
        if marker in page:
            return page.replace(marker, marker + str(line), 1)
    return str(line) + page


def compare_rows(store, rows: list[dict]) -> list[dict]:
    """The app's compare table: each graded submission with its candidate, attempt, verdict, final score and
    points per category."""
    out = []
    for r in rows:
        attempt = None
        if r.get("candidate_id"):
            attempt = next((a for a in store_review.attempts_of(store, r["candidate_id"]) if a["id"] == r["id"]), None)
        view = attempt_view({**(attempt or r), "attempt": attempt["attempt"] if attempt else 1})
        view["candidate"] = r["candidate"] or "anonymous"
        view["cats"] = {c["category"]: c for c in view["categories"]}
        out.append(view)
    return out
