"""The one adapter between the service and the harness's internals.

Everything the service needs from the grader — grading a file, the report's renderers, the audience filter,
the exercise registry and stubs, the errors — is imported here and nowhere else in ``harness/service/``, so a
later move of those internals touches this file only.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import tempfile
from pathlib import Path

from harness.core.version import __version__ as HARNESS_VERSION  # noqa: F401
from harness.core.errors import GraderError, InfrastructureError, UsageError  # noqa: F401
from harness.core.report import Report  # the typed report the renderers take (light: the renderers load later)
from harness.core.exercises import TRACKS  # every track the grader knows; each exercise offers some of them
from harness.grading.process import GradingProcess, Runner, serve  # noqa: F401  (light: the engine loads later)

AUDIENCES = ("interviewer", "candidate")


def max_source_bytes() -> int:
    from harness.grading.submission import MAX_BYTES

    return MAX_BYTES


def size_limit_text() -> str:
    """The submission size limit as every message states it, e.g. "1 MB (1,000,000 bytes)"."""
    from harness.grading.submission import LIMIT_TEXT

    return LIMIT_TEXT


# -- exercises -------------------------------------------------------------------------------------------
def exercise_names() -> list[str]:
    from harness.core.exercises import all_exercises

    return list(all_exercises())


def exercise_list() -> str:
    from harness.core.exercises import exercise_list as f

    return f()


def did_you_mean(value: str, choices) -> str:
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else f"; choose one of: {', '.join(choices)}"


def get_exercise(name: str):
    """The exercise; UsageError with a "did you mean" when there is none by that name."""
    from harness.core.exercises import get_exercise as get

    return get(name)


def _signature(ex, track: str) -> str:
    t = ex.track(track)
    functions = ex.functions(track)
    if functions:  # several plain functions (the python track)
        return "; ".join(_call(name, f) for name, f in functions.items())
    if track == "numpy" or t.get("style") == "function":
        defaults = t.get("defaults", {})
        kwargs = [f"{k}={defaults.get(k)!r}" for k in t.get("kwargs", [])]
        return f"{t['entry']}({', '.join(t.get('args', []) + kwargs)})"
    init = ", ".join(t.get("init", []) + [f"{k}=True" for k in t.get("init_kwargs", [])])
    fwd = ", ".join(["self"] + t.get("forward", []) + [f"{k}=None" for k in t.get("forward_kwargs", [])])
    return f"class {t['entry']}(nn.Module): __init__(self, {init}); forward({fwd})"


def _call(name: str, spec: dict) -> str:
    defaults = spec.get("defaults", {})
    kwargs = [f"{k}={defaults.get(k)!r}" for k in spec.get("kwargs", [])]
    return f"{name}({', '.join(spec.get('args', []) + kwargs)})"


def exercise_summary(name: str) -> dict:
    ex = get_exercise(name)
    return {"name": ex.name, "title": ex.title, "summary": ex.summary,
            "tracks": {t: {"entry": ex.entry_label(t), "signature": _signature(ex, t)} for t in ex.track_names}}


def exercise_detail(name: str, *, staff: bool = False) -> dict:
    """The candidate's prompt; for staff (admin, interviewer) also the interviewer notes beside it (follow-up
    questions with answers, the mistake catalogue), which no candidate token ever receives."""
    ex = get_exercise(name)
    d = exercise_summary(name)
    d["prompt"] = ex.prompt_path().read_text(encoding="utf-8")
    notes = ex.prompt_path().with_name("interviewer.md")
    d["interviewer_notes"] = notes.read_text(encoding="utf-8") if staff and notes.is_file() else None
    return d


def stub_text(name: str, track: str | None = None) -> str:
    """The stub of one of the exercise's tracks (default: its first); UsageError for a track it does not offer."""
    ex = get_exercise(name)
    track = ex.check_track(track or ex.default_track)
    return ex.stub_path(track).read_text(encoding="utf-8")


def unchanged_stub(name: str, source: str) -> str | None:
    """The track whose stub ``source`` is, unchanged (whitespace aside), or None."""
    ex = get_exercise(name)
    norm = lambda t: "\n".join(ln.rstrip() for ln in t.strip().splitlines())  # noqa: E731
    for track in ex.track_names:
        if norm(source) == norm(ex.stub_path(track).read_text(encoding="utf-8")):
            return track
    return None


def default_track(name: str) -> str:
    return get_exercise(name).default_track


def check_exercise_track(name: str, track: str) -> str:
    """``track`` (not auto) is one the exercise offers; UsageError with the ones it does otherwise."""
    return get_exercise(name).check_track(track)


def check_track(track: str, allow_auto: bool = False) -> str:
    choices = (("auto",) if allow_auto else ()) + TRACKS
    if track not in choices:
        raise UsageError(f"unknown track {track!r}{did_you_mean(track, choices)}")
    return track


