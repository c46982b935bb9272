"""The `grade` command line (thin Click commands over the library): :func:`harness.cli.main.main`; the console
script and `python -m harness` enter through :func:`harness.launch.main`."""

from harness.cli.main import main

__all__ = ["main"]
