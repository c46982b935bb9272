"""End-to-end timing of `grade mha <reference>` per track and sandbox, against the floor on this machine.

Floors: `python -c "import numpy, pytest"` (NumPy track) and `python -c "import torch"` (torch track).
Targets: NumPy <= 2.0x its floor, torch <= 1.5x its floor; docker adds <= 1.0 s over local.
Run: python benchmarks/bench_grade.py [--repeat 5] [--sandbox local docker]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"numpy": 2.0, "torch": 1.5}
FLOORS = {"numpy": [sys.executable, "-c", "import numpy, pytest"], "torch": [sys.executable, "-c", "import torch"]}


def timed(cmd: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` runs after one warm-up run."""
    subprocess.run(cmd, capture_output=True, check=False)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sandbox", nargs="+", default=["local", "docker"])
    parser.add_argument("--exercise", default="mha")
    opts = parser.parse_args()
    # The console script next to this interpreter, not a version-manager shim (pyenv's shims are shell scripts
    # that add ~0.1 s): the floors run sys.executable directly, so grade must too.
    beside = Path(sys.executable).with_name("grade")
    grade = str(beside) if beside.exists() else (shutil.which("grade") or "grade")
    rows, local = [], {}
    for track in ("numpy", "torch"):
        floor = timed(FLOORS[track], opts.repeat)
        ref = ROOT / "reference" / f"{opts.exercise}_{track}.py"
        for box in opts.sandbox:
            cmd = [grade, opts.exercise, str(ref), "--sandbox", box, "--track", track, "-q"]
            probe = subprocess.run(cmd, capture_output=True, text=True)
            if probe.returncode != 0:
                rows.append(f"{track:6} {box:7} unavailable (exit {probe.returncode}: {probe.stderr.strip()[:80]})")
                continue
            wall = timed(cmd, opts.repeat)
            ratio = wall / floor
            line = f"{track:6} {box:7} {wall:6.2f} s   floor {floor:5.2f} s   ratio {ratio:4.2f}x"
            if box == "local":
                local[track] = wall
                line += f"   target <= {TARGETS[track]:.1f}x {'ok' if ratio <= TARGETS[track] else 'MISSED'}"
            elif track in local:
                extra = wall - local[track]
                line += f"   docker adds {extra:+.2f} s (target <= 1.0 s) {'ok' if extra <= 1.0 else 'MISSED'}"
            rows.append(line)
    print(f"grade {opts.exercise} on the reference, median of {opts.repeat} runs")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