def detect_track(source: str, exercise: str) -> str:
    from harness.grading.submission import Submission, detect_track as detect

    return detect(Submission(Path("submission.py"), source, "", len(source)), get_exercise(exercise))


def vet_source(data: bytes) -> str:
    """The submission's text, or UsageError for what `grade` refuses too (binary, not UTF-8, too large) and for
    an empty file (nothing to grade)."""
    from gradekit.check import decode_source   # the candidate kit's check refuses the same files
    from gradekit.exercises import KitUsageError

    limit = max_source_bytes()
    try:
        text = decode_source(data, limit)
    except KitUsageError as exc:
        raise UsageError(str(exc), **({"status": 413} if len(data) > limit else {})) from None
    if not text.strip():
        raise UsageError("the submission is empty: send the .py file with your implementation")
    return text


# -- grading (called in a grading process, never in the API process) -----------------------------------
SERVICE_PARENT_ENV = "GRADER_SERVICE_PARENT"   # a grading process's server, which it dies with
SERVICE_WORKER = "harness.service.queue.worker"


def grading_process(cwd: Path) -> GradingProcess:
    """A grading process of the service (its task: harness.grading.process.grade_task's, with ``label``,
    ``keep_artifacts`` and ``warm``; the plot arrays travel in the answer as ``npz_b64``)."""
    return GradingProcess(SERVICE_WORKER, parent_var=SERVICE_PARENT_ENV, cwd=cwd)


def serve_grading() -> int:
    """The loop of a grading process of the service (queue/worker.py)."""
    return serve(SERVICE_PARENT_ENV)


def sweep_leftovers(work_dir: Path) -> list[str]:
    """At start: remove what graders killed outright left behind (their submission copies in ``work_dir``, the
    sandboxes' scratch folders and exchange files), by owner and pid (harness/core/leftovers.py)."""
    from harness.core.leftovers import sweep_scratch, sweep_work

    return sweep_work(work_dir) + sweep_scratch()


# -- reports and renderers -------------------------------------------------------------------------------
def load_report(report_json: str) -> Report:
    """A stored report (the store's ``report_json``, as graded) as the typed report every renderer takes."""
    return Report.from_dict(json.loads(report_json))


def for_audience(report: Report, audience: str) -> Report:
    from harness.core.audience import for_audience as f

    return f(report, audience)


def summary_lines(report: Report, audience: str = "interviewer") -> list[str]:
    """The terminal summary `grade run` prints."""
    from harness.reports.terminal import render_summary

    return render_summary(report, audience=audience)


def report_html(report: Report, *, audience: str, source: str | None, npz: bytes | None) -> str:
    """The self-contained HTML report (plots from the stored .npz, the source from the store)."""
    from harness.reports.html import render_html

    with tempfile.TemporaryDirectory(prefix="grader-html-") as tmp:
        report_path = Path(tmp) / "report.json"
        source_path = None
        if npz is not None and report.sidecar:
            (Path(tmp) / Path(report.sidecar["file"]).name).write_bytes(npz)
        if source is not None:
            source_path = Path(tmp) / "submission.py"
            source_path.write_bytes(source.encode("utf-8"))
        return render_html(report, audience=audience, report_path=report_path, source_path=source_path)


def compare_html(named_reports: list[tuple[str, Report]]) -> str:
    import dataclasses

    from harness.reports.compare import render_html

    # the compare table names rows by submission path
    return render_html([(Path(name), dataclasses.replace(r, submission={**r.submission, "path": name}))
                        for name, r in named_reports])


def compare_script_hashes() -> list[str]:
    """CSP hashes ('sha256-...') of the inline scripts the compare page carries."""
    from harness.reports import compare

    js = getattr(compare, "_SORT_JS", "")
    return [base64.b64encode(hashlib.sha256(js.encode()).digest()).decode()] if js else []


def junit_xml(named_reports: list[tuple[str, Report]]) -> str:
    from harness.reports.junit import to_xml

    return to_xml(named_reports, name="grade serve export")


def gradescope_results(report: Report) -> dict:
    from harness.reports.gradescope import results_json

    return results_json(report)


def failure_groups(tests: list) -> list[list]:
    """Failing tests (``TestResult``) grouped by identical status, message and diagnostics (one crash shown once)."""
    from harness.reports.summary import failure_groups as f

    return f(tests)


def category_scores(report: Report) -> list[dict]:
    from harness.reports.summary import category_scores as c

    return c(report)


def sandbox_status(sandbox: str) -> tuple[bool, str]:
    """Can grading run with this sandbox setting? (ok, detail). Cheap: no container is started."""
    if sandbox == "local":
        return True, "local process sandbox"
    try:
        from harness.sandbox import get_sandbox

        box = get_sandbox(sandbox, notice=lambda m: None)
        return True, f"{box.name} sandbox"
    except GraderError as exc:
        return False, exc.message
    except Exception as exc:  # pragma: no cover
        return False, f"{type(exc).__name__}: {exc}"
