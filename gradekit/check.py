"""`grade check EXERCISE FILE`: the candidate's file on the public vectors, in a subprocess with a timeout.

This process never imports NumPy (the child does): `grade check` costs about one `python -c "import numpy"`
plus the candidate's own code (benchmarks/bench_kit_check.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import exercises
from .exercises import KitUsageError

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT"}
MAX_SOURCE_BYTES = 1_000_000


def read_source(path: Path) -> str:
    """The file's text, or KitUsageError for what the grader refuses too (missing, a folder, binary, not UTF-8,
    too large)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise KitUsageError(f"submission {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise KitUsageError(f"submission {str(path)!r} is a directory, expected a .py file") from None
    return decode_source(data)


def decode_source(data: bytes, limit: int = MAX_SOURCE_BYTES) -> str:
    """The text of a submission's bytes, or KitUsageError: over ``limit``, binary (NUL bytes) or not UTF-8. The
    service vets uploads with it too (harness/service/grading.py)."""
    if len(data) > limit:
        raise KitUsageError(f"the submission is {len(data)} bytes; the limit is {limit} (1 MB)")
    if b"\x00" in data:
        raise KitUsageError("the submission is a binary file (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KitUsageError(f"the submission is not UTF-8 text (byte {exc.start})") from None


def run_child(vectors_dir: Path, track: str, path: Path, timeout: float) -> tuple[list[dict], str, str | None]:
    """(records, the child's stderr, why it stopped early or None)."""
    cmd = [sys.executable, "-m", f"{__package__}.runner", str(vectors_dir), track, str(path)]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env)
        stdout, stderr, stop = done.stdout, done.stderr, (None if done.returncode == 0
                                                          else f"the process ended with exit code {done.returncode}")
    except subprocess.TimeoutExpired as exc:
        stdout, stderr, stop = exc.stdout or b"", exc.stderr or b"", f"timeout: no answer within {timeout:g} s"
    records = [json.loads(line) for line in stdout.decode("utf-8", "replace").splitlines() if line.startswith("{")]
    return records, stderr.decode("utf-8", "replace"), stop


def outcomes(records: list[dict], stop: str | None) -> tuple[list[dict], str | None]:
    """The finished cases, a case that started and never finished (timeout or crash) as one more, and the
    import error if the file could not be loaded."""
    error = next((r for r in records if "error" in r), None)
    if error:
        return [], error["error"] + (f"\n{error['traceback']}" if error.get("traceback") else "")
    done = {r["case"]: r for r in records if "status" in r}
    cases = list(done.values())
    hung = [r["case"] for r in records if r.get("started") and r["case"] not in done]
    if hung:
        status = "timeout" if stop and stop.startswith("timeout") else "error"
        cases.append({"case": hung[0], "status": status, "message": stop or "no answer"})
    elif stop and not records:
        return [], stop
    return cases, None


def render(exercise: str, track: str, cases: list[dict], error: str | None, n_vectors: int, file: str,
           stderr: str) -> list[str]:
    passed = sum(c["status"] == "passed" for c in cases)
    verdict = "PASSED" if not error and passed == n_vectors else "FAILED"
    lines = [f"{exercise} ({track} track), public vectors: {verdict}  {passed}/{n_vectors} passed"]
    if error:
        lines += [f"  ERROR   {line}" if i == 0 else f"          {line}" for i, line in enumerate(error.splitlines())]
    for c in cases:
        mark = MARK.get(c["status"], c["status"].upper())
        if c["status"] == "passed":
            errs = ", ".join(f"{k} max abs error {v['max_abs_error']:.3g}" for k, v in c.get("diagnostics", {}).items()
                             if v.get("max_abs_error") is not None)
            lines.append(f"  {mark:7} {c['case']}  [{c.get('description', '')}]" + (f"  {errs}" if errs else ""))
        else:
            lines.append(f"  {mark:7} {c['case']}  [{c.get('description', '')}]: {c.get('message', '')}")
            lines += [f"          {t}" for t in c.get("traceback", "").splitlines()]
    if verdict == "FAILED" and stderr.strip():
        lines.append("  your file printed (last lines):")
        lines += [f"    {t}" for t in stderr.strip().splitlines()[-8:]]
    lines.append(f"These are {n_vectors} public cases only; the full hidden suite (shapes, masks, dtypes, edge cases, "
                 f"gradients) runs when you submit: grade submit {file} --exercise {exercise}")
    return lines


def check(exercise: str, file: Path, *, exercises_dir: Path, vectors_for, track: str = "auto",
          timeout: float = 60.0, echo=print) -> int:
    """Exit code: 0 every public case passed, 1 something failed (crash, hang and import error included),
    KitUsageError for bad usage. ``vectors_for(exercise, track)`` is the folder of that track's .npz files."""
    meta = exercises.load(exercises_dir, exercise)
    source = read_source(file)
    track = exercises.detect_track(source, meta, track)
    vectors_dir = Path(vectors_for(exercise, track))
    n_vectors = len(list(vectors_dir.glob("*.npz")))
    if not n_vectors:
        raise KitUsageError(f"no public vectors for {exercise} ({track} track) in {vectors_dir}")
    records, stderr, stop = run_child(vectors_dir, track, file, timeout)
    cases, error = outcomes(records, stop)
    for line in render(exercise, track, cases, error, n_vectors, str(file), stderr):
        echo(line)
    return 0 if not error and len(cases) == n_vectors and all(c["status"] == "passed" for c in cases) else 1
