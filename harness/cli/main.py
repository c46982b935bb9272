"""The `grade` command line: the group, the default command and the edge where errors become exit codes.
Each command is a short function over a library call, in a module of its own beside this one.

Exit codes (harness.core.errors): 0 all passed; 1 graded and something failed; 2 bad usage or unusable input;
3 infrastructure fault.
"""

from __future__ import annotations

import os
import sys

import click

from harness.cli.common import ENDS_PROCESS, end_now, fail
from harness.core.errors import GraderError, InfrastructureError
from harness.core import blas

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader closed the pipe


# Each command's module is imported only when that command runs (or help lists it): `grade mha FILE` must not
# pay for the service's imports (FastAPI, SQLAlchemy, HTTP clients) before it grades. name -> "module:attribute".
COMMANDS = {"list": "run:list_cmd", "start": "run:start", "run": "run:run", "sandbox": "sandbox:sandbox",
            "batch": "batch:batch_cmd", "report": "report:report_cmd", "compare": "report:compare_cmd",
            "serve": "service:serve_cmd", "tokens": "service:tokens_cmd", "submit": "kit:submit_cmd",
            "login": "kit:login_cmd", "check": "kit:check_cmd", "kit": "kit:kit_cmd", "worker": "service:worker_cmd",
            "reconcile": "service:reconcile_cmd", "rounds": "rounds:rounds_cmd", "review": "review:review_cmd"}
# Commands that end without the interpreter's teardown when this process is the command (harness.cli.common.end_now):
# the one-shot grade, whose whole run is a few tenths of a second.
END_NOW = {"run"}


class DefaultGroup(click.Group):
    """`grade EXERCISE FILE` is short for `grade run EXERCISE FILE`. An exception that escapes a command is a
    fault of the grader: one line and exit 3, never exit 1 (which would read as a failed submission).

    Commands load lazily (:data:`COMMANDS`); :attr:`commands` (click's public mapping) loads them all."""

    @property
    def commands(self) -> dict:
        for name in COMMANDS:
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: dict) -> None:
        self._loaded = dict(value)

    def _load(self, name: str):
        if name not in self._loaded and name in COMMANDS:
            import importlib

            module, attr = COMMANDS[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(f"harness.cli.{module}"), attr)
        return self._loaded.get(name)

    def get_command(self, ctx, cmd_name):
        return self._load(cmd_name)

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        self._ends = self._whole_process and name in END_NOW
        ctx.meta[ENDS_PROCESS] = self._ends  # the command knows it ends the process
        return name, command, rest

    def main(self, args=None, *rest, **extra):
        """Click's main; with ``args`` None (the console script, `python -m harness`: this process is the command)
        a command of :data:`END_NOW` ends through :func:`end_now` with the exit code it chose."""
        self._whole_process, self._ends = args is None, False
        try:
            return super().main(args, *rest, **extra)
        except SystemExit as exc:
            if self._ends and (exc.code is None or isinstance(exc.code, int)):
                end_now(exc.code or 0)
            raise

    def list_commands(self, ctx):
        return sorted(set(self._loaded) | set(COMMANDS))

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `grade ... | head`: the reader left; end quietly, as other Unix tools do
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_BROKEN_PIPE)
        except GraderError as exc:
            fail(exc)
        except Exception as exc:
            fail(InfrastructureError(f"internal grader error: {type(exc).__name__}: {exc}"))

    def format_help_text(self, ctx, formatter):
        from harness.core.exercises import exercise_list

        self.help = (self.help or "").replace("{exercises}", exercise_list())  # from the registry, never stale
        super().format_help_text(ctx, formatter)

    def parse_args(self, ctx, args):
        if args and args[0] not in COMMANDS and args[0] not in self._loaded and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="attention-grader")
def main():
    """Grade attention exercises in NumPy, PyTorch or plain Python. Exercises: {exercises}.

    \b
    grade list                       the exercises and their tracks
    grade start mha --track numpy    write the stub to start from
    grade mha my_mha.py              grade a file (short for `grade run`)

    \b
    Exit codes: 0 passed, 1 graded and failed, 2 bad usage, 3 infrastructure fault.
    `grade COMMAND --help` for each command's options.
    """
    blas.from_the_start()  # before anything imports NumPy: the host's BLAS threads would only take the worker's core

