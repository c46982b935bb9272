"""One grading process, for the batch (harness/batch/) and the service (harness/service/queue/) alike.

The engine runs pytest in-process and sets process-wide warning filters, so a batch or a server grades in
long-lived processes of their own, never in their own process or its threads. The protocol, one JSON object a
line: the grading process says ``{"kind": "ready"}`` once its imports are done, then reads one task a line on
stdin and answers one line on stdout (:func:`grade_task`).

Parent side: :class:`GradingProcess` (one process and its pipes) and :class:`Runner` (keeps one, recycles it
after ``recycle_after`` tasks, replaces it when it dies or overruns and turns that into an infrastructure
answer). Child side: :func:`serve`, the loop that each side's module runs (``python -m harness.batch.child``,
``python -m harness.service.queue.worker``) with a handler of its own around :func:`grade_task`.

A grading process keeps each hidden suite configured and collected after its first grade (harness/grading/
kept_suites.py): a task pays for running the tests, not for pytest's start and the suite's collection.

A grading process dies with its parent: PR_SET_PDEATHSIG asks the kernel for SIGTERM when the parent goes
(even on kill -9), and SIGTERM unwinds the engine, whose ``finally`` kills the sandbox worker."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from harness.core.errors import GraderError, UsageError
from harness.core.process import TermWhileBusy, die_with_parent

READY = {"kind": "ready"}


# -- the parent's side ----------------------------------------------------------------------------------------
class GradingProcess:
    """One grading process (``python -m <module>``) and its pipes; driven by a single thread. Its parent's pid
    is in the environment variable ``parent_var`` (what :func:`serve` reads to die with it)."""

    def __init__(self, module: str, *, parent_var: str, env: dict | None = None, cwd: str | Path | None = None,
                 log: Path | None = None, pass_fds: tuple[int, ...] | list[int] = ()):
        env = dict(os.environ, **(env or {}), PYTHONUNBUFFERED="1", **{parent_var: str(os.getpid())})
        err = open(log, "ab") if log else subprocess.DEVNULL   # stray prints and tracebacks
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", module], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=str(cwd or os.getcwd()), pass_fds=tuple(pass_fds))
        finally:
            if log:
                err.close()
        self._buf = b""
        self.graded = 0
        self.closed = False   # its stdout reached EOF: it died (or is dying: the kernel closes the pipe first)

    def read(self, timeout: float, heartbeat: Callable[[], None] | None = None, every: float = 10.0) -> dict | None:
        """The next answer line; None when the process died, the line is not JSON or ``timeout`` passed.
        ``heartbeat()`` is called every ``every`` seconds while it waits."""
        deadline = time.monotonic() + timeout
        next_beat = time.monotonic() + every
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if heartbeat and time.monotonic() >= next_beat:
                    heartbeat()
                    next_beat = time.monotonic() + every
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    self.closed = True
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return None

    def ask(self, task: dict, timeout: float, heartbeat: Callable[[], None] | None = None,
            every: float = 10.0) -> dict | None:
        """Send one task; the answer, or None when the process died or ``timeout`` passed."""
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        answer = self.read(timeout, heartbeat, every)
        self.graded += 1
        return answer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """Close its stdin (it ends after the task at hand); SIGTERM after half a second (the engine unwinds and
        kills its sandbox worker), SIGKILL after ``grace``."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except OSError:
                pass


