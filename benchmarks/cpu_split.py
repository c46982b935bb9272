"""Where the whole machine's CPU goes per graded submission under load, by process role and by library.

`bench_service.py` gives one number, the machine's CPU per submission, which bounds the throughput (cores /
CPU per submission). This splits it: the same load (its own `grade serve`, local sandbox, the kit's ?wait client)
runs under `perf record -a` (every CPU, every process, the kernel too), and each sample is charged to a role by
the process tree that perf records (fork events), so the sandbox workers that are killed rather than reaped
(which the server's process tree misses) are counted too:

- api: the `grade serve` process (HTTP, the store, the queue's dispatch, the report's hand-over);
- grading: its grading processes (pytest, the oracle, the checks, the diagnosis; the host side of a grade);
- zygote: the sandboxes' long-lived processes (unshare, the zygote that forks the workers);
- worker: the sandbox workers, one per submission (the candidate's code, its frames, its fork and exit);
- client: this process (the load's 20 clients); idle and other (the kernel's threads, dockerd...) are shown apart.

Within each role, milliseconds per graded submission by where the sample landed: the kernel, the Python
interpreter, NumPy, BLAS, the C library, the rest; `--symbols N` prints each role's N hottest symbols.
Needs `perf` (Debian: linux-perf) and the right to sample every CPU (root, or kernel.perf_event_paranoid <= 0).
A zygote started during the run (after a crash) counts, with the workers it forks, as zygote.

    python benchmarks/cpu_split.py [--submissions 200] [--clients 20] [--warm-up 30] [--symbols 10]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import processes  # noqa: E402

ROLES = ("api", "grading", "zygote", "worker", "client", "other", "idle")
SAMPLE = re.compile(r"^\s*(.*?)\s+(\d+)/(\d+)\s+(\d+)\s+\S+:\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")


def where(dso: str) -> str:
    """The library a sample's address lies in, by its file name."""
    name = dso.rsplit("/", 1)[-1]
    if name.startswith("[kernel") or name.startswith("[vdso"):
        return "kernel"
    if name.startswith("libpython"):
        return "python"
    if "openblas" in name or "blas" in name:
        return "blas"
    if name.startswith("libc.") or name.startswith("libm.") or name.startswith("ld-linux"):
        return "libc"
    if name.startswith("_multiarray") or name.startswith("_umath") or "numpy" in dso or name.startswith(
            ("_generator", "_pcg64", "bit_generator", "_bounded", "_common", "mtrand")):
        return "numpy"
    return "other"


def parents() -> dict[int, int]:
    """{pid: parent pid} of the live processes."""
    return {pid: ppid for pid, (ppid, _) in processes().items()}


def descendants(roots: set[int], parent: dict[int, int]) -> set[int]:
    """The processes under ``roots``, roots included."""
    found, todo = set(roots), list(roots)
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        todo += kids
    return found


def cmdline(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def split(script: str, api: int, grading: set[int], zygotes: set[int], workers: set[int], client: int):
    """{role: {library: samples' nanoseconds}} and {role: {symbol: ns}} from `perf script` text."""
    parent: dict[int, int] = {}
    by_lib: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_sym: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    role_of: dict[int, str] = {}

    def role(pid: int) -> str:
        if pid in role_of:
            return role_of[pid]
        out, p, seen = "other", pid, set()
        if pid == 0:
            out = "idle"
        elif pid == client:
            out = "client"
        elif pid == api:
            out = "api"
        elif pid in grading:
            out = "grading"
        elif pid in zygotes:
            out = "zygote"
        elif pid in workers:
            out = "worker"
        else:
            while p in parent and p not in seen:   # born during the run: a worker if a sandbox's process forked it
                seen.add(p)
                p = parent[p]
                if p in zygotes or p in grading:
                    out = "worker" if p in zygotes else "zygote"
                    break
                if p == api:
                    out = "api"
                    break
        role_of[pid] = out
        return out

    for line in script.splitlines():
        if "PERF_RECORD" in line:
            m = FORK.search(line)
            if m and m.group(1) == m.group(2):          # a process (not a thread)
                parent.setdefault(int(m.group(1)), int(m.group(3)))
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        r = role(int(m.group(2)))
        ns = int(m.group(4))
        by_lib[r][where(m.group(6))] += ns
        by_sym[r][m.group(5)] += ns
    return by_lib, by_sym


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--submissions", type=int, default=200)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warm-up", type=int, default=30, help="submissions graded before perf starts")
    ap.add_argument("--frequency", type=int, default=499, help="samples a second on each CPU")
    ap.add_argument("--symbols", type=int, default=0, help="print each role's N hottest symbols")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        print("perf is not installed (Debian: apt-get install linux-perf)", file=sys.stderr)
        return 2
    from bench_service import own_server, run

    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory(prefix="cpu-split-") as tmp:
        server, token = own_server(Path(tmp), args.workers, args.submissions)
        try:
            if args.warm_up:   # the grading processes, their warm pools and zygotes exist and have graded
                run(server.url, token, args.warm_up, min(args.clients, args.warm_up), 600, wait=60)
            api, parent = server.proc.pid, parents()
            grading = {p for p in descendants({api}, parent) if b"harness.service.queue.worker" in cmdline(p)}
            sandbox = descendants(grading, parent) - grading
            # a worker forked ahead (the warm pool's idle one) has its zygote's command line: a fork, no exec
            workers = {p for p in sandbox if cmdline(p) == cmdline(parent.get(p, 0))}
            zygotes = sandbox - workers
            data_file = Path(tmp) / "perf.data"
            perf = subprocess.Popen(["perf", "record", "-a", "-F", str(args.frequency), "-o", str(data_file)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.0)
            if perf.poll() is not None:
                print(f"perf record failed: {perf.stderr.read().decode()[-500:]}", file=sys.stderr)
                return 2
            print(f"measured run ({args.submissions} submissions, {args.clients} clients, perf at "
                  f"{args.frequency} Hz on every CPU):", flush=True)
            code = run(server.url, token, args.submissions, args.clients, 1200, server_pid=api, wait=60)
            perf.send_signal(signal.SIGINT)
            perf.wait(60)
        finally:
            server.stop()
        script = subprocess.run(["perf", "script", "-i", str(data_file), "--show-task-events",
                                 "-F", "comm,pid,tid,period,event,ip,sym,dso"],
                                capture_output=True, text=True, errors="replace").stdout
    by_lib, by_sym = split(script, api, grading, zygotes, workers, os.getpid())
    per = 1e6 * args.submissions   # ns -> ms per submission
    libs = ("kernel", "python", "numpy", "blas", "libc", "other")
    busy = sum(sum(c.values()) for r, c in by_lib.items() if r != "idle")
    print(f"\nCPU per graded submission, ms (perf samples; the machine {busy / per:.0f} ms busy, "
          f"{os.cpu_count()} cores allow at most {os.cpu_count() / (busy / per / 1000):.1f} graded/s):")
    print(f"{'role':10}{'total':>8}" + "".join(f"{name:>8}" for name in libs))
    for r in ROLES:
        c = by_lib.get(r)
        if not c:
            continue
        print(f"{r:10}{sum(c.values()) / per:8.1f}" + "".join(f"{c[name] / per:8.1f}" for name in libs))
        for sym, ns in by_sym[r].most_common(args.symbols if r not in ("idle", "other") else 0):
            print(f"{'':12}{ns / per:6.2f}  {sym[:90]}")
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return code


if __name__ == "__main__":
    sys.exit(main())
