"""`grade check EXERCISE FILE`: the candidate's file on the public vectors, in a subprocess with a timeout.

This process never imports NumPy (the child does): `grade check` costs about one `python -c "import numpy"`
plus the candidate's own code (benchmarks/bench_kit_check.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from . import exercises
from .exercises import KitUsageError

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT"}
MAX_SOURCE_BYTES = 1_000_000
LIMIT_TEXT = f"1 MB ({MAX_SOURCE_BYTES:,} bytes)"   # how every message, page and schema states the limit


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
        said = LIMIT_TEXT if limit == MAX_SOURCE_BYTES else f"{limit:,} bytes"
        raise KitUsageError(f"the submission is {len(data):,} bytes; a submission may be at most {said}")
    if b"\x00" in data:
        raise KitUsageError("the submission is a binary file (it contains NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KitUsageError(f"the submission is not UTF-8 text (byte {exc.start})") from None


def run_child(vectors_dir: Path, track: str, path: Path, timeout: float) -> tuple[list[dict], str, str | None]:
    """(records, what the candidate's code printed, why the child stopped early or None). The child is a fork
    of this process where there is fork (no second interpreter start: `grade check` costs one interpreter and
    one `import numpy`), else a fresh interpreter; either runs in a process group of its own, killed whole at
    the timeout."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    argv = [str(vectors_dir), track, str(path)]
    if hasattr(os, "fork"):
        results, output, status = _forked(argv, timeout)
    else:
        results, output, status = _spawned(argv, timeout)
    if status == "timeout":
        stop = f"timeout: no answer within {timeout:g} s"
    else:
        stop = None if status == 0 else f"the process ended with exit code {status}"
    records = [json.loads(line) for line in results.decode("utf-8", "replace").splitlines() if line.startswith("{")]
    return records, output.decode("utf-8", "replace"), stop


def _forked(argv: list[str], timeout: float):
    import selectors
    import signal
    import time

    res_r, res_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own process group, prints into the output pipe, results into the other
        code = 70
        try:
            os.setpgid(0, 0)
            os.close(res_r)
            os.close(out_r)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            from . import runner

            code = runner.main(argv, results_fd=res_w)
        except BaseException:  # noqa: BLE001  a broken vector or runner: the parent reports the exit code
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(res_w)
    os.close(out_w)
    chunks = {res_r: [], out_r: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    timed_out = finished = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                data = os.read(key.fd, 65536)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
        finished = not timed_out
    finally:  # a timeout or Ctrl-C here: the child's whole process group goes, nothing is left running
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        _, wait_status = os.waitpid(pid, 0)
        for fd in chunks:
            os.close(fd)
    status = "timeout" if timed_out else os.waitstatus_to_exitcode(wait_status)
    return b"".join(chunks[res_r]), b"".join(chunks[out_r])[-65536:], status


def _spawned(argv: list[str], timeout: float):
    cmd = [sys.executable, "-m", f"{__package__}.runner", *argv]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        return done.stdout, done.stderr[-65536:], done.returncode
    except subprocess.TimeoutExpired as exc:
        return exc.stdout or b"", (exc.stderr or b"")[-65536:], "timeout"


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
        started = next(r for r in records if r.get("started") and r["case"] == hung[0])
        cases.append({"case": hung[0], "description": started.get("description", ""), "status": status,
                      "message": stop or "no answer"})
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
    lines.append(f"These are {n_vectors} public cases only; the full hidden suite runs when you submit: "
                 f"grade submit {file} --exercise {exercise}")
    return lines


def check(exercise: str, file: Path, *, exercises_dir: Path, vectors_for, track: str = "auto",
          timeout: float = 60.0, echo=print) -> int:
    """Exit code: 0 every public case passed, 1 something failed (crash, hang and import error included),
    KitUsageError for bad usage. ``vectors_for(exercise, track)`` is the folder of that track's .npz files."""
    meta = exercises.load(exercises_dir, exercise)
    source = read_source(file)
    track = exercises.detect_track(source, meta, track)
    if track == "torch":
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise KitUsageError("the torch track needs PyTorch: pip install torch (the kit: its [torch] extra)")
    vectors_dir = Path(vectors_for(exercise, track))
    n_vectors = len(list(vectors_dir.glob("*.npz")))
    if not n_vectors:
        raise KitUsageError(f"no public vectors for {exercise} ({track} track) in {vectors_dir}")
    records, stderr, stop = run_child(vectors_dir, track, file, timeout)
    cases, error = outcomes(records, stop)
    for line in render(exercise, track, cases, error, n_vectors, str(file), stderr):
        echo(line)
    return 0 if not error and len(cases) == n_vectors and all(c["status"] == "passed" for c in cases) else 1
