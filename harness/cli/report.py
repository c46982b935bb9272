"""`grade report` and `grade compare`: showing saved reports (:mod:`harness.reports`)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import console, fail, style
from harness.reports.style import colour_of

@click.command("report", short_help="Show a saved report in the terminal or as HTML.")
@click.argument("report_path", metavar="REPORT.json", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--audience", type=click.Choice(["interviewer", "candidate"]), default="interviewer",
              show_default=True, help="candidate: hidden tests show no message, inputs or plots.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a self-contained HTML page (plots inline, no network fetches).")
@click.option("--source", "source_path", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="The submission file, if it is no longer at the path the report records.")
def report_cmd(report_path, audience, html_path, source_path):
    """Show a saved report: verdict, diagnosis, score by category, failing tests with their diagnostics."""
    from harness.core.errors import GraderError
    from harness.core.report import read_report
    from harness.reports.terminal import render_text

    try:
        report = read_report(report_path)
    except GraderError as exc:
        fail(exc)
    for line in render_text(report, audience=audience):
        click.echo(style(line))
    if html_path:
        from harness.reports.html import write_html

        write_html(html_path, report, audience=audience, report_path=report_path, source_path=source_path)
        click.echo(f"wrote {html_path}")


@click.command("compare", short_help="Candidates side by side: verdict, points, bugs.")
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a sortable HTML table.")
def compare_cmd(reports, html_path):
    """One row per candidate (REPORT files, or folders of them): verdict, score per category, diagnosed bugs,
    time taken."""
    from rich.table import Table

    from harness.reports.compare import candidates, collect_reports, mixed_exercises, rows, write_html
    from harness.core.errors import GraderError

    try:
        found = collect_reports(reports)
    except GraderError as exc:
        fail(exc)
    warning = mixed_exercises(found)
    if warning:
        click.echo(f"grade: warning: {warning}", err=True)
    cats, table = rows(found)
    t = Table(title=candidates(len(table)), title_justify="left",
              caption="score and category columns: points earned/available", caption_justify="left")
    for col in ("candidate", "exercise", "verdict", "score", *cats, "diagnosed bugs / error", "time"):
        t.add_column(col, justify="right" if col in ("score", "time", *cats) else "left",
                     overflow="fold", no_wrap=col in ("score", "time", "verdict"))
    for r in table:
        cells = [r["candidate"], f"{r['exercise']} ({r['track']})",
                 f"[{colour_of(r['verdict'])}]{r['verdict']}[/]", f"{r['score']:g}/{r['max_score']:g}"]
        cells += ["-" if r["categories"][c] is None else
                  f"{r['categories'][c]['score']:g}/{r['categories'][c]['max_score']:g}" for c in cats]
        cells += [", ".join(r["bugs"]) or r["not_graded"], f"{r['time_s']:.2f} s"]
        t.add_row(*cells)
    console().print(t)
    if html_path:
        write_html(html_path, found)
        click.echo(f"wrote {html_path}")
