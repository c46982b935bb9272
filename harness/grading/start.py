"""A grade's start: the exercise, the submission as read once, the track, the limits, the sandbox, and its worker
started (its interpreter and imports, torch's included, overlap everything the host does next).

:func:`prepare` is the first step of every grade (harness/grading/engine.py). :func:`start_early` is the one-shot
CLI's: `grade EXERCISE FILE`, run as its own process, reads its command line before it imports click or parses it
(harness/launch.py) and starts the worker then, ~35 ms sooner. That is the critical path of a torch grade
(the host waits for the worker's `import torch`) and of a docker one (the container's start). The grade then
adopts that start only if it asks for exactly what the early start assumed; anything else closes it.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.core.exercises import Exercise, check_track, get_exercise
from harness.grading.submission import Submission, detect_track, load_submission
from harness.sandbox import Limits, Sandbox, get_sandbox

if TYPE_CHECKING:
    from harness.session.channel import WorkerSession


@dataclasses.dataclass
class Prepared:
    ex: Exercise
    sub: Submission
    track: str
    lim: Limits
    box: Sandbox
    session: "WorkerSession"
    t0: float   # time.monotonic() when the grade started (the report's total_s counts from it)


def prepare(*, exercise: str, submission: str | os.PathLike, track: str, sandbox: str | Sandbox,
            limits: Limits | dict | None, notice: Callable[[str], None] | None, warm: bool,
            ends_process: bool) -> Prepared:
    """The grade's inputs checked and its worker started (not waited for). Raises UsageError for unusable input,
    InfrastructureError when the sandbox cannot start."""
    t0 = time.monotonic()
    ex = get_exercise(exercise)
    sub = load_submission(submission)
    if track == "auto":
        track = detect_track(sub, ex)
    check_track(track, ex)
    lim = Limits().replace(**ex.limits)
    if isinstance(limits, Limits):
        lim = limits
    elif limits:
        lim = lim.replace(**limits)
    if ex.limits.get("metered_memory") and not lim.metered_memory:   # the exercise's memory test needs it
        lim = lim.replace(metered_memory=True)
    if isinstance(sandbox, Sandbox):
        box = sandbox
    elif warm:
        from harness.session.warm import shared_pool

        box = shared_pool(sandbox, notice=notice)
    else:
        # one grade: docker's check overlaps its start
        box = get_sandbox(sandbox, notice=notice, check_at_start=True, hand_off_end=ends_process)

    from harness.session.channel import WorkerSession

    session = WorkerSession(box, track=track, entry=ex.entry(track), submission=sub.path.resolve(), limits=lim)
    session.start()  # the worker's imports (torch!) overlap everything after this
    return Prepared(ex, sub, track, lim, box, session, t0)


# -- the one-shot CLI's early start ------------------------------------------------------------------------------
_EARLY: dict = {}   # "key": what the early start assumed, "prepared": its Prepared, "notices": what it would have said


def _key(exercise: str, submission: str | os.PathLike, track: str, sandbox: str, limits: dict | None) -> tuple:
    """What a grade asks for, spelled one way: the file as click hands it over (a Path: `./my.py` is `my.py`)."""
    lim = tuple(sorted((k, v) for k, v in (limits or {}).items() if v is not None))
    return exercise, os.fspath(Path(submission)), track, sandbox, lim, os.getcwd()


def start_early(*, exercise: str, submission: str, track: str, sandbox: str, limits: dict) -> bool:
    """Start a one-shot grade's worker now, for a grade that this process runs next with exactly these arguments
    (and ``ends_process``). Anything unusual (unusable input, a sandbox that cannot start, an exception of any
    kind) leaves nothing started and says nothing: the grade itself then meets it and reports it. What the start
    would have said (``--sandbox auto``'s fallback note) is kept and said when the grade adopts it, and so are
    the warnings it raised, under the filters the grade itself sets (engine.grade: recorded in the report, never
    an exception, whatever the environment's filters). Returns whether a worker was started."""
    notices: list[str] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("default")
        try:
            prepared = prepare(exercise=exercise, submission=submission, track=track, sandbox=sandbox,
                               limits=limits, notice=notices.append, warm=False, ends_process=True)
        except Exception:
            return False
    _EARLY.update(key=_key(exercise, submission, track, sandbox, limits), prepared=prepared, notices=notices,
                  warnings=list(seen))
    atexit.register(_close_unadopted)   # a command line that then fails to parse (exit 2) leaves no worker behind
    return True


def adopt(*, exercise: str, submission: str | os.PathLike, track: str, sandbox: str | Sandbox,
          limits: Limits | dict | None, notice: Callable[[str], None] | None) -> Prepared | None:
    """The early start, if there was one and it assumed exactly these arguments (its notes are said now); else
    None, and an early start that does not fit is closed."""
    prepared = _EARLY.pop("prepared", None)
    if prepared is None:
        return None
    key, notices, seen = _EARLY.pop("key"), _EARLY.pop("notices"), _EARLY.pop("warnings")
    fits = isinstance(sandbox, str) and (limits is None or isinstance(limits, dict)) and \
        key == _key(exercise, submission, track, sandbox, limits)
    if not fits:
        prepared.session.close()
        return None
    for message in notices:
        if notice:
            notice(message)
    for w in seen:   # raised again where the grade records its host's warnings
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return prepared


def _close_unadopted() -> None:
    prepared = _EARLY.pop("prepared", None)
    _EARLY.clear()
    if prepared is not None:
        prepared.session.close()
