"""The `grade` command line. Each command is a short function over a library call.

Exit codes: 0 all passed; 1 graded and something failed; 2 bad usage or unusable input; 3 infrastructure fault.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .errors import GraderError, UsageError

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3


class GraderClickError(click.ClickException):
    """A library error as a one-line CLI message with the documented exit code."""

    def __init__(self, error: GraderError):
        super().__init__(error.message + (f" (fix: {error.hint})" if getattr(error, "hint", "") else ""))
        self.exit_code = error.exit_code

    def show(self, file=None):
        click.echo(f"grade: error: {self.format_message()}", err=True)


class DefaultGroup(click.Group):
    """`grade EXERCISE FILE` is short for `grade run EXERCISE FILE`. An exception that escapes a command is a
    fault of the grader: one line and exit 3, never exit 1 (which would read as a failed submission)."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except GraderError as exc:
            _fail(exc)
        except Exception as exc:
            from .errors import InfrastructureError

            _fail(InfrastructureError(f"internal grader error: {type(exc).__name__}: {exc}"))

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


_COLOURS = {"PASSED": "green", "FAILED": "red", "ERROR": "red", "PASS": "green", "FAIL": "red",
            "TIMEOUT": "yellow", "MEMORY": "yellow", "OUTPUT": "yellow", "diagnosis:": "magenta", "hint:": "cyan"}


def _style(line: str) -> str:
    """Colour the first status word of a summary line (click drops colours when not on a terminal)."""
    for word, colour in _COLOURS.items():
        if f" {word} " in f" {line} " :
            return line.replace(word, click.style(word, fg=colour, bold=True), 1)
    return line


def _fail(error: GraderError):
    raise GraderClickError(error)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attention-grader")
def main():
    """Grade attention implementations (MHA, masked MHA, cross-attention, GQA) in NumPy or PyTorch.

    \b
    grade list                       the exercises and their tracks
    grade start mha --track numpy    write the stub to start from
    grade mha my_mha.py              grade a file (short for `grade run`)
    """


@main.command("list")
def list_cmd():
    """List the exercises, their tracks and what each asks for."""
    from .exercises import TRACKS, all_exercises

    for ex in all_exercises().values():
        entries = ", ".join(f"{t}: {ex.entry(t)}" for t in TRACKS)
        click.echo(f"{ex.name:16} {ex.summary}")
        click.echo(f"{'':16} tracks: {entries}")


@main.command()
@click.argument("exercise")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--track", type=click.Choice(["numpy", "torch"]), default="numpy", show_default=True,
              help="Which track's stub to write.")
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def start(exercise, path, track, force):
    """Write the stub for EXERCISE to PATH (default: ./<exercise>_<track>.py)."""
    from .exercises import get_exercise

    try:
        ex = get_exercise(exercise)
    except GraderError as exc:
        _fail(exc)
    path = path or Path(f"{ex.name}_{track}.py")
    if path.exists() and not force:
        _fail(UsageError(f"{path} already exists; pass --force to overwrite it"))
    path.write_text(ex.stub_path(track).read_text())
    click.echo(f"wrote {path}: implement {ex.entry(track)}, then run: grade {ex.name} {path}")


@main.group()
def sandbox():
    """Build and check the Docker sandbox image."""


@sandbox.command("build")
@click.option("--base-image", help="Base image (default python:3.11-slim; air-gapped: a local image).")
@click.option("--wheels", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder of wheels (numpy, torch==2.13.0 and deps) to install offline.")
@click.option("--tag", help="Image tag (default attn-grader-sandbox:<harness version>).")
def sandbox_build(base_image, wheels, tag):
    """Build the sandbox image (Python, NumPy, CPU torch, the worker; no grader code)."""
    from .dockerimage import build_image

    try:
        built = build_image(base_image=base_image, wheels=wheels, tag=tag,
                            progress=lambda line: click.echo(line, err=True))
    except GraderError as exc:
        _fail(exc)
    click.echo(built)


@sandbox.command("doctor")
@click.option("--image", help="Image to check (default: the one --sandbox docker uses).")
def sandbox_doctor(image):
    """Check engine, image and limits; each line ok or a fix hint. Exit 1 if docker grading would fail."""
    from .dockerimage import doctor

    checks = doctor(image=image)
    for c in checks:
        click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        if not c.ok and c.hint:
            click.echo(f"     fix: {c.hint}")
    sys.exit(EXIT_PASSED if all(c.ok for c in checks) else EXIT_FAILED)


@main.command()
@click.argument("exercise")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--track", type=click.Choice(["auto", "numpy", "torch"]), default="auto", show_default=True,
              help="Track to grade; auto detects it from what the file defines.")
@click.option("--sandbox", type=click.Choice(["auto", "local", "docker"]), default="auto", show_default=True,
              envvar="GRADER_SANDBOX",
              help="Where the submission runs; auto uses docker when the engine and image are ready "
                   "(env: GRADER_SANDBOX).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON report here (plus a .npz of failing outputs for `grade report --html`).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random test inputs.")
@click.option("--timeout", type=float, default=None, help="Wall-clock seconds per call (default 20).")
@click.option("--memory-mb", type=int, default=None, help="Memory limit of the worker in MiB (default 2048).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the verdict line.")
def run(exercise, file, track, sandbox, json_path, seed, timeout, memory_mb, quiet):
    """Grade FILE against EXERCISE's hidden suite and print a summary."""
    from .engine import grade
    from .render import render_summary

    try:
        report = grade(exercise=exercise, submission=file, track=track, sandbox=sandbox, seed=seed,
                       limits={"call_timeout_s": timeout, "memory_mb": memory_mb},
                       notice=lambda msg: click.echo(msg, err=True), keep_artifacts=json_path is not None)
    except GraderError as exc:
        _fail(exc)
    if json_path:
        try:
            report.write(json_path)
        except GraderError as exc:
            _fail(exc)
    lines = render_summary(report)
    for line in lines[:1] if quiet else lines:
        click.echo(_style(line))
    sys.exit(EXIT_PASSED if report.verdict == "passed" else EXIT_FAILED)


# -- commands defined in other modules (registration only: issue 6, batch grading and reports) --------------
from .commands_batch import batch_cmd  # noqa: E402
from .commands_report import compare_cmd, report_cmd  # noqa: E402

main.add_command(batch_cmd)
main.add_command(report_cmd)
main.add_command(compare_cmd)

# -- the grading service (issue 11): grade serve / tokens / submit -----------------------------------------
from .service.commands import register as _register_service  # noqa: E402

_register_service(main)
