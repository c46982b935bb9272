"""What every command shares: a library error as one `grade: error: ...` line with its exit code, and the
colours of status words (one table: :mod:`harness.reports.style`)."""

from __future__ import annotations

import os
import re
import sys

import click

from harness.core.errors import GraderError
from harness.reports.style import COLOUR, MARK

_WORDS = {**{m: COLOUR[s] for s, m in MARK.items()}, **{s.upper(): c for s, c in COLOUR.items()},
          "diagnosis:": "magenta", "hint:": "cyan"}
_FIRST_WORD = re.compile(r"(?<!\S)(" + "|".join(re.escape(w) for w in sorted(_WORDS, key=len, reverse=True))
                         + r")(?!\S)")


class GraderClickError(click.ClickException):
    """A library error as a one-line CLI message with the documented exit code."""

    def __init__(self, error: GraderError):
        super().__init__(error.message + (f" (fix: {error.hint})" if getattr(error, "hint", "") else ""))
        self.exit_code = error.exit_code

    def show(self, file=None):
        click.echo(f"grade: error: {self.format_message()}", err=True)


def fail(error: GraderError):
    raise GraderClickError(error) from None


def style(line: str) -> str:
    """Colour the first status word of a line (click drops colours when not on a terminal)."""
    m = _FIRST_WORD.search(line)
    if not m:
        return line
    word = m.group(1)
    return line[:m.start()] + click.style(word, fg=_WORDS[word], bold=True) + line[m.end():]


def console():
    """Rich console; when not on a terminal (CI logs, pipes) wide enough that rows do not fold."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=200)


RUNTIME_HELP = ("Docker runtime: runc (Docker's default) or runsc (gVisor, a user-space kernel; "
                "env GRADER_DOCKER_RUNTIME; default runc).")


def runtime_option(func):
    """``--runtime runc|runsc`` (env GRADER_DOCKER_RUNTIME): the OCI runtime of docker sandbox containers. Set in
    the environment so every grading process this command starts (batch, service pools) uses it too."""
    from harness.sandbox.base import RUNTIME_ENV, RUNTIMES

    def remember(ctx, param, value):
        if value:
            import os

            os.environ[RUNTIME_ENV] = value
        return value

    return click.option("--runtime", "docker_runtime", type=click.Choice(RUNTIMES), default=None,
                        envvar=RUNTIME_ENV, expose_value=False, callback=remember, is_eager=True,
                        help=RUNTIME_HELP)(func)


def runtime_note() -> str:
    """", docker runtime runsc (gVisor)" when a runtime was chosen (--runtime / GRADER_DOCKER_RUNTIME), else ""."""
    import os

    from harness.sandbox.base import RUNTIME_ENV

    value = os.environ.get(RUNTIME_ENV)
    return f", docker runtime {value}{' (gVisor)' if value == 'runsc' else ''}" if value else ""


ENDS_PROCESS = "harness.ends_process"  # click's ctx.meta: this process ends right after the command (end_now)


def end_now(code: int) -> None:
    """End this process with ``code`` as the interpreter's own exit would, less its teardown of every module and
    object: the one-shot grade has NumPy, pytest and ~480 modules loaded, and that teardown took 60–90 ms of a
    0.45–0.55 s `grade mha FILE` (issue 27). First what the interpreter does before that teardown, in its order:
    non-daemon threads are joined (``threading._shutdown``, which also stops executors' threads), the ``atexit``
    handlers run (the worker's and its cgroup's cleanup, logging's flush, temporary folders' finalizers); then
    the standard streams are flushed and the process ends. Returns (and the caller exits the usual way) where
    this interpreter lacks either hook. Only for a process that is the command itself (:meth:`DefaultGroup.main`
    with the arguments from ``sys.argv``), never under a test runner's in-process call."""
    import atexit
    import threading

    shutdown, run_handlers = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_handlers is None or threading.current_thread() is not threading.main_thread():
        return
    shutdown()
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that left (`grade ... | head`), a stream already closed
            pass
    os._exit(code)
