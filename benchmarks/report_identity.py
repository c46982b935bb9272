"""No behaviour change: the JSON report of every reference and every catalogued mutant, recorded before a
refactor and compared after it, byte for byte once the timings are taken out.

    python benchmarks/report_identity.py record before.json      # on the old tree (PYTHONPATH=<old tree>)
    python benchmarks/report_identity.py record after.json       # on the new tree
    python benchmarks/report_identity.py compare before.json after.json

What is taken out (it differs from run to run of the same code): ``timings``, every ``duration_s``, the
submission's ``path`` (the tree or temporary folder it was graded from; a batch's slug names that folder too)
and flash_attention's measured peak memory (the worker's and the host's, in diagnostics and in its messages).
``compare --mutant-source-changed``: a change to graders/common/oracle.py (which every NumPy mutant is built
from) changes the mutant files themselves; their sha256, size and traceback line numbers are then left out of
the comparison too. Everything else — verdicts, scores, statuses, messages, diagnostics, diagnosis,
environment — must be identical. Grades with the local sandbox, one submission at a time: every
exercise, every track it offers (a record made before an exercise existed lists it as "only in" the other).

``record --via batch|service``: grade through the batch's grading processes (``harness.batch.pool.run_batch``,
one batch per exercise and track) or the service's (``harness.service.queue.pool.ProcessRunner``) instead of
calling the engine in this process, e.g. ``--via service --only reference/``: what a refactor of the grading
process must leave alone. Compare a record only with one made the same way.
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
    if isinstance(value, str):  # a batch's slug names the temporary folder (tmp__tmpXXXXXXXX__...)
        return re.sub(r"tmp__tmp[a-z0-9_]{8}__", "<tmp>__", value)
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


def _by_engine(todo: list, tmp: Path):
    from harness.grading.engine import grade

    for name, exercise, track, path in todo:
        yield name, json.loads(grade(exercise=exercise, submission=path, track=track, sandbox="local").to_json())


def _by_batch(todo: list, tmp: Path):
    """One batch per (exercise, track), each submission copied into a folder of its own (a batch names its
    reports after the file's path and content)."""
    import shutil

    from harness.batch.plan import BatchOptions
    from harness.batch.pool import run_batch

    groups: dict = {}
    for name, exercise, track, path in todo:
        groups.setdefault((exercise, track), []).append((name, path))
    for (exercise, track), subs in groups.items():
        inputs = tmp / "batch" / exercise / track
        paths = {}
        for i, (name, path) in enumerate(subs):
            (inputs / str(i)).mkdir(parents=True)
            paths[name] = shutil.copy(path, inputs / str(i) / Path(path).name)
        result = run_batch([inputs], BatchOptions(exercise=exercise, out=tmp / "out" / exercise / track, track=track,
                                                  sandbox="local", keep_artifacts=False))
        by_path = {str(it.path.resolve()): it.report for it in result.items}
        for name, path in paths.items():
            yield name, by_path[str(Path(path).resolve())]


def _by_service(todo: list, tmp: Path):
    from harness.service.queue.pool import ProcessRunner

    runner = ProcessRunner(tmp)
    try:
        for name, exercise, track, path in todo:
            answer = runner.run({"id": name, "exercise": exercise, "track": track, "sandbox": "local", "seed": 0,
                                 "path": str(path), "label": Path(path).name, "keep_artifacts": True,
                                 "warm": True}, 1800.0)  # the task grade_submission sends
            yield name, answer.get("report", answer)
    finally:
        runner.close()


def record(out: Path, only: str | None, via: str = "engine") -> int:
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        todo = [s for s in submissions(Path(tmp)) if not only or only in s[0]]
        grader = {"engine": _by_engine, "batch": _by_batch, "service": _by_service}[via]
        for name, data in grader(todo, Path(tmp)):
            reports[name] = json.loads(json.dumps(_strip(data)).replace(tmp, "<tmp>"))  # labels name the folder
            print(f"{name}: {data.get('verdict')} {data.get('score')}/{data.get('max_score')}", flush=True)
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
    rec.add_argument("--via", choices=("engine", "batch", "service"), default="engine",
                     help="grade in this process (engine), or through the batch's or the service's grading processes")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--mutant-source-changed", action="store_true",
                      help="oracle.py changed: ignore the mutant files' sha256, size and traceback line numbers")
    opts = parser.parse_args()
    if opts.cmd == "record":
        return record(opts.out, opts.only, opts.via)
    return compare(opts.before, opts.after, opts.mutant_source_changed)


if __name__ == "__main__":
    sys.exit(main())
