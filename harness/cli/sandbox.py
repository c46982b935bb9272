"""`grade sandbox build|doctor|status`: the Docker sandbox image."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from harness.cli.common import fail, runtime_option
from harness.core.errors import EXIT_FAILED, EXIT_PASSED, GraderError


@click.group(short_help="Build and check the Docker sandbox image.")
def sandbox():
    """Build and check the Docker sandbox image."""


@sandbox.command("build", short_help="Build the sandbox image (Python, NumPy, CPU torch).")
@click.option("--base-image", help="Base image (default python:3.11-slim; air-gapped: a local image).")
@click.option("--wheels", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Folder of wheels (numpy, torch==2.13.0 and deps) to install offline.")
@click.option("--tag", help="Image tag (default attn-grader-sandbox:<harness version>).")
def sandbox_build(base_image, wheels, tag):
    """Build the sandbox image (Python, NumPy, CPU torch, the worker; no grader code)."""
    from harness.sandbox.image import build_image

    try:
        built = build_image(base_image=base_image, wheels=wheels, tag=tag,
                            progress=lambda line: click.echo(line, err=True))
    except GraderError as exc:
        fail(exc)
    click.echo(built)


@sandbox.command("doctor", short_help="Check engine, runtime, image and limits, with fix hints.")
@click.option("--image", help="Image to check (default: the one --sandbox docker uses).")
@runtime_option
def sandbox_doctor(image):
    """Check engine, runtime, image and limits, and that the runtime asked for is the one in effect (the kernel a
    container sees); each line ok or a fix hint. Exit 1 if docker grading would fail."""
    from harness.sandbox.image import doctor

    try:
        checks = doctor(image=image)
    except GraderError as exc:
        fail(exc)
    for c in checks:
        click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
        if not c.ok and c.hint:
            click.echo(f"     fix: {c.hint}")
    _local_doctor()
    sys.exit(EXIT_PASSED if all(c.ok for c in checks) else EXIT_FAILED)


def _local_doctor() -> None:
    """The local backend's limits (information: they do not change the exit status, which is Docker's)."""
    from harness.sandbox.local import doctor_checks

    for c in doctor_checks():
        click.echo(f"{'ok  ' if c.ok else 'warn'} {c.name}: {c.detail}")
        if not c.ok and c.hint:
            click.echo(f"     fix: {c.hint}")


@sandbox.command("status", short_help="Exit 0 iff the sandbox image is present and current (quick).")
@click.option("--image", help="Image to check (default: the one --sandbox docker uses).")
@runtime_option
def sandbox_status(image):
    """Engine reachable, image present and built from this harness and worker: exit 0, else 1 (no container
    is started; `doctor` also checks the limits)."""
    from harness.sandbox.docker import probe

    checks = probe(image, timeout=3.0)
    for c in checks:
        click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}")
    sys.exit(EXIT_PASSED if checks and all(c.ok for c in checks) else EXIT_FAILED)
