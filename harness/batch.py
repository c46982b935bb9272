"""Batch grading: many submissions, N at once, one report file each, safe to kill and resume.

Design
* The engine runs the hidden suite with ``pytest.main`` in-process, so parallel grading needs separate
  processes: ``jobs`` long-lived grading processes (``python -m harness.batch --worker``), each grading one
  submission at a time in its own sandbox (a fresh worker / container per submission, as ``grade run``
  does). A grading process is recycled after ``RECYCLE_AFTER`` submissions and replaced when it dies.
* Only this (parent) process writes reports: each one atomically (temp file + rename) as soon as its
  submission finishes, named ``<path slug>.<sha256[:16]>.json``. A sidecar ``.npz`` of plot arrays (see
  harness/grading/artifacts.py) is written by the grading process *before* the report that names it.
* ``resume``: a submission is skipped when its report exists, validates, and its key (sha256, exercise,
  track, harness version) matches. A batch killed at any moment leaves only complete reports (rename is
  atomic), so re-running with ``resume`` ends with exactly one valid report per submission.
* Every submission gets a report. A file the engine rejects (binary, too large, not UTF-8) gets an
  ``error`` report (the submission's fault: exit 1). A grading that crashes, hangs past the batch watchdog
  or raises an infrastructure error gets an ``error`` report marked ``environment.batch.error.kind =
  "infrastructure"`` and makes the batch exit 3; ``resume`` grades such submissions again.
* Grading processes die with the batch: they ask the kernel for SIGTERM when their parent dies
  (PR_SET_PDEATHSIG), and SIGTERM unwinds the engine so its sandbox worker/container is killed.

Set ``ATTN_GRADER_BATCH_LOG=<file>`` to have every grading start append one line
(``start<TAB>sha256<TAB>path<TAB>pid``) to that file: the tests count sandbox starts with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import __version__
from harness.core.errors import GraderError, InfrastructureError, UsageError
from harness.core.report import SCHEMA_ID, write_atomic

EXIT_PASSED, EXIT_FAILED, EXIT_INFRA = 0, 1, 3
RECYCLE_AFTER = 40               # submissions per grading process before it is replaced
START_LOG_ENV = "ATTN_GRADER_BATCH_LOG"
_SLUG_BAD = re.compile(r"[^A-Za-z0-9._-]+")


@dataclasses.dataclass
class BatchOptions:
    exercise: str
    out: Path
    track: str = "auto"
    sandbox: str = "auto"
    jobs: int = 1
    seed: int = 0
    limits: dict = dataclasses.field(default_factory=dict)
    resume: bool = False
    keep_artifacts: bool = True
    submission_timeout_s: float = 1800.0   # batch watchdog per submission (the engine bounds itself first)


@dataclasses.dataclass
class Item:
    path: Path
    label: str                 # the path as shown (relative to the working directory when inside it)
    slug: str
    sha256: str
    size: int
    key: dict
    report_path: Path
    outcome: str = "pending"   # passed | failed | error | infrastructure
    resumed: bool = False
    report: dict | None = None
    seconds: float = 0.0

    @property
    def npz_path(self) -> Path:
        return self.report_path.with_suffix(".npz")


@dataclasses.dataclass
class BatchResult:
    items: list[Item]
    elapsed_s: float
    notices: list[str]
    interrupted: bool = False

    @property
    def counts(self) -> dict:
        c = {"total": len(self.items), "passed": 0, "failed": 0, "errored": 0, "infrastructure": 0, "resumed": 0}
        for it in self.items:
            c["resumed"] += it.resumed
            if it.outcome == "passed":
                c["passed"] += 1
            elif it.outcome == "failed":
                c["failed"] += 1
            elif it.outcome in ("error", "infrastructure"):
                c["errored"] += 1
                c["infrastructure"] += it.outcome == "infrastructure"
        return c

    @property
    def exit_code(self) -> int:
        if self.interrupted or any(it.outcome in ("infrastructure", "pending") for it in self.items):
            return EXIT_INFRA
        return EXIT_PASSED if all(it.outcome == "passed" for it in self.items) else EXIT_FAILED


# -- discovery and naming --------------------------------------------------------------------------------
def discover(paths) -> list[Path]:
    """Submissions from files and folders (every ``.py`` below a folder, hidden folders and caches skipped)."""
    found, seen = [], set()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise UsageError(f"{str(p)!r} does not exist")
        if p.is_dir():
            files = sorted(f for f in p.rglob("*.py") if f.is_file()
                           and not any(part.startswith(".") or part == "__pycache__"
                                       for part in f.relative_to(p).parts))
        else:
            files = [p]
        for f in files:
            r = f.resolve()
            if r not in seen:
                seen.add(r)
                found.append(f)
    if not found:
        raise UsageError("no submissions found (expected .py files or folders containing them)")
    return found


def label_for(path: Path) -> str:
    r = path.resolve()
    try:
        return r.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return r.as_posix()


def slug_for(label: str) -> str:
    s = _SLUG_BAD.sub("_", label.strip("/").replace("/", "__")).lstrip(".") or "submission"
    if len(s) > 120:
        s = s[:100] + "-" + hashlib.sha1(label.encode()).hexdigest()[:12]
    return s


def report_name(slug: str, sha256: str) -> str:
    return f"{slug}.{sha256[:16]}.json"


def _hash_file(path: Path) -> tuple[str, int]:
    try:
        data = path.read_bytes()
    except OSError:
        return "0" * 64, 0
    return hashlib.sha256(data).hexdigest(), len(data)


def _key_track(path: Path, exercise, track: str) -> str:
    if track != "auto":
        return track
    from harness.grading.submission import detect_track, load_submission

    try:
        return detect_track(load_submission(path), exercise)
    except GraderError:
        return "auto"


def plan(paths, opts: BatchOptions) -> list[Item]:
    from harness.core.exercises import get_exercise

    ex = get_exercise(opts.exercise)  # unknown exercise: UsageError before anything runs
    files = discover(paths)
    labels = [label_for(f) for f in files]
    slugs = [slug_for(lb) for lb in labels]
    dupes = {s for s in slugs if slugs.count(s) > 1}
    items = []
    for f, lb, sl in zip(files, labels, slugs):
        if sl in dupes:
            sl = f"{sl}-{hashlib.sha1(lb.encode()).hexdigest()[:8]}"
        sha, size = _hash_file(f)
        key = {"sha256": sha, "exercise": ex.name, "track": _key_track(f, ex, opts.track), "harness": __version__}
        items.append(Item(path=f, label=lb, slug=sl, sha256=sha, size=size, key=key,
                          report_path=Path(opts.out) / report_name(sl, sha)))
    return items


# -- report files ----------------------------------------------------------------------------------------
def validate_report(data: dict) -> bool:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema ships with the test extras
        return isinstance(data, dict) and data.get("schema") == SCHEMA_ID and isinstance(data.get("tests"), list)
    from harness.core.report import load_schema

    try:
        jsonschema.validate(data, load_schema())
    except jsonschema.ValidationError:
        return False
    return True


def load_report(path: Path) -> dict | None:
    """The report at ``path`` if it is complete, parses and validates; else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and validate_report(data) else None


