"""One-shot `grade EXERCISE <reference> --sandbox local|docker` against the import floor on this machine, for
every exercise's reference on each track (issue #27's targets).

Floors: `python -c "import numpy, pytest"` (NumPy and plain-Python tracks) and `python -c "import torch"` (torch).
Targets: NumPy <= 1.5x its floor, torch <= 1.1x its floor; docker adds <= 0.3 s over local.
Runs are interleaved (floor, local, docker, floor, ...) so that a change in the machine's load hits all of them
alike; each figure is the median of --repeat runs (>= 7) after one warm-up run each (which also fills the
oracle's answer cache, harness/core/answers.py: the first grade after an install computes them). The load
average is printed before and after: the machine may be shared, and load inflates every wall time (the ratios
less so, since floor and grade are measured side by side). Also printed: the median CPU time (user + system) of
each command and the descendants it reaped, and its ratio to the floor's, which a shared machine's load moves far
less than wall times. A local worker is killed at the end and mostly not reaped through that chain: read the
figure as the host's CPU (plus the part of the worker's that was counted), not the whole grade's.

The candidate's own time: every timed grade writes its JSON report (``--json``), whose ``timings`` hold
``candidate_calls_s``, the seconds the worker spent in the reference's own code (init, forward, call; the worker's
word, fine for our own reference). Printed with it: the **bound**, (imports + those seconds) / floor, about the
least ratio any grader could reach while the suite's cases and the order of its calls stay as they are (a call
comes after the imports: the host's NumPy and pytest, to collect the suite whose requests they are, or the worker's
torch); "imports" is the floor's command ended by ``os._exit(0)``, without the interpreter's teardown, which a
one-shot grade skips too (torch's is ~0.3 s of its floor, NumPy's and pytest's little). The candidate's seconds
include what the worker runs around the call: flash_attention's two memory calls run under the worker's own meter
(tracemalloc; a torch dispatch mode) and, on the torch track, malloc thresholds that mmap every 128 KiB
(harness/sandbox/base.py), so there the bound is above the true one. And the **grader's own** time, grade - imports
- the candidate's: the part a faster grader could remove.

Bytecode: each measured tree is byte-compiled first (``compileall``), as an installed package is at install time
and as NumPy's and pytest's modules (the floor's) are; a checkout run with PYTHONDONTWRITEBYTECODE=1 otherwise
compiles every grader module from source on every run (~55 modules; --no-compile measures that).

Run: python benchmarks/bench_grade.py [--repeat 7] [--sandbox local docker] [--exercise mha gqa ...]
     [--track numpy torch]
Another tree: PYTHONPATH=/path/to/tree python benchmarks/bench_grade.py (grades with `python -m harness`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"numpy": 1.5, "torch": 1.1, "python": 1.5}
DOCKER_ADDS = 0.3
FLOORS = {"numpy": [sys.executable, "-c", "import numpy, pytest"], "torch": [sys.executable, "-c", "import torch"],
          "python": [sys.executable, "-c", "import numpy, pytest"]}
IMPORTS = {track: [*cmd[:-1], cmd[-1] + ", os; os._exit(0)"] for track, cmd in FLOORS.items()}  # no teardown


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def wall(cmd: list[str], tree: Path | None = None) -> tuple[float, int, float]:
    """Wall time, exit code and CPU time (user + system of the process and the descendants it reaped) of ``cmd``;
    run from ``tree`` with it first on PYTHONPATH when given."""
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tree)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return took, proc.returncode, usage.ru_utime + usage.ru_stime


def candidate_calls(report: Path) -> float | None:
    """``timings.candidate_calls_s`` of a JSON report (None when the grade wrote none, or an older tree's)."""
    try:
        value = json.loads(report.read_text())["timings"].get("candidate_calls_s")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sandbox", nargs="+", default=["local", "docker"])
    parser.add_argument("--exercise", nargs="+", default=None, help="default: every exercise")
    parser.add_argument("--track", nargs="+", default=["numpy", "torch", "python"])
    parser.add_argument("--before", type=Path, metavar="TREE",
                        help="also grade with this source tree (e.g. the code before a change), interleaved")
    parser.add_argument("--no-compile", action="store_true", help="do not byte-compile the trees first")
    opts = parser.parse_args()
    tree = Path(os.environ.get("PYTHONPATH") or ROOT).resolve()
    sys.path.insert(0, str(tree))
    from harness.core.exercises import all_exercises

    if not opts.no_compile:
        for where in {tree, *([opts.before.resolve()] if opts.before else [])}:
            subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0",
                            *[p for p in ("harness", "graders", "gradekit") if (where / p).is_dir()]],
                           cwd=where, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    grade = [sys.executable, "-m", "harness"]  # no console-script shim in the way: the floors run the interpreter too
    print(load())
    lines = []
    for name, ex in all_exercises().items():
        if opts.exercise and name not in opts.exercise:
            continue
        for track in ex.track_names:
            if track not in opts.track:
                continue
            ref = ex.reference_path(track)
            cmds: dict[str, tuple[list[str], Path | None]] = {"floor": (FLOORS[track], None),
                                                               "imports": (IMPORTS[track], None)}
            trees = {"": tree, **({"(before)": opts.before.resolve()} if opts.before else {})}
            for box in opts.sandbox:
                for label, where in trees.items():
                    own = where / ref.relative_to(tree)  # each tree grades its own reference, as it was then
                    cmd = [*grade, name, str(own if own.is_file() else ref), "--sandbox", box, "--track", track, "-q"]
                    took, code, _ = wall(cmd, where)  # warm-up: imports cached by the OS, the oracle's answers kept
                    if code > 1:
                        lines.append(f"{name:16} {track:6} {box + label:15} unavailable (exit {code})")
                        print(lines[-1], flush=True)
                        continue
                    cmds[box + label] = (cmd, where)
            scratch = Path(tempfile.mkdtemp(prefix="bench-grade-"))
            reports = {key: scratch / f"{n}.json" for n, key in enumerate(cmds) if key not in ("floor", "imports")}
            for key, path in reports.items():
                cmds[key] = ([*cmds[key][0], "--json", str(path)], cmds[key][1])
            wall(FLOORS[track])
            times: dict[str, list[float]] = {k: [] for k in cmds}
            cpus: dict[str, list[float]] = {k: [] for k in cmds}
            calls: dict[str, list[float]] = {k: [] for k in reports}
            for _ in range(opts.repeat):
                for key, (cmd, where) in cmds.items():
                    took, _, cpu = wall(cmd, where)
                    times[key].append(took)
                    cpus[key].append(cpu)
                    if key in reports:
                        calls[key].append(candidate_calls(reports[key]))
            shutil.rmtree(scratch, ignore_errors=True)
            med = {k: statistics.median(v) for k, v in times.items()}
            cpu = {k: statistics.median(v) for k, v in cpus.items()}
            floor = med["floor"]
            for key in cmds:
                if key in ("floor", "imports"):
                    continue
                box = key.split("(")[0]
                ratio = med[key] / floor
                line = (f"{name:16} {track:6} {key:15} {med[key]:5.2f} s  floor {floor:5.2f} s  ratio {ratio:4.2f}x  "
                        f"(CPU {cpu[key]:4.2f} s / {cpu['floor']:4.2f} s = {cpu[key] / cpu['floor']:4.2f}x)")
                own = [c for c in calls[key] if c is not None]
                if own:
                    spent, imports = statistics.median(own), med["imports"]
                    line += (f"  candidate's calls {spent:4.2f} s, imports {imports:4.2f} s, bound "
                             f"{(imports + spent) / floor:4.2f}x, grader's own {med[key] - imports - spent:+.2f} s")
                if box == "local":
                    line += f"  target <= {TARGETS[track]:.1f}x {'ok' if ratio <= TARGETS[track] else 'MISSED'}"
                elif "local" + key[len(box):] in med:
                    extra = med[key] - med["local" + key[len(box):]]
                    line += (f"  adds {extra:+.2f} s over local (target <= {DOCKER_ADDS} s) "
                             f"{'ok' if extra <= DOCKER_ADDS else 'MISSED'}")
                lines.append(line)
                print(line, flush=True)
    print(f"\nmedians of {opts.repeat} interleaved runs each{'' if opts.no_compile else ', trees byte-compiled'}; "
          f"{load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
