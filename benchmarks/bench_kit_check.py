"""Timing of the candidate kit's `grade check` (NumPy track) against `python -c "import numpy"`.

The kit is built (or taken from --kit DIR), its wheel unpacked into a folder on PYTHONPATH (the floor runs with
the same PYTHONPATH), and `grade check EXERCISE <reference>` runs as the console script would. The check
starts two interpreters (the CLI, which never imports NumPy, and the child that runs the file), so its floor is
one `import numpy` plus one bare interpreter start. Target: <= 1.3x the floor.
Run: python benchmarks/bench_kit_check.py [--repeat 9] [--kit DIR] [--exercise mha]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.3


def _run(cmd: list[str], env: dict, cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is user + system of the process and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timed(commands: dict[str, list[str]], env: dict, repeat: int, cwd: str) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) per command over ``repeat`` rounds after a warm-up, the commands interleaved within
    each round so that a busy machine weighs on all of them alike."""
    for cmd in commands.values():
        _run(cmd, env, cwd)
    runs: dict[str, list] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            runs[name].append(_run(cmd, env, cwd))
    return {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for name, r in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--kit", type=Path, help="a folder `grade kit build --out` wrote (default: build one now)")
    parser.add_argument("--exercise", default="mha")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-kit-") as tmp:
        kit = opts.kit
        if kit is None:
            kit = Path(tmp) / "kit"
            subprocess.run([sys.executable, "-m", "harness", "kit", "build", "--out", str(kit)], check=True,
                           capture_output=True)
        site = Path(tmp) / "site"
        with zipfile.ZipFile(next(kit.glob("attention_grader_kit-*.whl"))) as z:
            z.extractall(site)
        mine = Path(tmp) / "solution.py"
        shutil.copy(ROOT / "reference" / f"{opts.exercise}_numpy.py", mine)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
        env["PYTHONPATH"] = str(site)
        check = [sys.executable, "-c", "import sys; from attention_kit.cli import main; sys.exit(main())",
                 "check", opts.exercise, str(mine)]
        probe = subprocess.run(check, capture_output=True, text=True, env=env, cwd=tmp)
        if probe.returncode != 0:
            print(probe.stdout + probe.stderr)
            return 1
        t = timed({"floor": [sys.executable, "-c", "import numpy"], "bare": [sys.executable, "-c", "pass"],
                   "check": check}, env, opts.repeat, tmp)
    print(f"{'':28} {'wall':>9} {'CPU':>9}")
    for name, label in (("floor", "python -c 'import numpy'"), ("bare", "python -c 'pass'"),
                        ("check", f"grade check {opts.exercise} (numpy)")):
        print(f"{label:28} {t[name][0] * 1000:7.1f} ms {t[name][1] * 1000:7.1f} ms")
    wall, cpu = t["check"][0] / t["floor"][0], t["check"][1] / t["floor"][1]
    print(f"grade check / floor: {wall:.2f}x wall, {cpu:.2f}x CPU (target <= {TARGET}x wall; "
          f"load average {os.getloadavg()[0]:.1f})")
    return 0 if wall <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