def existing_report(item: Item) -> dict | None:
    """A finished report for exactly this submission version, exercise, track and harness, or None."""
    data = load_report(item.report_path)
    if data is None:
        return None
    batch = data.get("environment", {}).get("batch", {})
    if batch.get("key") != item.key or data.get("submission", {}).get("sha256") != item.sha256:
        return None
    if batch.get("error", {}).get("kind") == "infrastructure":
        return None  # not the submission's verdict: grade it again
    return data


def outcome_of(data: dict) -> str:
    if data.get("environment", {}).get("batch", {}).get("error", {}).get("kind") == "infrastructure":
        return "infrastructure"
    return data.get("verdict", "error")


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


def error_report(item: Item, opts: BatchOptions, kind: str, message: str, seconds: float) -> dict:
    """A schema-valid report for a submission the engine could not grade (kind: usage | infrastructure)."""
    import platform

    from harness.core.text import clean_text

    track = item.key["track"] if item.key["track"] in ("numpy", "torch") else (
        opts.track if opts.track in ("numpy", "torch") else "numpy")
    try:
        import numpy

        np_version = numpy.__version__
    except ImportError:  # pragma: no cover
        np_version = "unknown"
    return {"schema": SCHEMA_ID, "exercise": item.key["exercise"], "track": track, "verdict": "error",
            "score": 0, "max_score": 0, "tests": [], "diagnosis": [],
            "environment": {"sandbox": opts.sandbox if opts.sandbox in ("local", "docker") else "local",
                            "sandbox_requested": opts.sandbox, "python": platform.python_version(),
                            "numpy": np_version, "torch": None, "harness": __version__, "seed": opts.seed,
                            "batch": {"error": {"kind": kind, "message": clean_text(message, 2000)}}},
            "submission": {"sha256": item.sha256, "size": item.size, "path": item.label},
            "timings": {"total_s": round(max(seconds, 0.0), 3)}}


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


