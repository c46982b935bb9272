"""The batch's parent process: ``jobs`` long-lived grading processes (:mod:`harness.batch.child`), one thread
driving each, recycled after ``RECYCLE_AFTER`` submissions and replaced when they die; only this process
writes reports."""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.batch.files import existing_report, finish_item, outcome_of
from harness.batch.plan import BatchOptions, Item, plan
from harness.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, InfrastructureError, UsageError
from harness.core.leftovers import sweep_scratch

RECYCLE_AFTER = 40               # submissions per grading process before it is replaced


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


class _Grader:
    """One long-lived grading process and its pipes (driven by one thread)."""

    def __init__(self, log_path: Path | None, zygotes=None):
        # ATTN_GRADER_WARM_UP=0: warm Docker containers only import torch (a batch grades for throughput; the
        # warm-up forward would be extra CPU in every single-use container)
        env = dict(os.environ, PYTHONUNBUFFERED="1", ATTN_GRADER_BATCH_PARENT=str(os.getpid()),
                   ATTN_GRADER_WARM_UP=os.environ.get("ATTN_GRADER_WARM_UP", "0"))
        fds: list[int] = []
        if zygotes is not None:  # a control connection of its own to each of the batch's shared zygotes
            extra, fds = zygotes.child_env()
            env.update(extra)
        err = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "harness.batch.child"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=os.getcwd(), pass_fds=fds)
        finally:
            if log_path:
                err.close()
            for fd in fds:
                os.close(fd)
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
        sweep_scratch()   # what graders killed outright left behind (harness/core/leftovers.py)
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
        for it in [it for it in todo if it.refused]:   # a symbolic link: its report says why, nothing is read
            todo.remove(it)
            emit("start", it)
            finish_item(it, opts, {"kind": "usage", "message": it.refused}, 0.0)
            emit("done", it)
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
    zygotes = None
    if opts.warm is None:
        from harness.grading.engine import warm_pays

        opts = dataclasses.replace(opts, warm=warm_pays(opts.sandbox))
    if opts.warm:  # warm local workers: one zygote per track for all grading processes (started in this thread)
        from harness.grading.engine import shared_zygotes

        try:
            zygotes = shared_zygotes(exercise=opts.exercise, paths=[it.path for it in todo], track=opts.track,
                                     sandbox=opts.sandbox)
        except Exception:  # each grading process then starts its own
            zygotes = None

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
                    g = graders[n] = _Grader(logs / f"grader-{n}.log", zygotes)
                events.put(("start", it))
                task = {"exercise": opts.exercise, "path": str(it.path.resolve()), "label": it.label,
                        "sha256": it.sha256, "track": opts.track, "sandbox": opts.sandbox, "seed": opts.seed,
                        "limits": opts.limits, "keep_artifacts": opts.keep_artifacts, "warm": opts.warm,
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
        if zygotes is not None:
            zygotes.close()
        if in_main:
            signal.signal(signal.SIGTERM, prev_term if prev_term is not None else signal.SIG_DFL)
    return interrupted


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
