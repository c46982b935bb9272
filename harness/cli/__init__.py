"""The `grade` command line (thin Click commands over the library): :func:`harness.cli.main.main`."""

from harness.cli.main import main

__all__ = ["main"]
