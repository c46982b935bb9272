"""Warm workers against their floors, measured side by side in one run.

1. Idle submit-to-report time through a warm pool (harness/session/warm.py), the way a service grades: one
   long-lived process holds a WarmPool; each measured grade() starts with an idle worker ready (the pool has
   refilled since the previous one). Reference solution of ``--exercise`` per track, median of ``--repeat``.
   Floors: ``python -c "import torch"`` (target <= 0.35x) and ``python -c "import numpy, pytest"`` (<= 1.0x).
2. ``grade batch --jobs J`` over a mixed corpus (half NumPy, half torch; correct and wrong-scale copies) with warm
   workers (the default) and with ``--no-warm``, interleaved; throughput ratio (target >= 3x).

The machine's load (uptime) is printed before and after. (`grade serve` is not merged yet: 1. measures through
grade() in one process, which is what the service will call.)
Run: python benchmarks/bench_warm.py [--sandbox local docker] [--repeat 7] [--copies 8] [--jobs 2] [--skip-batch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_batch import corpus  # noqa: E402

FLOORS = {"numpy": [sys.executable, "-c", "import numpy, pytest"], "torch": [sys.executable, "-c", "import torch"]}
TARGETS = {"numpy": 1.0, "torch": 0.35}
BATCH_TARGET = 3.0


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def floor(track: str, repeat: int) -> float:
    subprocess.run(FLOORS[track], capture_output=True)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(FLOORS[track], capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def warm_times(sandbox: str, track: str, exercise: str, repeat: int) -> tuple[list[float], dict]:
    from harness.grading.engine import grade
    from harness.sandbox import Limits
    from harness.session.warm import WarmPool

    ref = ROOT / "reference" / f"{exercise}_{track}.py"
    times = []
    with WarmPool(sandbox, size=1) as pool:
        if pool.cold:
            raise SystemExit(f"the {sandbox} warm pool is cold here (no mount-namespace isolation)")
        limits = Limits()
        pool.prewarm(track, limits, wait=True)
        grade(exercise=exercise, submission=ref, track=track, sandbox=pool)  # the host's own first-use costs
        for _ in range(repeat):
            pool.wait_idle(track, limits, timeout=120)
            t = time.perf_counter()
            report = grade(exercise=exercise, submission=ref, track=track, sandbox=pool)
            times.append(time.perf_counter() - t)
            assert report.verdict == "passed", report.verdict
        env = report.environment
    return times, env


def batch(work: Path, jobs: int, sandbox: str, warm: bool, tag: str) -> float:
    out = work / f"out_{tag}"
    shutil.rmtree(out, ignore_errors=True)
    beside = Path(sys.executable).with_name("grade")
    grade = str(beside) if beside.exists() else (shutil.which("grade") or "grade")
    cmd = [grade, "batch", str(work / "subs"), "--exercise", "mha", "--sandbox", sandbox, "--jobs", str(jobs),
           "--out", str(out), "--warm" if warm else "--no-warm"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"grade batch failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sandbox", nargs="+", default=["local", "docker"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--exercise", default="mha")
    parser.add_argument("--copies", type=int, default=8, help="batch corpus: 4 files per copy (32 by default)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch-repeat", type=int, default=1)
    parser.add_argument("--skip-batch", action="store_true")
    opts = parser.parse_args()
    print(f"load before: {uptime()}; cpus={os.cpu_count()}")
    floors = {track: floor(track, opts.repeat) for track in ("numpy", "torch")}
    print(f"floors (median of {opts.repeat}): " + ", ".join(f"{' '.join(FLOORS[t][1:])!r} {floors[t]:.3f} s"
                                                              for t in floors))
    print(f"1. idle submit-to-report through a warm pool, grade() in one process, {opts.exercise} reference, "
          f"median of {opts.repeat}")
    for sandbox in opts.sandbox:
        for track in ("numpy", "torch"):
            try:
                times, env = warm_times(sandbox, track, opts.exercise, opts.repeat)
            except SystemExit as exc:
                print(f"   {sandbox:6} {track:5}  unavailable: {exc}")
                continue
            except Exception as exc:  # e.g. docker not ready
                print(f"   {sandbox:6} {track:5}  unavailable: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            med = statistics.median(times)
            ratio = med / floors[track]
            verdict = "ok" if ratio <= TARGETS[track] else "MISSED"
            print(f"   {sandbox:6} {track:5}  {med:6.3f} s (min {min(times):.3f}, max {max(times):.3f})  "
                  f"= {ratio:4.2f}x floor  target <= {TARGETS[track]:.2f}x {verdict}")
    if not opts.skip_batch:
        with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
            work = Path(tmp)
            n = corpus(work / "subs", opts.copies, ["numpy", "torch"])
            for sandbox in opts.sandbox:
                print(f"2. grade batch --jobs {opts.jobs} --sandbox {sandbox}: {n} submissions (half torch)")
                walls = {True: [], False: []}
                try:
                    for r in range(opts.batch_repeat):  # interleaved: load changes hit both alike
                        for warm in (False, True):
                            walls[warm].append(batch(work, opts.jobs, sandbox, warm, f"{sandbox}_{warm}_{r}"))
                except SystemExit as exc:
                    print(f"   unavailable: {str(exc)[:300]}")
                    continue
                cold, warm = statistics.median(walls[False]), statistics.median(walls[True])
                ratio = cold / warm
                print(f"   --no-warm {cold:6.1f} s ({n / cold:5.2f}/s)   --warm {warm:6.1f} s ({n / warm:5.2f}/s)   "
                      f"throughput x{ratio:.2f}  target >= {BATCH_TARGET:.0f}x "
                      f"{'ok' if ratio >= BATCH_TARGET else 'MISSED'}")
    print(f"load after: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
