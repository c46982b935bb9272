"""The candidate's commands in the full package — `grade check`, `grade submit`, `grade login` — over the same
code the candidate kit runs (gradekit/), and `grade kit build`, which makes the kit."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.common import style
from harness.core.errors import EXIT_INFRA, EXIT_USAGE
from harness.core.exercises import TRACKS


def _run(call):
    """gradekit's errors as `grade: error:` lines with the exit codes of every command."""
    from gradekit.exercises import KitUsageError
    from gradekit.server import ServerUnreachable
    from gradekit.submit import ServiceFault

    try:
        return call()
    except KitUsageError as exc:
        click.echo(f"grade: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except (ServiceFault, ServerUnreachable) as exc:
        click.echo(f"grade: error: {exc}", err=True)
        sys.exit(EXIT_INFRA)


@click.group("kit", short_help="Build the candidate kit.")
def kit_cmd():
    """The candidate kit: prompts, stubs and public vectors, with `grade check` and `grade submit`."""


@kit_cmd.command("build")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the wheel and the zip.")
def kit_build(out):
    """Build the candidate kit (a wheel and a zip); prints their sizes and the kit's dependencies."""
    from harness.kit.build import build

    result = build(out)
    for key in ("wheel", "zip"):
        path = result[key]
        click.echo(f"{key:6} {path}  {path.stat().st_size / 1024:.0f} KB")
    click.echo("depends on: " + "; ".join(result["requirements"]))


@click.command("check", short_help="Run a file on the exercise's public test vectors.")
@click.argument("exercise")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--track", default="auto", show_default=True, help="auto|numpy|torch (auto: from what FILE defines).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds for all the vectors.")
def check_cmd(exercise, file, track, timeout):
    """Run FILE on EXERCISE's public vectors (as the candidate kit does): PASS or the mismatch per vector.
    Exit 0 all passed, 1 something failed, 2 bad usage. The hidden suite runs on `grade EXERCISE FILE`."""
    from gradekit.check import check
    from harness.core.exercises import EXERCISES_DIR
    from harness.kit.vectors import cached

    sys.exit(_run(lambda: check(exercise, file, exercises_dir=EXERCISES_DIR, vectors_for=cached, track=track,
                                timeout=timeout, echo=lambda line: click.echo(style(line)))))


@click.command("submit", short_help="Submit a file to a grading service.")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--exercise", required=True)
@click.option("--server", envvar="GRADER_SERVER",
              help="http://HOST:PORT or HOST:PORT (env GRADER_SERVER; default: what `grade login` saved).")
@click.option("--token", envvar="GRADER_TOKEN", help="Bearer token (env GRADER_TOKEN; default: `grade login`'s).")
@click.option("--track", type=click.Choice(("auto", *TRACKS)), default="auto", show_default=True)
@click.option("--candidate", help="Candidate name (interviewer tokens; a candidate token implies its own).")
@click.option("--seed", type=int, default=None)
@click.option("--wait/--no-wait", default=False, help="Wait for the report and print the summary.")
@click.option("--timeout", type=float, default=900.0, show_default=True, help="Seconds to wait at most.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the report.")
@click.option("--quiet", "-q", is_flag=True)
def submit_cmd(file, exercise, server, token, track, candidate, seed, wait, timeout, json_path, quiet):
    """Send FILE to a grading server and print the submission's page. With --wait: the summary `grade run`
    prints and its exit codes (0 passed, 1 failed, 2 bad input, 3 infrastructure)."""
    from gradekit.submit import submit
    from harness.core.report import Report
    from harness.reports.terminal import render_summary

    def render(data, json_written):
        report = Report.from_dict(data)  # the server's view of it: a candidate's is redacted
        audience = "candidate" if any(t.redacted for t in report.tests) else "interviewer"
        more = " (see the JSON report)" if json_written else " (see the submission's page)"
        return render_summary(report, audience=audience, more=more)

    sys.exit(_run(lambda: submit(file, exercise=exercise, server=server, token=token, track=track,
                                 candidate=candidate, seed=seed, wait=wait, timeout=timeout, json_path=json_path,
                                 quiet=quiet, echo=lambda line: click.echo(style(line)), render=render)))


@click.command("login", short_help="Save a token or an invitation link for `grade submit`.")
@click.argument("token_or_link")
@click.option("--server", envvar="GRADER_SERVER", help="http://HOST:PORT (env GRADER_SERVER); not needed with "
                                                       "an invitation link.")
def login_cmd(token_or_link, server):
    """Check TOKEN against the server (or exchange an invitation link for one) and save it, readable by you only,
    for `grade submit`."""
    from gradekit.server import login

    base, path = _run(lambda: login(token_or_link, server))
    click.echo(f"logged in to {base}; saved in {path}")