class Runner:
    """Grades a task in a grading process it keeps: started by ``start()`` when there is none, recycled after
    ``recycle_after`` tasks or once it holds more than ``recycle_rss_mb`` MiB (resident, as this process reads it
    in /proc), replaced when it dies or overruns (the task then gets an infrastructure answer)."""

    def __init__(self, start: Callable[[], GradingProcess], *, recycle_after: int, ready_timeout: float = 120.0,
                 recycle_rss_mb: float | None = None):
        self._start, self.recycle_after, self.ready_timeout = start, recycle_after, ready_timeout
        self.recycle_rss_mb = recycle_rss_mb
        self.proc: GradingProcess | None = None

    def _worn(self, proc: GradingProcess) -> bool:
        if proc.graded >= self.recycle_after:
            return True
        return self.recycle_rss_mb is not None and (resident_mb(proc.proc.pid) or 0.0) > self.recycle_rss_mb

    def _ensure(self) -> GradingProcess | None:
        if self.proc is None or not self.proc.alive() or self._worn(self.proc):
            if self.proc is not None:
                self.proc.stop()
            self.proc = self._start()
            ready = self.proc.read(self.ready_timeout)
            if not ready or ready.get("kind") != READY["kind"]:
                self.proc.stop()
                self.proc = None
        return self.proc

    def run(self, task: dict, timeout: float, heartbeat: Callable[[], None] | None = None,
            every: float = 10.0) -> dict:
        proc = self._ensure()
        if proc is None:
            return {"kind": "infrastructure", "message": "the grading process could not start"}
        answer = proc.ask(task, timeout, heartbeat, every)
        if answer is None:
            died = proc.closed or not proc.alive()
            proc.stop(grace=5.0)
            self.proc = None
            code = proc.proc.returncode
            return {"kind": "infrastructure",
                    "message": ("the grading process died" + (f" (exit code {code})" if code is not None else "")
                                if died else f"grading did not finish within {timeout:g} s")}
        return answer

    def close(self, grace: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop(grace)


def resident_mb(pid: int) -> float | None:
    """Process ``pid``'s resident memory in MiB (VmRSS), or None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


# -- the grading process's side -------------------------------------------------------------------------------
def grade_task(task: dict) -> dict:
    """Grade one submission in this process. ``task``: exercise, path, track, sandbox, seed; optional limits,
    keep_artifacts, warm, answers_on_disk, keep_answers, label (shown as the report's submission path) and npz_path
    (where the plot arrays go; without it they travel in the answer as ``npz_b64``). The answer is JSON-able:
    ``{"kind": "report", "report": dict, "notices": [...]}`` or ``{"kind": "usage"|"infrastructure", "message": str,
    "notices": [...]}``."""
    from harness.core import sidecar
    from harness.grading.engine import grade

    notices: list[str] = []
    try:
        report = grade(exercise=task["exercise"], submission=task["path"], track=task["track"],
                       sandbox=task["sandbox"], seed=task["seed"], limits=task.get("limits") or None,
                       notice=notices.append, keep_artifacts=task.get("keep_artifacts", False),
                       warm=task.get("warm", False), answers_on_disk=task.get("answers_on_disk", True),
                       keep_answers=task.get("keep_answers", True), close_later=_CLOSE_LATER)
    except UsageError as exc:
        return {"kind": "usage", "message": exc.message, "notices": notices}
    except GraderError as exc:
        hint = getattr(exc, "hint", "")
        return {"kind": "infrastructure", "message": exc.message + (f" (fix: {hint})" if hint else ""),
                "notices": notices}
    except Exception as exc:  # a grader bug is an infrastructure fault for this submission, never the candidate's
        return {"kind": "infrastructure", "message": f"internal error: {type(exc).__name__}: {exc}",
                "notices": notices}
    data = json.loads(report.to_json(indent=None))   # JSON's values, as a dict
    if task.get("label"):
        data["submission"]["path"] = task["label"]
    answer = {"kind": "report", "report": data, "notices": notices}
    if task.get("npz_path"):
        if report.artifacts:
            data["artifacts"] = sidecar.save(report.artifacts, task["npz_path"])
        return answer
    answer["npz_b64"] = None
    if report.artifacts:   # made in memory: no file to write, sync and read back
        import base64

        npz, data["artifacts"] = sidecar.encode(report.artifacts, "report.npz")
        answer["npz_b64"] = base64.b64encode(npz).decode()
    return answer


_CLOSE_LATER: list | None = None   # serve()'s: what grade_task leaves to run once its answer is written


def _run_later(later: list) -> None:
    """The closes a task left (its worker's), in order; a failing one is logged: its answer is already out."""
    while later:
        close = later.pop(0)
        try:
            close()
        except Exception as exc:  # the worker is dead or dying either way (its zygote or cgroup sweeps the rest)
            print(f"grading process: closing a worker after its answer failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)


def serve(parent_var: str, handle: Callable[[dict], dict] = grade_task) -> int:
    """The grading process's loop: die with the parent named in ``parent_var``, import the engine, say ready,
    then answer every task line with ``handle(task)``. Returns the exit code."""
    die_with_parent(signal.SIGTERM, parent=int(os.environ.get(parent_var, "0") or 0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle: it sends SIGTERM

    term = TermWhileBusy()   # grading or waiting for a task: unwinds and ends; closing: lets the close finish
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)                                  # stray prints go to stderr, never into the answers
    sys.stdout = sys.stderr
    global _CLOSE_LATER
    later = _CLOSE_LATER = []   # a task's worker is closed after its answer is written, before the next task
    try:
        import harness.grading.engine  # noqa: F401  (warm the imports before the first task)
        from harness.grading import kept_suites

        kept_suites.keep()   # each hidden suite is configured and collected once here, run for every task

        answers.write(json.dumps(READY) + "\n")
        answers.flush()
        while True:
            with term.waiting():
                line = sys.stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            try:
                with term.busy():
                    answer = handle(json.loads(line))
                answers.write(json.dumps(answer, allow_nan=False) + "\n")
                answers.flush()
            finally:
                _run_later(later)   # outside busy(): a SIGTERM now lets the close finish, then ends the loop
    except (KeyboardInterrupt, BrokenPipeError):
        return 143
    finally:
        _CLOSE_LATER = None
    return 0
