"""`grade list`, `grade start` and `grade run` (one file; `grade EXERCISE FILE` is short for it)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.common import ENDS_PROCESS, fail, runtime_option, style
from harness.core.errors import EXIT_FAILED, EXIT_PASSED, GraderError, UsageError
from harness.core.exercises import TRACKS

RUN_EPILOG = """\b
Examples:
  grade mha my_mha.py                   grade a file (track detected from it)
  grade run gqa gqa.py --track torch    the same, spelled out
  grade mha my_mha.py --json r.json     also write the JSON report
  grade report r.json --html r.html     ... and look at it later as a page
  grade mha my_mha.py --sandbox docker  require Docker (grade sandbox doctor)
  grade mha my_mha.py --sandbox docker --runtime runsc
                                        ... under gVisor (a user-space kernel)
  grade mha my_mha.py -q                the verdict line only

\b
Exit codes:
  0  every test passed
  1  graded and something failed (also a file that crashes, hangs or
     cannot be imported: that is a report, not a grader error)
  2  bad usage or unusable input (missing, binary or non-UTF-8 file,
     unknown exercise)
  3  infrastructure fault (the sandbox could not start, the hidden suite
     could not run)
"""


@click.command("list", short_help="List the exercises, their tracks and entry points.")
def list_cmd():
    """List the exercises, their tracks and what each asks for."""
    from harness.core.exercises import all_exercises

    for ex in all_exercises().values():
        entries = "; ".join(f"{t}: {ex.entry_label(t)}" for t in ex.track_names)
        click.echo(f"{ex.name:16} {ex.summary}")
        click.echo(f"{'':16} tracks: {entries}")


@click.command(short_help="Write an exercise's stub to start from.")
@click.argument("exercise")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--track", type=click.Choice(TRACKS), default=None,
              help="Which track's stub to write (default: the exercise's first, e.g. numpy).")
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def start(exercise, path, track, force):
    """Write the stub for EXERCISE to PATH (default: ./<exercise>_<track>.py)."""
    from harness.core.exercises import get_exercise

    try:
        ex = get_exercise(exercise)
        track = ex.check_track(track or ex.default_track)
    except GraderError as exc:
        fail(exc)
    path = path or Path(f"{ex.name}_{track}.py")
    if path.exists() and not force:
        fail(UsageError(f"{path} already exists; pass --force to overwrite it"))
    path.write_text(ex.stub_path(track).read_text())
    click.echo(f"wrote {path}: implement {ex.entry_label(track)}, then run: grade {ex.name} {path}")


@click.command(short_help="Grade one file (`grade EXERCISE FILE` is short for it).", epilog=RUN_EPILOG)
@click.argument("exercise")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--track", type=click.Choice(("auto", *TRACKS)), default="auto", show_default=True,
              help="Track to grade; auto detects it from what the file defines.")
@click.option("--sandbox", type=click.Choice(["auto", "local", "docker"]), default="auto", show_default=True,
              envvar="GRADER_SANDBOX",
              help="Where the submission runs; auto uses docker when the engine and image are ready "
                   "(env: GRADER_SANDBOX).")
@runtime_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON report here (plus a .npz of failing outputs for `grade report --html`).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random test inputs.")
@click.option("--timeout", type=float, default=None, help="Wall-clock seconds per call (default 20).")
@click.option("--memory-mb", type=int, default=None, help="Memory limit of the worker in MiB (default 2048).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict line.")
def run(exercise, file, track, sandbox, json_path, seed, timeout, memory_mb, quiet):
    """Grade FILE against EXERCISE's hidden suite and print a summary."""
    import contextlib

    from harness.grading.engine import grade
    from harness.cli.progress import RunProgress

    progress = None if quiet else RunProgress(sys.stderr, label=f"grading {file}")
    ends_process = click.get_current_context().meta.get(ENDS_PROCESS, False)  # `grade` itself, not an in-process call
    try:
        with progress or contextlib.nullcontext():
            report = grade(exercise=exercise, submission=file, track=track, sandbox=sandbox, seed=seed,
                           limits={"call_timeout_s": timeout, "memory_mb": memory_mb},
                           notice=lambda msg: click.echo(msg, err=True), keep_artifacts=json_path is not None,
                           progress=progress, ends_process=ends_process)
    except GraderError as exc:
        fail(exc)
    if json_path:
        try:
            report.write(json_path)
        except GraderError as exc:
            fail(exc)
    from harness.reports.terminal import render_summary  # after grading: the worker starts before this import

    lines = render_summary(report, more=" (see the JSON report)" if json_path else " (--json PATH writes them all)")
    for line in lines[:1] if quiet else lines:
        click.echo(style(line))
    sys.exit(EXIT_PASSED if report.verdict == "passed" else EXIT_FAILED)
