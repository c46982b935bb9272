"""The batch's report files: finding a current one (resume), writing one atomically for each graded (or
ungradable) submission, removing those of older versions of the same path."""

from __future__ import annotations

import json
import platform
import re

from harness import __version__
from harness.batch.plan import BatchOptions, Item
from harness.core.errors import GraderError
from harness.core.exercises import TRACKS, get_exercise
from harness.core.report import Report, is_infrastructure, load_valid_report, write_atomic
from harness.core.text import clean_text


def existing_report(item: Item) -> dict | None:
    """A finished report for exactly this submission version, exercise, track and harness, or None."""
    data = load_valid_report(item.report_path)
    if data is None:
        return None
    if (data["environment"].get("batch", {}).get("key") != item.key
            or data.get("submission", {}).get("sha256") != item.sha256):
        return None
    if is_infrastructure(data):
        return None  # not the submission's verdict: grade it again
    return data


def outcome_of(data: dict) -> str:
    return "infrastructure" if is_infrastructure(data) else data.get("verdict", "error")


def _remove_stale(item: Item) -> None:
    """Reports of earlier versions of the same path (another sha256) go once this one is written."""
    pattern = re.compile(re.escape(item.slug) + r"\.([0-9a-f]{16})\.(json|npz)$")
    for f in item.report_path.parent.iterdir():
        m = pattern.fullmatch(f.name)
        if m and m.group(1) != item.sha256[:16]:
            try:
                f.unlink()
            except OSError:
                pass


def _default_track(exercise: str) -> str:
    """The exercise's first track (the report needs one), numpy for an exercise that does not exist."""
    try:
        return get_exercise(exercise).default_track
    except GraderError:
        return TRACKS[0]


def error_report(item: Item, opts: BatchOptions, kind: str, message: str, seconds: float) -> dict:
    """A schema-valid report for a submission the engine could not grade (kind: usage | infrastructure)."""
    track = item.key["track"] if item.key["track"] in TRACKS else (opts.track if opts.track in TRACKS else
                                                                  _default_track(item.key["exercise"]))
    try:
        import numpy

        np_version = numpy.__version__
    except ImportError:  # pragma: no cover
        np_version = "unknown"
    report = Report(exercise=item.key["exercise"], track=track, verdict="error", score=0, max_score=0, tests=[],
                    diagnosis=[],
                    environment={"sandbox": opts.sandbox if opts.sandbox in ("local", "docker") else "local",
                                 "sandbox_requested": opts.sandbox, "python": platform.python_version(),
                                 "numpy": np_version, "torch": None, "harness": __version__, "seed": opts.seed,
                                 "batch": {"error": {"kind": kind, "message": clean_text(message, 2000)}}},
                    submission={"sha256": item.sha256, "size": item.size, "path": item.label},
                    timings={"total_s": round(max(seconds, 0.0), 3)})
    return report.to_dict()


def finish_item(item: Item, opts: BatchOptions, result: dict, seconds: float) -> None:
    """Turn a grading process's answer into the report file (atomically) and the item's outcome."""
    if result.get("kind") == "report":
        data = result["report"]
    else:
        kind = "usage" if result.get("kind") == "usage" else "infrastructure"
        data = error_report(item, opts, kind, result.get("message", "grading failed"), seconds)
    batch = data["environment"].setdefault("batch", {})
    batch.update({"key": item.key, "path": item.label, "slug": item.slug})
    data["submission"]["path"] = item.label
    if "artifacts" not in data and item.npz_path.exists():
        item.npz_path.unlink()
    write_atomic(item.report_path, json.dumps(data, indent=2, allow_nan=False) + "\n")
    _remove_stale(item)
    item.report, item.outcome, item.seconds = data, outcome_of(data), seconds