# -- the grading processes -------------------------------------------------------------------------------
class _Grader:
    """One long-lived grading process and its pipes (driven by one thread)."""

    def __init__(self, log_path: Path | None):
        env = dict(os.environ, PYTHONUNBUFFERED="1", ATTN_GRADER_BATCH_PARENT=str(os.getpid()))
        err = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "harness.batch", "--worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=os.getcwd())
        finally:
            if log_path:
                err.close()
        self.graded = 0
        self._buf = b""

    def ask(self, task: dict, timeout: float) -> dict | None:
        """Send one task; the answer, or None when the process died or the watchdog fired."""
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if not sel.select(timeout=min(left, 1.0)):
                    continue
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        self.graded += 1
        try:
            return json.loads(line)
        except ValueError:
            return None

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()  # SIGTERM: the engine unwinds and kills its sandbox worker
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


def run_batch(paths, opts: BatchOptions, *, on_event=None) -> BatchResult:
    """Grade every submission under ``paths``; ``on_event(kind, item_or_info)`` reports progress from the
    calling thread: ("plan", {"total", "todo", "resumed"}), ("start", item), ("done", item), ("notice", text)."""
    t0 = time.monotonic()
    emit = on_event or (lambda kind, payload: None)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock_out_dir(out)
    try:
        _clean_temp_files(out)
        items = plan(paths, opts)
        todo = []
        for it in items:
            data = existing_report(it) if opts.resume else None
            if data is not None:
                it.report, it.outcome, it.resumed = data, outcome_of(data), True
                it.seconds = float(data.get("timings", {}).get("total_s", 0.0))
            else:
                todo.append(it)
        emit("plan", {"total": len(items), "todo": len(todo), "resumed": len(items) - len(todo)})
        notices: list[str] = []
        interrupted = _grade_all(todo, opts, out, emit, notices)
        return BatchResult(items=items, elapsed_s=time.monotonic() - t0, notices=notices, interrupted=interrupted)
    finally:
        lock.close()


