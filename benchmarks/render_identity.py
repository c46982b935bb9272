"""No change in what the renderers show: every reference's and catalogued mutant's report rendered by every
renderer, before and after a refactor, compared byte for byte (issue 24: the renderers read the typed Report).

    python benchmarks/render_identity.py grade REPORTS/                # once: a folder of reports (+ .npz, sources)
    PYTHONPATH=<old tree> python benchmarks/render_identity.py render REPORTS/ before/
    PYTHONPATH=<new tree> python benchmarks/render_identity.py render REPORTS/ after/
    diff -r before/ after/

Both trees render the same report files, so nothing volatile is left to take out (the timings are the reports').
Per report: `grade run`'s summary, `grade report`'s text and HTML page (interviewer and candidate), the service's
JSON report (interviewer, candidate, a round's summary feedback), its report.html for each (plots from the .npz,
the source from the store), the attempt page's summary lines, `grade submit --wait`'s summary of the candidate
JSON, the submission page's categories and failing groups, and the batch table's reason. Per exercise and track,
and over all reports: the compare table (HTML, JSON, `grade compare`'s rows) and the service's compare page.
``grade`` grades with the local sandbox (warm workers, plots kept), ~15 min on 2 busy cores. ``render`` takes
~4 min with ``--stub-plots`` (each picture a stand-in naming the test and a hash of its arrays: what is drawn,
not matplotlib's pixels, which no refactor of the renderers touches) and hours with the real pictures on a busy
machine; render a subset for those (``--only``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def grade_all(out: Path) -> int:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report_identity import submissions

    from harness.grading.engine import grade

    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, exercise, track, path in submissions(Path(tmp)):
            slug = name.replace("/", "__")
            if (out / f"{slug}.json").exists():
                continue
            copy = src / f"{slug}.py"       # beside the report: the HTML page finds it by the path it records
            shutil.copy(path, copy)
            report = grade(exercise=exercise, submission=copy, track=track, sandbox="local", keep_artifacts=True,
                           warm=True)
            report.write(out / f"{slug}.json")
            print(name, report.verdict, flush=True)
    return 0


def _stand_in(kind: str):
    def draw(item: dict) -> tuple[str, str]:
        h = hashlib.sha256()
        for name in sorted(item["arrays"]):
            h.update(name.encode())
            h.update(item["arrays"][name].tobytes())
        return f"stub:{kind}:{item['test_id']}:{h.hexdigest()[:16]}", f"{kind} of {item['test_id']} h={item['h']}"
    return draw


def render_all(reports_dir: Path, out: Path, stub_plots: bool = False, only: str | None = None) -> int:
    from harness.core.report import read_report
    from harness.reports import compare, html, summary, terminal
    from harness.service import grading, rounds
    from harness.service.api.common import report_for

    if stub_plots:
        html.error_heatmaps, html.attention_patterns = _stand_in("heat"), _stand_in("pattern")
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, text) -> None:
        (out / name).write_text(text if isinstance(text, str) else "\n".join(text) + "\n")

    def api_json(report) -> str:  # what the API's JSONResponse writes
        return json.dumps(report.to_dict(), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))

    files = sorted(f for f in reports_dir.glob("*.json") if not only or only in f.stem)
    loaded = []
    for path in files:
        report, s = read_report(path), path.stem
        loaded.append((path, report))
        write(f"{s}.run_summary.txt", terminal.render_summary(report))
        for aud in ("interviewer", "candidate"):
            write(f"{s}.text.{aud}.txt", terminal.render_text(report, audience=aud))
            write(f"{s}.html.{aud}.html", html.render_html(report, audience=aud, report_path=path))
        row = {"id": s, "status": "done", "report_json": path.read_text()}
        source = Path(report.submission["path"]).read_text()
        npz = path.with_suffix(".npz").read_bytes() if path.with_suffix(".npz").exists() else None
        for aud in ("interviewer", "candidate"):
            write(f"{s}.api.{aud}.json", api_json(report_for(row, aud)))
            write(f"{s}.svc_html.{aud}.html", grading.report_html(report_for(row, "interviewer"), audience=aud,
                                                                   source=source, npz=npz))
        full = report_for(row, "interviewer")
        cut = rounds.summary_report(full)
        write(f"{s}.api.summary.json", api_json(cut))
        write(f"{s}.svc_html.summary.html", grading.report_html(cut, audience="candidate", source=source, npz=None))
        write(f"{s}.svc_summary_lines.txt", grading.summary_lines(full, audience="interviewer"))
        seen = type(report).from_dict(json.loads(api_json(report_for(row, "candidate"))))  # as `grade submit` reads it
        aud = "candidate" if any(t.redacted for t in seen.tests) else "interviewer"
        write(f"{s}.kit_summary.txt", terminal.render_summary(seen, audience=aud, more=" (see the submission's page)"))
        view = report_for(row, "candidate")
        write(f"{s}.page_bits.json", json.dumps({
            "cats": grading.category_scores(view),
            "failing": [[t.to_dict() for t in g] for g in grading.failure_groups(view.tests)],
            "error_reason": summary.error_reason(full), "title": summary.title_of(full)}, indent=1))
    groups: dict[str, list] = {}
    for path, report in loaded:
        groups.setdefault(f"{report.exercise}.{report.track}", []).append((path, report))
    for g, items in [*groups.items(), ("all", loaded)]:
        write(f"compare.{g}.html", compare.render_html(items))
        write(f"compare.{g}.json", compare.to_json(items))
        write(f"svc_compare.{g}.html", grading.compare_html([(f"cand {i} · {p.name}", report_for(
            {"id": p.stem, "status": "done", "report_json": p.read_text()}, "interviewer"))
            for i, (p, _) in enumerate(items)]))
    found = compare.collect_reports(files)
    write("compare.collected.html", compare.render_html(found))
    write("compare.collected.txt", [compare.mixed_exercises(found), compare.candidates(len(found))]
          + [json.dumps(x) for x in compare.rows(found)[1]])
    print(f"{len(files)} reports rendered -> {out} ({len(list(out.iterdir()))} files)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grade")
    g.add_argument("reports", type=Path)
    r = sub.add_parser("render")
    r.add_argument("reports", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--stub-plots", action="store_true", help="stand-ins for the pictures (minutes, not hours)")
    r.add_argument("--only", help="render only the reports whose file name contains this")
    opts = parser.parse_args()
    if opts.cmd == "grade":
        return grade_all(opts.reports)
    return render_all(opts.reports, opts.out, opts.stub_plots, opts.only)


if __name__ == "__main__":
    sys.exit(main())
