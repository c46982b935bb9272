"""Where one grade's time goes: the wall-clock timeline of the host and of the worker, side by side.

    python benchmarks/profile_grade.py mha numpy [--sandbox local] [--file PATH] [--repeat 1]

Prints, in milliseconds from the process's start (as the one-shot CLI would see it), with the host's CPU time
(milliseconds, this process) at each of its own marks:
- the host's own imports (harness.cli, then what grade() pulls in), measured in this process;
- the worker: spawn requested, boot frame (its interpreter and imports done), ready frame (the candidate's
  import done), as the host observes them;
- every request to the worker (sent -> answered, with its kind), grouped per test (the suite's progress hook); for
  requests sent ahead of their answers (the sweep's pipeline), the time spent waiting for each answer;
- the oracle (graders/common/oracle.py, flash_oracle.py, gradients.py), summed per test;
- the diagnosis and the report.
Also the totals per phase. With --repeat N, the same grade again in this process (what a long-lived service
sees: modules imported, caches warm). Nothing here changes a grade; it wraps functions to time them.
The wrapping imports NumPy, the oracle and the channel before the grade, so the worker here starts ~100 ms later
than the CLI's own: for which side the one-shot CLI waits on, use cli_timeline.py (the real CLI, light marks).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

T0 = time.monotonic()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from machine import machine_cpu  # noqa: E402  (benchmarks/machine.py, beside this script)

events: list[tuple[float, str, str]] = []          # (ms since T0, who, what)
cpu_at: dict[float, float] = {}                      # ms since T0 -> the host's CPU ms then
per_test: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
current = {"test": "(set-up)"}


def ms() -> float:
    return (time.monotonic() - T0) * 1000


def mark(who: str, what: str) -> None:
    at = ms()
    cpu_at[at] = time.process_time() * 1000
    events.append((at, who, what))


def timed(module, name: str, bucket: str):
    original = getattr(module, name)
    if getattr(original, "_profiled", False):
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        t = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            per_test[current["test"]][bucket] += (time.monotonic() - t) * 1000

    wrapper._profiled = True
    setattr(module, name, wrapper)


def instrument() -> None:
    from harness.session import channel

    Session = channel.WorkerSession
    start, boot, ensure, request = Session.start, Session._boot, Session.ensure_ready, Session.request

    def p_start(self):
        mark("worker", "spawn requested")
        start(self)
        mark("worker", "spawned (sandbox.start returned)")

    def p_boot(self):
        boot(self)
        events.append(((self.boot_time - T0) * 1000, "worker", "boot frame (interpreter + worker imports done)"))

    def p_ensure(self):
        was = self._ready
        ensure(self)
        if not was:
            mark("worker", "ready frame (candidate imported)")

    def p_request(self, header, arrays=None, **kw):
        t = time.monotonic()
        try:
            return request(self, header, arrays, **kw)
        finally:
            cost = (time.monotonic() - t) * 1000
            per_test[current["test"]]["worker calls"] += cost
            per_test[current["test"]]["calls"] += 1

    pipeline = Session.pipeline

    def p_pipeline(self, requests, *a, **kw):  # requests sent ahead: the time waiting for each answer
        answers = pipeline(self, requests, *a, **kw)
        try:
            while True:
                t = time.monotonic()
                try:
                    answer = next(answers)
                except StopIteration:
                    return
                finally:
                    per_test[current["test"]]["worker calls"] += (time.monotonic() - t) * 1000
                per_test[current["test"]]["calls"] += 1
                yield answer
        finally:
            answers.close()

    Session.start, Session._boot, Session.ensure_ready, Session.request = p_start, p_boot, p_ensure, p_request
    Session.pipeline = p_pipeline

    import graders.common.flash_oracle as fo
    import graders.common.gradients as gr
    import graders.common.oracle as oracle
    import graders.common.shapes as shapes
    import graders.common.suite as suite

    for fn in ("forward", "kv_step"):
        timed(oracle, fn, "oracle")
    for fn in ("attention", "attention_grads", "flash_forward"):
        timed(fo, fn, "oracle")
    timed(gr, "reference_grads", "oracle")
    timed(suite, "reference_grads", "oracle")
    timed(shapes, "build", "case building")

    import graders.mutants.diagnose as dg
    import harness.grading.engine as engine

    diagnose = dg.diagnose

    def p_diagnose(*a, **k):
        mark("host", "diagnosis starts")
        try:
            return diagnose(*a, **k)
        finally:
            mark("host", "diagnosis done")

    dg.diagnose = p_diagnose
    run_suite = engine._run_suite

    def p_run_suite(*a, **k):
        mark("host", "suite starts (pytest.main)")
        try:
            return run_suite(*a, **k)
        finally:
            current["test"] = "(after the suite)"
            mark("host", "suite done")

    engine._run_suite = p_run_suite


def progress(index: int, total: int, test_id: str | None) -> None:
    current["test"] = test_id or "(after the suite)"
    mark("host", f"test {index + 1}/{total} {test_id}" if test_id else "last test done")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exercise")
    parser.add_argument("track", choices=("numpy", "torch", "python"))
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--all-events", action="store_true", help="every test's start, not only the slow ones")
    parser.add_argument("--warm", action="store_true", help="workers from the warm pool, as `grade serve` grades")
    opts = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          "(shared machine: other processes' load inflates wall times)")
    mark("host", "profile script started")
    import harness.cli.main  # noqa: F401  (what the one-shot CLI imports before it grades)
    from harness.core import blas

    blas.from_the_start()  # as the CLI's group does before anything imports NumPy
    mark("host", "harness.cli imported")
    from harness.grading.engine import grade
    mark("host", "harness.grading.engine imported")
    instrument()
    mark("host", "instrumented (imports graders.common, numpy)")
    path = opts.file or ROOT / "reference" / f"{opts.exercise}_{opts.track}.py"
    for run in range(opts.repeat):
        events.clear()
        per_test.clear()
        current["test"] = "(set-up)"
        t = ms()
        mark("host", f"grade() #{run + 1} called")
        cpu, machine = time.process_time(), machine_cpu()
        report = grade(exercise=opts.exercise, submission=path, track=opts.track, sandbox=opts.sandbox,
                       progress=progress, warm=opts.warm)
        mark("host", f"grade() returned: {report.verdict} {report.score}/{report.max_score}")
        json_t = time.monotonic()
        report.to_json()
        mark("host", f"report JSON ({(time.monotonic() - json_t) * 1000:.1f} ms)")
        user, system, _ = (1000 * (b - a) for a, b in zip(machine, machine_cpu()))
        print(f"\n== grade #{run + 1}: {ms() - t:.0f} ms wall, host CPU {1000 * (time.process_time() - cpu):.0f} ms, "
              f"machine CPU {user + system:.0f} ms (system {system:.0f}; the worker's, the pool's refill and anything "
              f"else running included)")
        previous = None
        for at, who, what in sorted(events):
            if not opts.all_events and what.startswith("test ") and previous is not None and at - previous < 15:
                previous = at
                continue
            cpu = f"{cpu_at[at]:7.0f}" if at in cpu_at else " " * 7
            print(f"{at:8.1f}  {cpu}  {who:6}  {what}")
            previous = at
        print(f"\n{'test':58} {'total':>7} {'calls':>5} {'worker':>7} {'oracle':>7} {'build':>6} {'rest':>7}")
        starts = {what.split(" ", 2)[2]: at for at, who, what in events if what.startswith("test ")}
        order = sorted(starts, key=starts.get)
        ends = [starts[k] for k in order[1:]] + [next(a for a, w, x in events if x == "last test done")]
        sums = defaultdict(float)
        for name, end in zip(order, ends):
            total = end - starts[name]
            row = per_test.get(name, {})
            rest = total - row.get("worker calls", 0) - row.get("oracle", 0) - row.get("case building", 0)
            for k in ("worker calls", "oracle", "case building"):
                sums[k] += row.get(k, 0)
            sums["total"] += total
            sums["rest"] += rest
            print(f"{name[:58]:58} {total:7.1f} {int(row.get('calls', 0)):5d} {row.get('worker calls', 0):7.1f} "
                  f"{row.get('oracle', 0):7.1f} {row.get('case building', 0):6.1f} {rest:7.1f}")
        print(f"{'SUM':58} {sums['total']:7.1f} {'':5} {sums['worker calls']:7.1f} {sums['oracle']:7.1f} "
              f"{sums['case building']:6.1f} {sums['rest']:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