def _lock_out_dir(out: Path):
    import fcntl

    f = open(out / ".batch.lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise UsageError(f"another `grade batch` is writing to {out}") from None
    return f  # the lock goes with the process, also when it is killed


def _clean_temp_files(out: Path) -> None:
    for f in out.glob(".*.tmp"):  # left by a batch killed mid-write; never a report
        try:
            f.unlink()
        except OSError:
            pass


def _grade_all(todo: list[Item], opts: BatchOptions, out: Path, emit, notices: list[str]) -> bool:
    if not todo:
        return False
    jobs = max(1, min(int(opts.jobs), len(todo)))
    tasks: queue.Queue = queue.Queue()
    for it in todo:
        tasks.put(it)
    events: queue.Queue = queue.Queue()
    stop = threading.Event()
    graders: list[_Grader | None] = [None] * jobs
    logs = out / ".logs"
    logs.mkdir(exist_ok=True)

    def slot(n: int) -> None:
        try:
            while not stop.is_set():
                try:
                    it = tasks.get_nowait()
                except queue.Empty:
                    return
                g = graders[n]
                if g is None or g.proc.poll() is not None or g.graded >= RECYCLE_AFTER:
                    if g is not None:
                        g.stop()
                    g = graders[n] = _Grader(logs / f"grader-{n}.log")
                events.put(("start", it))
                task = {"exercise": opts.exercise, "path": str(it.path.resolve()), "label": it.label,
                        "sha256": it.sha256, "track": opts.track, "sandbox": opts.sandbox, "seed": opts.seed,
                        "limits": opts.limits, "keep_artifacts": opts.keep_artifacts,
                        "npz_path": str(it.npz_path.resolve())}
                t = time.monotonic()
                answer = g.ask(task, opts.submission_timeout_s)
                if stop.is_set():
                    return
                if answer is None:
                    died = g.proc.poll() is not None
                    g.stop(grace=5.0)
                    graders[n] = None
                    answer = {"kind": "infrastructure",
                              "message": ("the grading process died" + (f" (exit code {g.proc.returncode})"
                                                                        if g.proc.returncode is not None else "")
                                          if died else f"grading did not finish within "
                                                       f"{opts.submission_timeout_s:g} s")}
                for text in answer.get("notices", []):
                    events.put(("notice", text))
                finish_item(it, opts, answer, time.monotonic() - t)
                events.put(("done", it))
        except BaseException as exc:  # never lose the batch to a bug in one slot
            events.put(("crash", exc))

    threads = [threading.Thread(target=slot, args=(n,), name=f"grade-slot-{n}", daemon=True) for n in range(jobs)]
    in_main = threading.current_thread() is threading.main_thread()
    prev_term = signal.signal(signal.SIGTERM, _raise_interrupt) if in_main else None
    interrupted = False
    try:
        for th in threads:
            th.start()
        while any(th.is_alive() for th in threads) or not events.empty():
            try:
                kind, payload = events.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "crash":
                if isinstance(payload, OSError):  # e.g. the report folder's disk is full
                    raise InfrastructureError(f"cannot write reports: {payload}") from payload
                raise payload
            if kind == "notice":
                if payload in notices:
                    continue
                notices.append(payload)
            emit(kind, payload)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop.set()
        for g in graders:
            if g is not None:
                g.stop(grace=10.0)
        for th in threads:
            th.join(timeout=15)
        if in_main:
            signal.signal(signal.SIGTERM, prev_term if prev_term is not None else signal.SIG_DFL)
    return interrupted


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


# -- the grading process side ----------------------------------------------------------------------------
def _die_with_parent() -> None:
    """Ask for SIGTERM when the batch process dies (Linux); exit now if it is already gone."""
    parent = int(os.environ.get("ATTN_GRADER_BATCH_PARENT", "0") or 0)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the closed stdin pipe ends us instead
        pass
    if parent and os.getppid() != parent:
        os._exit(0)


def _log_start(task: dict) -> None:
    path = os.environ.get(START_LOG_ENV)
    if not path:
        return
    line = f"start\t{task['sha256']}\t{task['label']}\t{os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one O_APPEND write: lines from parallel graders never interleave
    finally:
        os.close(fd)


def grade_task(task: dict) -> dict:
    """Grade one submission in this process; the answer sent back to the batch."""
    from harness.grading import artifacts
    from harness.grading.engine import grade

    notices: list[str] = []
    _log_start(task)
    try:
        report = grade(exercise=task["exercise"], submission=task["path"], track=task["track"],
                       sandbox=task["sandbox"], seed=task["seed"], limits=task["limits"] or None,
                       notice=notices.append, keep_artifacts=task["keep_artifacts"])
    except UsageError as exc:
        return {"kind": "usage", "message": exc.message, "notices": notices}
    except GraderError as exc:
        hint = getattr(exc, "hint", "")
        return {"kind": "infrastructure", "message": exc.message + (f" (fix: {hint})" if hint else ""),
                "notices": notices}
    except Exception as exc:  # a grader bug is an infrastructure fault for this submission, not a lost one
        return {"kind": "infrastructure", "message": f"internal error: {type(exc).__name__}: {exc}",
                "notices": notices}
    data = json.loads(report.to_json())
    items = getattr(report, "artifacts", None)
    if items:
        data["artifacts"] = artifacts.save(items, task["npz_path"])
    return {"kind": "report", "report": data, "notices": notices}


def worker_main() -> int:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the batch's to handle: it sends SIGTERM

    def on_term(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt  # unwinds pytest and the engine, whose `finally` kills the sandbox worker

    signal.signal(signal.SIGTERM, on_term)
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)                                  # stray prints go to the log, never into the answers
    sys.stdout = sys.stderr
    try:
        import harness.grading.engine  # noqa: F401  (warm the imports before the first task)

        for line in sys.stdin:
            if not line.strip():
                continue
            answer = grade_task(json.loads(line))
            answers.write(json.dumps(answer, allow_nan=False) + "\n")
            answers.flush()
    except (KeyboardInterrupt, BrokenPipeError):
        return 143
    return 0


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    sys.exit(worker_main())
