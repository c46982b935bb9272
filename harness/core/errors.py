"""One exception hierarchy for the library; the CLI turns these into one-line messages and exit codes."""

from __future__ import annotations

# The exit codes of every command (`grade run`, `grade batch`, `grade submit`...), defined here once.
EXIT_PASSED = 0    # graded, every test passed
EXIT_FAILED = 1    # graded, something failed (a crash, hang or import error of the submission included)
EXIT_USAGE = 2     # bad usage or unusable input
EXIT_INFRA = 3     # the grader's own machinery failed: retry, never the candidate's verdict
EXIT_INTERRUPTED = 130


class GraderError(Exception):
    """Base of every error the harness raises on purpose."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str, **context):
        super().__init__(message)
        self.message = message
        self.context = context

    def __str__(self) -> str:
        return self.message


class UsageError(GraderError):
    """Bad command line or unusable input (missing file, binary file, unknown exercise...)."""

    exit_code = EXIT_USAGE


class SubmissionError(UsageError):
    """The submission file cannot be graded at all (missing, directory, binary, too large)."""


class UnknownExercise(UsageError):
    """No exercise by that name."""


class InfrastructureError(GraderError):
    """The grader's own machinery failed (sandbox could not start, image missing...)."""

    exit_code = EXIT_INFRA


class SandboxUnavailable(InfrastructureError):
    """The requested sandbox backend cannot run here; `hint` says how to fix it."""

    def __init__(self, message: str, hint: str = "", **context):
        super().__init__(message, hint=hint, **context)
        self.hint = hint


class WorkerFault(GraderError):
    """The worker died, timed out, ran out of memory or flooded its output during a call.

    `status` is one of timeout|memory|output_limit|error; `diagnostics` carries the evidence.
    """

    def __init__(self, status: str, message: str, diagnostics: dict | None = None):
        super().__init__(message)
        self.status = status
        self.diagnostics = diagnostics or {}


class CandidateException(GraderError):
    """The candidate's code raised an exception (reported back by the worker)."""

    def __init__(self, exc_type: str, message: str, traceback: str = "", phase: str = "call"):
        super().__init__(f"{exc_type}: {message}" if message else exc_type)
        self.exc_type = exc_type
        self.exc_message = message
        self.traceback = traceback
        self.phase = phase
