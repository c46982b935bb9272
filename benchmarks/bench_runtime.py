"""What gVisor costs: the docker sandbox under runc (Docker's default) against runsc (gVisor), per track.

Per track (NumPy, torch), reference solution of ``--exercise``, runtimes interleaved run by run so the machine's
load hits both alike; medians of ``--repeat``:

1. cold: ``grade EXERCISE REF --sandbox docker --runtime R -q`` end to end (a fresh container per run);
2. warm: grade() through a warm pool of that runtime (the container started and imported ahead; what
   `grade serve` / `grade worker` / `grade batch --warm` pay per submission);
3. the floor of a container: ``docker run --rm --runtime R IMAGE python3 -c "import numpy|torch"``.

The machine's load (uptime) is printed before and after. SECURITY.md ("gVisor") quotes these figures.
Run: python benchmarks/bench_runtime.py [--repeat 5] [--tracks numpy torch] [--skip-warm]
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
sys.path.insert(0, str(ROOT / "benchmarks"))
RUNTIMES = ("runc", "runsc")
IMPORTS = {"numpy": "import numpy", "torch": "import torch"}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:8])} ... failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return took


def interleaved(cmds: dict[str, list[str]], repeat: int) -> dict[str, list[float]]:
    for cmd in cmds.values():  # one warm-up each (page cache, image layers)
        wall(cmd)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(repeat):
        for key, cmd in cmds.items():
            times[key].append(wall(cmd))
    return times


def warm_times(runtime: str, track: str, exercise: str, repeat: int) -> list[float]:
    from bench_warm import warm_times as through_pool

    from harness.sandbox.docker import DockerSandbox

    times, env = through_pool(DockerSandbox(runtime=runtime), track, exercise, repeat)
    assert env["docker_runtime"] == runtime, env
    return times


def fmt(times: list[float]) -> str:
    return f"{statistics.median(times):6.2f} s (min {min(times):5.2f}, max {max(times):5.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--exercise", default="mha")
    parser.add_argument("--tracks", nargs="+", default=["numpy", "torch"])
    parser.add_argument("--skip-warm", action="store_true")
    opts = parser.parse_args()
    from harness.sandbox.docker import default_image, docker_cli

    beside = Path(sys.executable).with_name("grade")
    grade = str(beside) if beside.exists() else (shutil.which("grade") or "grade")
    image, docker = default_image(), docker_cli() or "docker"
    print(f"load before: {uptime()}")
    print(f"image {image}; {opts.exercise} reference; median of {opts.repeat}, runc and runsc interleaved")
    for track in opts.tracks:
        ref = ROOT / "reference" / f"{opts.exercise}_{track}.py"
        floor = interleaved({rt: [docker, "run", "--rm", "--runtime", rt, "--network", "none", image, "python3", "-c",
                                  IMPORTS[track]] for rt in RUNTIMES}, opts.repeat)
        cold = interleaved({rt: [grade, opts.exercise, str(ref), "--sandbox", "docker", "--runtime", rt,
                                 "--track", track, "-q"] for rt in RUNTIMES}, opts.repeat)
        warm = {}
        if not opts.skip_warm:
            warm = {rt: warm_times(rt, track, opts.exercise, opts.repeat) for rt in RUNTIMES}
        for label, times in (("container + import", floor), ("cold grade", cold), ("warm grade", warm)):
            if not times:
                continue
            runc, runsc = statistics.median(times["runc"]), statistics.median(times["runsc"])
            print(f"{track:6} {label:18}  runc {fmt(times['runc'])}   runsc {fmt(times['runsc'])}   "
                  f"gVisor adds {runsc - runc:+5.2f} s ({runsc / runc:4.2f}x)")
    print(f"load after: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
