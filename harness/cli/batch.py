"""`grade batch`: grade many submissions (:mod:`harness.batch`), with a progress bar and a summary table."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from harness.cli.common import console, fail, runtime_option
from harness.core.errors import EXIT_INTERRUPTED
from harness.core.exercises import TRACKS
from harness.reports.style import colour_of

@click.command("batch", short_help="Grade a folder of submissions; one report each.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--exercise", "-e", required=True, help="Exercise every submission is graded against.")
@click.option("--track", type=click.Choice(("auto", *TRACKS)), default="auto", show_default=True,
              help="Track to grade; auto detects it per file.")
@click.option("--sandbox", type=click.Choice(["auto", "local", "docker"]), default="auto", show_default=True, envvar="GRADER_SANDBOX",
              help="Where submissions run (each in its own worker / container).")
@runtime_option
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Submissions graded at once.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the reports (<path>.<sha256>.json, one per submission).")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write JUnit XML here (one testsuite per submission).")
@click.option("--gradescope", is_flag=True, help="Also write OUT/gradescope/<submission>/results.json.")
@click.option("--resume", is_flag=True, help="Skip submissions whose report (same sha256, exercise, track, "
                                             "harness version) already exists in OUT.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random test inputs.")
@click.option("--timeout", type=float, default=None, help="Wall-clock seconds per call (default 20).")
@click.option("--memory-mb", type=int, default=None, help="Memory limit of each worker in MiB (default 2048).")
@click.option("--no-artifacts", is_flag=True, help="Do not keep the arrays the HTML report plots (.npz).")
@click.option("--warm/--no-warm", default=None,
              help="Warm workers: each submission still gets its own single-use worker, forked from a process "
                   "that has already imported torch (local) or a container started ahead of time (docker). "
                   "Default: warm in the local sandbox (about 3.7x the throughput), cold in docker (every "
                   "single-use container imports torch either way; warm only hides latency, ~0.8x here).")
def batch_cmd(paths, exercise, track, sandbox, jobs, out, junit_path, gradescope, resume, seed, timeout,
              memory_mb, no_artifacts, warm):
    """Grade every .py file under PATH... and write one report per submission to OUT.

    Exit 0 if every submission passed, 1 if any failed, 3 on an infrastructure fault (130: interrupted;
    re-run with --resume)."""
    from harness.batch import BatchOptions, run_batch
    from harness.core.errors import GraderError

    opts = BatchOptions(exercise=exercise, out=out, track=track, sandbox=sandbox, jobs=jobs, seed=seed,
                        limits={"call_timeout_s": timeout, "memory_mb": memory_mb}, resume=resume,
                        keep_artifacts=not no_artifacts, warm=warm)
    progress = _Progress()
    try:
        with progress:
            result = run_batch(paths, opts, on_event=progress.event)
    except GraderError as exc:
        fail(exc)
    from harness.core.report import Report

    typed = [(it, Report.from_dict(it.report)) for it in result.items if it.report is not None]  # the renderers'
    named = [(it.label, report) for it, report in typed]
    if junit_path:
        from harness.reports.junit import write_junit

        write_junit(junit_path, named)
    if gradescope:
        from harness.reports.gradescope import write_results

        for it, report in typed:
            write_results(Path(out) / "gradescope" / it.slug / "results.json", report)
    _summary(result, {id(it): report for it, report in typed}, out, junit_path, gradescope)
    sys.exit(EXIT_INTERRUPTED if result.interrupted else result.exit_code)


class _Progress:
    """A rich progress bar on a terminal; one line per finished submission otherwise (CI logs)."""

    def __init__(self):
        from rich.console import Console

        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.counts = {"passed": 0, "failed": 0, "errored": 0}
        self.total = self.todo = self.done = 0
        self.t0 = time.monotonic()
        self.bar = self.task = None

    def __enter__(self):
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(),
                                TextColumn(f"[{colour_of('passed')}]{{task.fields[passed]}} passed[/] "
                                           f"[{colour_of('failed')}]{{task.fields[failed]}} failed[/] "
                                           f"[{colour_of('error')}]{{task.fields[errored]}} errored[/]"),
                                TextColumn("ETA"), TimeRemainingColumn(), TimeElapsedColumn(),
                                console=self.console, transient=False)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def event(self, kind, payload):
        if kind == "plan":
            self.total, self.todo = payload["total"], payload["todo"]
            if payload["resumed"]:
                self.console.print(f"resume: {payload['resumed']} of {payload['total']} submissions already "
                                   f"have a report; grading {payload['todo']}")
            if self.bar is not None:
                self.task = self.bar.add_task("grading", total=self.todo, **self.counts)
        elif kind == "notice":
            self.console.print(payload, markup=False, highlight=False, soft_wrap=True)
        elif kind == "done":
            self.done += 1
            bucket = {"passed": "passed", "failed": "failed"}.get(payload.outcome, "errored")
            self.counts[bucket] += 1
            if self.bar is not None:
                self.bar.update(self.task, advance=1, **self.counts)
            else:
                elapsed = time.monotonic() - self.t0
                eta = elapsed / self.done * (self.todo - self.done)
                self.console.print(f"[{self.done}/{self.todo}] {payload.label}: {payload.outcome.upper()}  "
                                   f"(passed {self.counts['passed']}, failed {self.counts['failed']}, errored "
                                   f"{self.counts['errored']}; ETA {eta:.0f} s)", markup=False, highlight=False,
                                   soft_wrap=True)


def _summary(result, reports: dict, out, junit_path, gradescope) -> None:
    """``reports``: the typed report of each item that has one, by the item's id()."""
    from rich.table import Table

    from harness.reports.summary import error_reason

    out_console = console()
    table = Table(title=f"grade batch: {len(result.items)} submissions", title_justify="left")

    for col, kw in (("submission", {"overflow": "fold"}), ("verdict", {}), ("score", {"justify": "right"}),
                    ("diagnosis / error", {"overflow": "fold"}), ("time", {"justify": "right", "no_wrap": True}),
                    ("note", {})):
        table.add_column(col, **kw)
    for it in result.items:
        rep = reports.get(id(it))
        diag = (", ".join(d.bug for d in rep.diagnosis) or error_reason(rep)) if rep else ""
        score = f"{rep.score:g}/{rep.max_score:g}" if rep else "-"
        table.add_row(it.label, f"[{colour_of(it.outcome)}]{it.outcome}[/]", score, diag,
                      f"{it.seconds:.1f} s", "resumed" if it.resumed else "")
    out_console.print(table)
    c = result.counts
    line = (f"{c['passed']} passed, {c['failed']} failed, {c['errored']} errored"
            + (f" ({c['infrastructure']} infrastructure)" if c["infrastructure"] else "")
            + (f", {c['resumed']} resumed" if c["resumed"] else "")
            + f" in {result.elapsed_s:.1f} s; reports in {out}")
    if junit_path:
        line += f"; JUnit: {junit_path}"
    if gradescope:
        line += f"; Gradescope: {Path(out) / 'gradescope'}"
    if result.interrupted:
        line = "interrupted: " + line + " (re-run with --resume to finish)"
    out_console.print(line, markup=False, highlight=False, soft_wrap=True)
