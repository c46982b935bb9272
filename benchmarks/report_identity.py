"""No behaviour change: the JSON report of every reference and every catalogued mutant, recorded before a
refactor and compared after it, byte for byte once the timings are taken out.

    python benchmarks/report_identity.py record before.json      # on the old tree (PYTHONPATH=<old tree>)
    python benchmarks/report_identity.py record after.json       # on the new tree
    python benchmarks/report_identity.py compare before.json after.json

What is taken out (it differs from run to run of the same code): ``timings``, every ``duration_s``, the
submission's ``path`` (the tree or temporary folder it was graded from) and flash_attention's measured memory
(the figures, and the MiB numbers in its memory test's message). ``compare --mutant-source-changed``: a change to graders/common/oracle.py (which every NumPy mutant is
built from) changes the mutant files themselves; their sha256, size and traceback line numbers are then
left out of the comparison too. Everything else — verdicts, scores, statuses, messages, diagnostics,
diagnosis, environment — must be identical. Grades with the local sandbox, one submission at a time: every
exercise, every track it offers (a record made before an exercise existed lists it as "only in" the other).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOLATILE_KEYS = {"timings", "duration_s", "path",
                 "peak_bytes", "peak_over_bound", "peak_over_score_matrix",  # flash's measured memory (tracemalloc,
                 "held_bytes", "first_peak_bytes", "worker_peak_bytes"}        # the worker's cgroup)
MEASURED_MIB = re.compile(r"\d+\.\d MiB")


def _strip(value, key: str = ""):
    if isinstance(value, dict):
        return {k: _strip(v, k) for k, v in value.items()
                if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v, key) for v in value]
    if key == "message" and isinstance(value, str) and value.startswith("peak extra memory"):
        return MEASURED_MIB.sub("N MiB", value)  # flash's memory test names the figures it measured
    return value


def submissions(tmp: Path):
    """(name, exercise, track, path) of every reference and every applicable catalogued mutant."""
    sys.path.insert(0, str(ROOT))
    from graders.mutants.build import write_mutant
    from graders.mutants.catalog import applicable
    from harness.core.exercises import all_exercises

    for exercise, ex in all_exercises().items():
        for track in ex.track_names:
            yield f"reference/{exercise}/{track}", exercise, track, ex.reference_path(track)
            for bug in applicable(exercise, track):
                yield (f"mutant/{exercise}/{track}/{bug.id}", exercise, track,
                       write_mutant(tmp, exercise, track, {bug.id}))


def record(out: Path, only: str | None) -> int:
    from harness.grading.engine import grade

    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, exercise, track, path in submissions(Path(tmp)):
            if only and only not in name:
                continue
            report = grade(exercise=exercise, submission=path, track=track, sandbox="local")
            reports[name] = _strip(json.loads(report.to_json()))
            print(f"{name}: {report.verdict} {report.score}/{report.max_score}", flush=True)
    out.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n")
    print(f"{len(reports)} reports -> {out}")
    return 0


def _without_source(value, key: str = ""):
    """A mutant's report without what depends on its file's bytes (sha256, size, line numbers)."""
    if isinstance(value, dict):
        return {k: _without_source(v, k) for k, v in value.items() if k not in ("sha256", "size")}
    if isinstance(value, list):
        return [_without_source(v, key) for v in value]
    if isinstance(value, str) and key == "traceback":
        return re.sub(r"line \d+", "line N", value)
    return value


def compare(before: Path, after: Path, mutant_source_changed: bool = False) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    a, b = ({k: _strip(v) for k, v in side.items()} for side in (a, b))  # records made before a key was volatile
    if mutant_source_changed:
        a, b = ({k: _without_source(v) if k.startswith("mutant/") else v for k, v in side.items()} for side in (a, b))
    problems = [f"only in {before.name}: {k}" for k in sorted(set(a) - set(b))]
    problems += [f"only in {after.name}: {k}" for k in sorted(set(b) - set(a))]
    for key in sorted(set(a) & set(b)):
        left, right = json.dumps(a[key], sort_keys=True), json.dumps(b[key], sort_keys=True)
        if left != right:
            at = next(i for i, (x, y) in enumerate(zip(left, right)) if x != y) if left[:len(right)] != right[:len(left)] else min(len(left), len(right))
            problems.append(f"{key}: differs at {at}: ...{left[max(0, at - 80):at + 80]}... vs ...{right[max(0, at - 80):at + 80]}...")
    for line in problems:
        print(line)
    print(f"{len(set(a) & set(b))} reports compared, {len(problems)} differences")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--only", help="grade only the submissions whose name contains this")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--mutant-source-changed", action="store_true",
                      help="oracle.py changed: ignore the mutant files' sha256, size and traceback line numbers")
    opts = parser.parse_args()
    if opts.cmd == "record":
        return record(opts.out, opts.only)
    return compare(opts.before, opts.after, opts.mutant_source_changed)


if __name__ == "__main__":
    sys.exit(main())
