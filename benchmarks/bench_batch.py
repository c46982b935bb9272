"""Batch throughput: wall time of `grade batch` over one corpus with --jobs 1 vs --jobs 2 (or any list).

Corpus: ``--copies`` distinct copies (a comment line differs) of the mha reference and of the wrong-scale
example, per track asked for (torch submissions use the torch reference and a torch wrong-scale variant).
Each configuration grades into a fresh folder (no --resume), after one warm-up batch; with --repeat, runs
are interleaved (1, 2, 1, 2, ...) and the median is reported, so background load hits every setting alike.
Run: python benchmarks/bench_batch.py [--copies 6] [--jobs 1 2] [--sandbox local] [--tracks numpy torch]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def corpus(folder: Path, copies: int, tracks: list[str]) -> int:
    folder.mkdir(parents=True)
    sources = []
    if "numpy" in tracks:
        sources += [("np_ok", (ROOT / "reference" / "mha_numpy.py").read_text()),
                    ("np_wrong", (ROOT / "examples" / "mha_wrong_scale.py").read_text())]
    if "torch" in tracks:
        ref = (ROOT / "reference" / "mha_torch.py").read_text()
        sources += [("torch_ok", ref)]
        wrong = ref.replace("math.sqrt(self.d_k)", "math.sqrt(self.d_model)")
        if wrong != ref:
            sources += [("torch_wrong", wrong)]
    n = 0
    for i in range(copies):
        for name, text in sources:
            (folder / f"{name}_{i:02d}.py").write_text(f"# copy {i}\n{text}")
            n += 1
    return n


def run(work: Path, jobs: int, sandbox: str, tag: str) -> tuple[float, int]:
    out = work / f"out_{tag}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [shutil.which("grade") or "grade", "batch", str(work / "subs"), "--exercise", "mha", "--sandbox", sandbox,
           "--jobs", str(jobs), "--out", str(out)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"grade batch failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall, len(list(out.glob("*.json")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--tracks", nargs="+", default=["numpy", "torch"])
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (median reported)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        work = Path(tmp)
        n = corpus(work / "subs", opts.copies, opts.tracks)
        run(work, max(opts.jobs), opts.sandbox, "warmup")
        print(f"corpus: {n} submissions ({', '.join(opts.tracks)}), sandbox={opts.sandbox}, "
              f"cpus={os.cpu_count()}")
        walls: dict[int, list[float]] = {j: [] for j in opts.jobs}
        for r in range(opts.repeat):  # interleaved, so a load change on the machine hits every setting alike
            for jobs in opts.jobs:
                wall, count = run(work, jobs, opts.sandbox, f"j{jobs}_{r}")
                assert count == n, f"{count} reports for {n} submissions"
                walls[jobs].append(wall)
        base = None
        for jobs in opts.jobs:
            wall = statistics.median(walls[jobs])
            base = base or wall
            runs = ", ".join(f"{w:.2f}" for w in walls[jobs])
            print(f"jobs={jobs}: {wall:6.2f} s wall (median of {runs}), {n / wall:5.2f} submissions/s, "
                  f"speed-up x{base / wall:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
