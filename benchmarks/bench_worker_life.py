"""The machine CPU of a warm local worker's life with nothing graded: taken from the pool (its replacement forked
by the zygote in the background), sent a file, booted, stopped, its cgroup removed. What every submission pays
around its grading, whatever the candidate's code: the forks, namespaces, mounts and exits (mostly the kernel's).

The whole machine's CPU (/proc/stat; a worker is killed, not reaped through this process) over N lives, one
after another, after a few to warm up; and this process's own share (the pool, the session, the cgroup). Run it
on another tree to compare (alternate the runs; the load average is printed):

    python benchmarks/bench_worker_life.py [--lives 150] [--pings 0]
    cd /tmp/before && PYTHONPATH=/tmp/before python benchmarks/bench_worker_life.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from machine import machine_cpu  # noqa: E402  (benchmarks/machine.py, beside this script)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lives", type=int, default=150)
    ap.add_argument("--pings", type=int, default=0, help="requests each worker answers before it is stopped")
    args = ap.parse_args()
    from harness.sandbox import local
    from harness.sandbox.base import Limits
    from harness.session.channel import WorkerSession
    from harness.session.warm import WarmPool

    if not local.mount_isolation():
        print("no mount-namespace isolation here: the local warm pool is cold (nothing to measure)")
        return 1
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory() as tmp, WarmPool("local") as pool:
        source = Path(tmp) / "submission.py"
        source.write_text("def mha(*args, **kwargs):\n    return 0\n")

        def life() -> None:
            session = WorkerSession(pool, track="numpy", entry="mha", submission=source, limits=Limits())
            session.start()
            session.ensure_ready()
            for _ in range(args.pings):
                session.request({"op": "ping"})
            session.close()

        for _ in range(5):
            life()
        time.sleep(0.5)
        machine, own, t = machine_cpu(), time.process_time(), time.monotonic()
        for _ in range(args.lives):
            life()
        time.sleep(0.3)   # the last replacement's fork and the last cgroup's removal, in the background
        machine = [b - a for a, b in zip(machine, machine_cpu())]
        own, wall = time.process_time() - own, time.monotonic() - t - 0.3
    n = args.lives
    busy = machine[0] + machine[1]
    print(f"{n} warm worker lives ({args.pings} requests each): machine CPU {busy / n * 1000:.1f} ms "
          f"a life (user {machine[0] / n * 1000:.1f}, system {machine[1] / n * 1000:.1f}); this process "
          f"{own / n * 1000:.1f} ms; wall {wall / n * 1000:.1f} ms")
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
