"""The one-shot `grade EXERCISE FILE` as it runs, phase by phase: which side a newcomer's wait is on.

`profile_grade.py` times one grade from inside a process that has already imported what it wraps (NumPy, the
oracle, the channel), so its worker starts later than the CLI's does and looks like the bottleneck. This runs the
real CLI (`python -m harness`'s own path through harness/launch.py, same arguments), with light marks only
(`harness.session.channel`, which imports no NumPy, is patched): milliseconds from the launch of the process (the
interpreter's start included) to

- main: the CLI's entry imported (harness/launch.py: the point the CLI's own code starts, before click);
- spawn, spawned: the worker's start asked for, and returned;
- first request: the host's first request, the point it needs the worker (pytest imported, the suite collected);
- ready: the worker's ready frame read (equal to the first request when the worker was ready first);
- close, closed: the worker's close, after the last test;
- end: the report printed, the process about to end; exit: the launcher saw it gone.

Each figure is the median of --repeat runs; "host waited" is ready - first request (0: the host's path, its
imports and collection, is the critical one; more: the worker's start is).

    python benchmarks/cli_timeline.py [mha] [--track numpy] [--sandbox local] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKS = ("main", "spawn", "spawned", "first request", "ready", "close", "closed", "end", "exit")

# Runs in the graded process: marks are CLOCK_MONOTONIC readings, the same clock as the launcher's.
BOOT = r"""
import json, os, sys, time
marks = {}
def mark(name):
    marks.setdefault(name, time.monotonic())
import harness.launch as launch
import harness.session.channel as channel
mark("main")
S = channel.WorkerSession
start, ensure_ready, close = S.start, S.ensure_ready, S.close
def _start(self, *a, **k):
    mark("spawn"); r = start(self, *a, **k); mark("spawned"); return r
def _ensure_ready(self):
    if not self._ready:
        mark("first request")
    r = ensure_ready(self); mark("ready"); return r
def _close(self, *a, **k):
    mark("close"); r = close(self, *a, **k); mark("closed"); return r
S.start, S.ensure_ready, S.close = _start, _ensure_ready, _close
exit_now = os._exit
def _exit(code):  # the end of harness.cli.common.end_now
    mark("end")
    os.write(int(os.environ["CLI_TIMELINE_FD"]), json.dumps(marks).encode())
    exit_now(code)
os._exit = _exit
sys.argv = ["grade", *sys.argv[1:]]
launch.main()
"""


def one_run(exercise: str, track: str, sandbox: str) -> dict[str, float]:
    """One CLI run's marks, in ms from its launch (``exit``: when the launcher saw it end)."""
    read, write = os.pipe()
    path = ROOT / "reference" / f"{exercise}_{track}.py"
    env = dict(os.environ, CLI_TIMELINE_FD=str(write))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", BOOT, exercise, str(path), "--track", track, "--sandbox", sandbox],
                            cwd=ROOT, env=env, pass_fds=(write,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(write)
    proc.wait()
    t_exit = time.monotonic()
    with os.fdopen(read, "rb") as f:
        raw = f.read()
    if proc.returncode not in (0, 1) or not raw:
        raise SystemExit(f"the grade exited {proc.returncode} without its marks")
    marks = {k: (v - t0) * 1000 for k, v in json.loads(raw).items()}
    marks["exit"] = (t_exit - t0) * 1000
    return marks


def summary(runs: list[dict[str, float]]) -> list[str]:
    med = {k: statistics.median(r[k] for r in runs) for k in MARKS if all(k in r for r in runs)}
    lines = [f"  {k:<14} {med[k]:7.0f} ms" for k in MARKS if k in med]
    waited = statistics.median(r["ready"] - r["first request"] for r in runs)
    tests = statistics.median(r["close"] - r["ready"] for r in runs)
    lines += [f"host waited for the worker: {waited:.0f} ms (median; 0: the host's path is the critical one)",
              f"tests (ready -> close): {tests:.0f} ms; close: "
              f"{statistics.median(r['closed'] - r['close'] for r in runs):.0f} ms; after the report: "
              f"{statistics.median(r['exit'] - r['end'] for r in runs):.0f} ms"]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exercise", nargs="?", default="mha")
    ap.add_argument("--track", default="numpy")
    ap.add_argument("--sandbox", default="local", choices=("local", "docker"))
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    one_run(args.exercise, args.track, args.sandbox)   # warm-up: the oracle's kept answers, the disk cache
    runs = [one_run(args.exercise, args.track, args.sandbox) for _ in range(args.repeat)]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"`grade {args.exercise} reference --track {args.track} --sandbox {args.sandbox}`, "
          f"median of {args.repeat}, ms from launch:")
    print("\n".join(summary(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
