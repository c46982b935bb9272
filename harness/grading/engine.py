"""The library entry point: ``grade(*, exercise, submission, ...)`` -> :class:`Report`. Never raises for a bad
submission (that is a report); raises :class:`UsageError` for unusable input and :class:`InfrastructureError`
when the grader itself cannot run."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import warnings
from typing import TYPE_CHECKING, Callable

from harness.core import answers, blas
from harness.core.version import __version__
from harness.core.errors import GraderError, InfrastructureError, UsageError
from harness.core.exercises import Exercise, get_exercise
from harness.core.text import clean_text
from harness.grading.submission import banned_api_uses, detect_track, load_submission
from harness.grading.start import adopt, prepare
from harness.sandbox import Limits, Sandbox

if TYPE_CHECKING:  # imported at run time only where used: the worker starts before the host imports NumPy (and
    # the report's module, ~2 ms of a one-shot's start: harness/core/report.py)
    from harness.core.report import Report, TestResult
    from harness.grading.plugin import GraderPlugin
    from harness.session.channel import WorkerSession


def grade(*, exercise: str, submission: str | os.PathLike, track: str = "auto", sandbox: str | Sandbox = "auto",
          seed: int = 0, limits: Limits | dict | None = None, notice: Callable[[str], None] | None = None,
          diagnose: bool = True, keep_artifacts: bool = False,
          progress: Callable[[int, int, str | None], None] | None = None, warm: bool = False,
          ends_process: bool = False, answers_on_disk: bool = True, keep_answers: bool = True,
          close_later: list | None = None) -> Report:
    """``sandbox``: auto|local|docker, or a :class:`Sandbox` object, e.g. a
    :class:`harness.session.warm.WarmPool` that a service keeps for all its submissions.

    ``warm``: take the worker from this process's warm pool for ``sandbox`` (:func:`harness.session.warm.
    shared_pool`): a worker forked from a zygote that has already imported torch (local) or a container started
    ahead of time (docker); single-use either way. Isolation is the same as a cold start (SECURITY.md).

    ``keep_artifacts``: also keep, as ``report.artifacts`` (not part of the JSON), the arrays of a few failing
    forward tests (case, candidate output, reference; size-capped) for the HTML report's plots.

    ``ends_process``: this process ends right after the grade (the `grade` CLI's one-shot run): a Docker
    container's kill and removal are handed to a detached ``docker rm -f`` instead of waited for.

    ``answers_on_disk``: the oracle's answers may be kept on disk between processes (where the worker cannot see
    them: harness/core/answers.py). The service passes False: it draws a fresh seed for every submission, so an
    answer of one grade is never asked for again (they were ~30 files written a grade, never read).
    ``keep_answers``: the oracle's answers may be kept at all, in this process's memo too (and so keyed by a digest
    of each case). The service passes False for the same reason: hashing a grade's ~20-26 cases (1-3 ms of CPU)
    only filled the memo with answers no later grade asks for.

    ``close_later``: a grade that reaches its report appends the worker's close to this list instead of running it
    (a grading process runs it once its answer is written: the answer does not wait for the worker's death; a
    warm grade returns 3–6 ms sooner); a grade whose suite or diagnosis raises closes the worker itself before it
    raises, as without it (what raises after that, building the report, leaves the close in the list).

    ``progress``: called as ``progress(index, total, test_id)`` when each test starts, then ``(total, total, None)``
    when the suite is over (see harness/grading/progress.py).

    Runs under the host's own warning filters, whatever the environment sets (PYTHONWARNINGS=error, -W ...): a
    warning raised while grading is recorded in ``environment.host_warnings``, never an exception. Any exception
    that is not one of the library's own is a fault of the grader: it becomes an :class:`InfrastructureError`."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        try:
            with blas.one_thread():   # the host's small products, without OpenBLAS's spinning threads
                report = _grade(exercise=exercise, submission=submission, track=track, sandbox=sandbox, seed=seed,
                                limits=limits, notice=notice, diagnose=diagnose, keep_artifacts=keep_artifacts,
                                progress=progress, warm=warm, ends_process=ends_process,
                                answers_on_disk=answers_on_disk, keep_answers=keep_answers, close_later=close_later)
        except GraderError:
            raise
        except Exception as exc:
            raise InfrastructureError(f"internal grader error: {type(exc).__name__}: {clean_text(str(exc), 300)}",
                                      ) from exc
    host_warnings = sorted({clean_text(f"{w.category.__name__}: {w.message}", 200) for w in seen})[:5]
    if host_warnings:
        report.environment["host_warnings"] = host_warnings
    return report


def _grade(*, exercise: str, submission: str | os.PathLike, track: str, sandbox: str | Sandbox, seed: int,
           limits: Limits | dict | None, notice: Callable[[str], None] | None, diagnose: bool,
           keep_artifacts: bool, progress: Callable[[int, int, str | None], None] | None, warm: bool,
           ends_process: bool, answers_on_disk: bool, keep_answers: bool, close_later: list | None) -> Report:
    prepared = adopt(exercise=exercise, submission=submission, track=track, sandbox=sandbox, limits=limits,
                     notice=notice) if ends_process and not warm else None
    if prepared is None:
        prepared = prepare(exercise=exercise, submission=submission, track=track, sandbox=sandbox, limits=limits,
                           notice=notice, warm=warm, ends_process=ends_process)
    ex, sub, track, lim = prepared.ex, prepared.sub, prepared.track, prepared.lim
    box, session, t0 = prepared.box, prepared.session, prepared.t0   # the worker is starting
    from harness.core.report import Diagnosis, Report

    graded = False
    try:
        t_started = time.monotonic()
        with answers.use_disk(answers_on_disk and _host_hidden(box)), answers.use_memo(keep_answers):
            results, observations, plugin = _run_suite(ex, track, session, seed, progress)
        t_suite = time.monotonic()
        diagnosis = []
        failing = [r for r in results if r.status != "passed"]
        if diagnose and failing and session.ready_error is None:
            from graders.mutants.diagnose import diagnose as run_diagnosis

            diagnosis = run_diagnosis(ex.name, track, observations, results)
        artifacts = None
        if keep_artifacts:
            from harness.grading.artifacts import collect

            artifacts = collect(observations, results)
        banned = _banned_api_result(track, sub.text, session.tripwires, any(r.status == "passed" for r in results))
        if banned is not None:
            results.append(banned)
        graded = True
    finally:
        if graded and close_later is not None:
            close_later.append(session.close)
        else:
            session.close()
    _fit_budget(results)
    t_end = time.monotonic()
    verdict = "passed"
    if any(r.status != "passed" for r in results) or not results:
        verdict = "error" if (session.ready_error is not None or not results) else "failed"
    env = {"sandbox": box.name, "python": platform.python_version(), "numpy": _version("numpy"),
           "torch": _version("torch") if track == "torch" else None, "harness": __version__, "seed": seed,
           "limits": lim.to_dict(), "worker_starts": session.starts, **box.describe()}
    if session.worker_versions:
        env["worker"] = session.worker_versions
    if session.readback_log:  # who read the arguments back for the mutation check: the host, or the worker's word
        env["input_readback"] = dict(session.readback_log)
    if plugin.collection_errors:
        env["collection_errors"] = plugin.collection_errors[:3]
    report = Report(exercise=ex.name, track=track, verdict=verdict,
                    score=round(sum(r.points for r in results), 4),
                    max_score=round(sum(r.max_points for r in results), 4),
                    tests=results, diagnosis=[d if isinstance(d, Diagnosis) else Diagnosis(**d) for d in diagnosis],
                    environment=env, submission=sub.to_dict(),
                    timings={"total_s": round(t_end - t0, 3), "suite_s": round(t_suite - t_started, 3),
                             "diagnosis_s": round(t_end - t_suite, 3), "candidate_calls_s": round(session.calls_s, 3)},
                    artifacts=artifacts)
    return report


def _host_hidden(box: Sandbox) -> bool:
    """Whether the worker cannot see the host's files (Docker; the local sandbox with its mount namespace): only
    then are the oracle's answers kept on disk between grades (harness/core/answers.py)."""
    info = box.describe()
    return info.get("sandbox") == "docker" or info.get("read_only_fs") is True


REPORT_TEXT_BUDGET = 160_000  # bytes of JSON for all tests together; the whole report stays well under 256 KB


def _fit_budget(results) -> None:
    """Bound the report's size whatever the candidate's text: each field is already truncated, but a message of
    astral-plane characters costs 12 bytes per character in ASCII JSON, repeated over every test. Past the budget,
    every test but the first keeps shorter messages and diagnostics (halving until it fits)."""
    import json

    from harness.core.text import clean_text

    def size() -> int:
        return len(json.dumps([r.to_dict() for r in results], default=str))

    def shrink(value: object, n: int) -> object:
        if isinstance(value, str):
            return clean_text(value, n, keep_newlines="\n" in value)
        if isinstance(value, dict):
            return {k: shrink(v, n) for k, v in list(value.items())[:20]}
        if isinstance(value, (list, tuple)):
            return [shrink(v, n) for v in list(value)[:10]]
        return value

    limit = 800
    fits = size() <= REPORT_TEXT_BUDGET   # measured once when it fits, as nearly every report does
    while limit >= 25 and not fits:
        for r in results[1:]:
            r.message = clean_text(r.message, limit)
            r.diagnostics = shrink(r.diagnostics, limit)
        limit //= 2
        fits = size() <= REPORT_TEXT_BUDGET
    if not fits:  # still too big (absurd test counts): keep ids and statuses only
        for r in results:
            r.message, r.diagnostics = clean_text(r.message, 100), {}


def _version(module: str) -> str | None:
    mod = sys.modules.get(module)
    if mod is None:
        try:
            from importlib.metadata import version

            return version(module)
        except Exception:
            return None
    return getattr(mod, "__version__", None)


# Ways to reach attention code that the worker's tripwire does not see (or that switch it off): a mention of a
# banned API next to one of these cannot be ruled out by a silent tripwire.
TRIPWIRE_BYPASSES = ("torch.ops", "torch._C", "_C._nn", "TRIPWIRES", "__wrapped__", "importlib.reload")


def _banned_api_result(track: str, text: str, tripwires: set[str], anything_passed: bool) -> TestResult | None:
    """The banned-API structure test (torch track): a runtime tripwire in the worker plus a static scan here.

    It fails when a banned call happened (the tripwire fired) or cannot be ruled out (the file mentions one and
    could bypass the tripwire). A mention the tripwire never saw called — an unused branch, dead code — is a note
    for the interviewer, not a failure. It earns its point only alongside real work: with nothing else passing (a
    stub) it is not assessed."""
    from harness.core.report import TestResult

    if track != "torch":
        return None
    static = banned_api_uses(text)
    fired = sorted(tripwires)
    bypass = sorted(b for b in TRIPWIRE_BYPASSES if b in text) if static else []
    diagnostics = {"static_scan": static, "runtime_tripwire": fired}
    if fired:
        status = "failed"
        message = ("calls a built-in attention API, which this exercise asks you to implement yourself: "
                   + ", ".join(fired) + " (called while grading: the runtime tripwire fired)")
    elif static and (bypass or not anything_passed):
        status = "failed"
        reason = (f"the file also uses {', '.join(bypass)}, which could call it unseen" if bypass
                  else "none of the other tests ran the module far enough to rule it out")
        message = ("mentions a built-in attention API that this exercise asks you to implement yourself: "
                   f"{', '.join(static)}; the tripwire stayed silent, but a call cannot be ruled out: {reason}")
        diagnostics["cannot_rule_out"] = bypass or ["nothing passed"]
    elif anything_passed:
        status, message = "passed", ""
        if static:
            message = ("not charged: the file mentions " + ", ".join(static) + ", but it was never called while "
                       "grading (the runtime tripwire stayed silent): an unused branch or dead code")
            diagnostics["interviewer_note"] = message
    else:
        status, message = "skipped", "not assessed: none of the other tests passed"
    return TestResult(id="test_no_builtin_attention", category="structure", status=status,
                      points=1.0 if status == "passed" else 0.0, max_points=1.0, visibility="visible",
                      message=message, diagnostics=diagnostics,
                      description="does not call F.scaled_dot_product_attention / nn.MultiheadAttention")


def _run_suite(ex: Exercise, track: str, session: WorkerSession, seed: int,
               progress: Callable[[int, int, str | None], None] | None = None
               ) -> tuple[list[TestResult], list, GraderPlugin]:
    import pytest

    from harness.grading import kept_suites
    from harness.grading.plugin import GraderPlugin
    from harness.session.candidate import Candidate

    candidate = Candidate(session, ex, track)
    suite = ex.suite_dir
    if not suite.is_dir():
        raise UsageError(f"exercise {ex.name!r} has no hidden suite at {suite}")
    off = ("cacheprovider", "terminal", "stepwise", "warnings", "unraisableexception", "threadexception",
           "doctest", "junitxml", "pastebin", "legacypath", "debugging", "faulthandler", "logging", "setuponly",
           "setupplan", "nose", "tmpdir", "monkeypatch", "recwarn", "capture", "unittest", "subtests")
    args = [str(suite), *[a for name in off for a in ("-p", f"no:{name}")], "--assert=plain",
            "--import-mode=importlib", "--rootdir", str(suite), "-c", str(suite.parent / "suite.ini"),
            "-o", "python_files=test_*.py"]
    saved = {k: os.environ.pop(k, None) for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        with contextlib.redirect_stdout(sys.stderr if os.environ.get("GRADER_DEBUG") else _Null()):
            if kept_suites.enabled() and progress is None:   # a grading process: collected once, run again
                code, plugin = kept_suites.run(
                    kept_suites.key_for(suite, ex.name, track), args,
                    lambda: GraderPlugin(candidate=candidate, exercise=ex, track=track, seed=seed),
                    lambda p: p.rebind(candidate=candidate, exercise=ex, seed=seed))
            else:
                plugin = GraderPlugin(candidate=candidate, exercise=ex, track=track, seed=seed)
                code = pytest.main(args, plugins=[plugin, *_progress_plugin(progress)])
    finally:
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v
        if autoload is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR) or plugin.collection_errors:
        detail = "; ".join(plugin.collection_errors)[:500] or f"pytest exit code {int(code)}"
        raise InfrastructureError(f"the hidden suite for {ex.name!r} could not run: {detail}")
    if plugin.infra_faults:
        raise InfrastructureError(f"the hidden suite for {ex.name!r} failed on the grader's side (no test is charged "
                                  f"to the submission): {plugin.infra_faults[0]}", faults=plugin.infra_faults)
    return plugin.ordered_results(), plugin.observations, plugin


def _progress_plugin(progress) -> list:
    if progress is None:
        return []
    from harness.grading.progress import SuiteProgress

    return [SuiteProgress(progress)]


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


def warm_pays(sandbox: str) -> bool:
    """Whether warm workers raise a batch's throughput with this sandbox: yes in the local one (a fork of a
    process that has imported torch); not in docker, where every single-use container imports torch whether it
    is started ahead of time or not (measured: ~0.8x the cold throughput on a busy 2-core machine)."""
    if sandbox == "docker":
        return False
    if sandbox == "auto":
        from harness.sandbox.docker import DockerSandbox

        return not DockerSandbox.available()
    return True


def shared_zygotes(*, exercise: str, paths, track: str, sandbox: str):
    """For `grade batch`: the zygotes its grading processes share (harness/session/warm.py SharedZygotes), one
    per track the submissions use (detected on the host, as grade() does), when the batch grades with warm
    workers in the local sandbox; None otherwise (docker, no namespace isolation, nothing to grade)."""
    from harness.sandbox.local import mount_isolation

    if sandbox == "docker" or not mount_isolation():
        return None
    if sandbox == "auto":
        from harness.sandbox.docker import DockerSandbox

        if DockerSandbox.available():
            return None
    tracks = set()
    if track != "auto":
        tracks.add(track)
    else:
        ex = get_exercise(exercise)
        for path in paths:
            try:
                tracks.add(detect_track(load_submission(path), ex))
            except GraderError:
                continue
    if not tracks:
        return None
    from harness.session.warm import SharedZygotes

    return SharedZygotes(tracks)
