"""The batch's parent process: ``jobs`` long-lived grading processes (:mod:`harness.batch.child`), one thread
driving each, recycled after ``RECYCLE_AFTER`` submissions or past ``RECYCLE_RSS_MB`` of resident memory (a fresh
one costs ~0.4 s of CPU: harness/service/queue/pool.py's ProcessRunner) and replaced when they die; only this
process writes reports."""

from __future__ import annotations

import dataclasses
import os
import queue
import signal
import threading
import time
from pathlib import Path

from harness.batch.child import PARENT_ENV
from harness.batch.files import existing_report, finish_item, outcome_of
from harness.batch.plan import BatchOptions, Item, plan
from harness.core.errors import EXIT_FAILED, EXIT_INFRA, EXIT_PASSED, InfrastructureError, UsageError
from harness.core.leftovers import sweep_scratch
from harness.grading.process import GradingProcess, Runner

RECYCLE_AFTER = 1000             # submissions per grading process before it is replaced
RECYCLE_RSS_MB = 600             # or once it holds more than this (what it keeps between submissions is bounded)


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


def _start_grader(log_path: Path, zygotes=None) -> GradingProcess:
    """One long-lived grading process of the batch (harness/batch/child.py); its stderr goes to ``log_path``."""
    # ATTN_GRADER_WARM_UP=0: warm Docker containers only import torch (a batch grades for throughput; the
    # warm-up forward would be extra CPU in every single-use container)
    env = {"ATTN_GRADER_WARM_UP": os.environ.get("ATTN_GRADER_WARM_UP", "0")}
    fds: list[int] = []
    if zygotes is not None:  # a control connection of its own to each of the batch's shared zygotes
        extra, fds = zygotes.child_env()
        env.update(extra)
    try:
        return GradingProcess("harness.batch.child", parent_var=PARENT_ENV, env=env, log=log_path, pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)


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

    runners = [Runner(lambda n=n: _start_grader(logs / f"grader-{n}.log", zygotes), recycle_after=RECYCLE_AFTER,
                      recycle_rss_mb=RECYCLE_RSS_MB) for n in range(jobs)]

    def slot(n: int) -> None:
        try:
            while not stop.is_set():
                try:
                    it = tasks.get_nowait()
                except queue.Empty:
                    return
                events.put(("start", it))
                task = {"exercise": opts.exercise, "path": str(it.path.resolve()), "label": it.label,
                        "sha256": it.sha256, "track": opts.track, "sandbox": opts.sandbox, "seed": opts.seed,
                        "limits": opts.limits, "keep_artifacts": opts.keep_artifacts, "warm": opts.warm,
                        "npz_path": str(it.npz_path.resolve())}
                t = time.monotonic()
                answer = runners[n].run(task, opts.submission_timeout_s)
                if stop.is_set():
                    return
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
        for runner in runners:
            runner.close(grace=10.0)
        for th in threads:
            th.join(timeout=15)
        if zygotes is not None:
            zygotes.close()
        if in_main:
            signal.signal(signal.SIGTERM, prev_term if prev_term is not None else signal.SIG_DFL)
    return interrupted


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt
