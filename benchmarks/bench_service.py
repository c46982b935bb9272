"""Load on `grade serve` over loopback: N submissions from C concurrent clients, no 5xx allowed.

Each client submits (JSON, its own candidate name, no wait), then polls its submission until it is graded,
then submits the next (with --wait 60 it submits with ?wait=60, as the candidate kit does, and the answer is the
graded submission); 429/503 answers are honoured (Retry-After) and counted. Printed: status codes, the
intake latency of POST /v1/submissions (p50/p95/max), submit-to-graded latency (p50/p95/max), throughput, and
(with its own server) the CPU time per graded submission of the server's whole process tree and of the client,
which a shared machine's load moves far less than the wall times, and the whole machine's (/proc/stat): the
server's tree misses its sandbox workers, which are killed rather than reaped through it (~40-80 ms a submission
on this machine), and the machine's figure is what bounds the throughput (cores / CPU per submission).
Exit 1 on any 5xx, a lost submission or a submission not graded.

    python benchmarks/bench_service.py                        # starts its own server (local sandbox, 2 workers)
    python benchmarks/bench_service.py --submissions 200 --clients 20
    python benchmarks/bench_service.py --wait 60               # the kit's client: no polling
    python benchmarks/bench_service.py --server http://127.0.0.1:8000 --token $GRADER_TOKEN
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import machine_cpu, processes  # noqa: E402


def pct(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100 * len(values) + 0.5)) - 1))]


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and every descendant, live or reaped: the server's API,
    its grading processes and their zygotes (not the sandbox workers they kill: see machine_cpu). Steadier than wall
    times on a shared machine."""
    stats = processes()
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo += [c for c, (ppid, _) in stats.items() if ppid == p]
    return total


def run(url: str, token: str, submissions: int, clients: int, max_seconds: float, server_pid: int | None = None,
        wait: float = 0.0) -> int:
    sources = [(ROOT / "reference" / "mha_numpy.py").read_text(),
               (ROOT / "examples" / "mha_wrong_scale.py").read_text()]
    codes = collections.Counter()
    intake, e2e, lock = [], [], threading.Lock()
    todo = list(range(submissions))
    problems = []
    deadline = time.monotonic() + max_seconds

    def client(n: int):
        with httpx.Client(base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"}) as c:
            while time.monotonic() < deadline:
                with lock:
                    if not todo:
                        return
                    i = todo.pop()
                body = {"exercise": "mha", "source": f"# submission {i}\n" + sources[i % 2],
                        "candidate": f"bench-{n}"}
                t0 = time.monotonic()
                while True:
                    t = time.monotonic()
                    r = c.post("/v1/submissions", json=body, headers={"Idempotency-Key": f"bench-{i}-{t0}"},
                               params={"wait": wait} if wait else None)
                    with lock:
                        codes[r.status_code] += 1
                    if r.status_code in (429, 503):
                        time.sleep(min(5.0, float(r.headers.get("retry-after", "1"))))
                        continue
                    break
                with lock:
                    intake.append(time.monotonic() - t)
                if r.status_code >= 300:
                    problems.append(f"submission {i}: HTTP {r.status_code} {r.text[:200]}")
                    continue
                sid = r.json()["id"]
                g = r if wait and r.status_code == 200 else None   # with ?wait, a 200 is the graded submission
                while time.monotonic() < deadline:
                    if g is None:
                        g = c.get(f"/v1/submissions/{sid}")
                        with lock:
                            codes[g.status_code] += 1
                    if g.status_code != 200:
                        problems.append(f"{sid}: GET HTTP {g.status_code}")
                        break
                    if g.json()["status"] in ("done", "infrastructure_error"):
                        if g.json()["status"] != "done":
                            problems.append(f"{sid}: {g.json()['status']}")
                        with lock:
                            e2e.append(time.monotonic() - t0)
                        break
                    time.sleep(0.5)
                    g = None

    cpu_server = tree_cpu(server_pid) if server_pid else None
    cpu_client = sum(os.times()[:2])
    machine = machine_cpu()
    t_start = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t_start
    machine = [b - a for a, b in zip(machine, machine_cpu())]
    five = sum(v for k, v in codes.items() if k >= 500)
    print(f"{submissions} submissions from {clients} clients in {wall:.1f} s: "
          f"{len(e2e) / wall:.2f} graded/s")
    print("status codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())) + f"; 5xx: {five}")
    waited = f"?wait={wait:g} (until graded)" if wait else ""
    print(f"POST /v1/submissions{waited} latency: p50 {pct(intake, 50) * 1000:.0f} ms, "
          f"p95 {pct(intake, 95) * 1000:.0f} ms, max {max(intake, default=0) * 1000:.0f} ms")
    print(f"submit-to-graded latency:     p50 {pct(e2e, 50):.2f} s, p95 {pct(e2e, 95):.2f} s, "
          f"max {max(e2e, default=0):.2f} s")
    graded = max(1, len(e2e))
    if server_pid:
        print(f"CPU per graded submission: server {(tree_cpu(server_pid) - cpu_server) / graded * 1000:.0f} ms "
              f"(API, grading processes, zygotes; not the killed sandbox workers), this client "
              f"{(sum(os.times()[:2]) - cpu_client) / graded * 1000:.0f} ms")
    busy = machine[0] + machine[1]
    cores = os.cpu_count() or 1
    print(f"machine CPU per graded submission: {busy / graded * 1000:.0f} ms (user {machine[0] / graded * 1000:.0f}, "
          f"system {machine[1] / graded * 1000:.0f}; idle {machine[2] / graded * 1000:.0f}): everything, workers "
          f"included; {cores} cores allow at most {cores / (busy / graded):.1f} graded/s at that cost")
    if len(e2e) != submissions:
        problems.append(f"{submissions - len(e2e)} submissions not graded within {max_seconds:g} s")
    for p in problems[:10]:
        print("PROBLEM:", p)
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 1 if five or problems else 0


def own_server(tmp: Path, workers: int, submissions: int):
    """A `grade serve` of its own, started (local sandbox, SQLite under ``tmp``, no admission limits in the way of
    ``submissions``), and an interviewer token for it."""
    from tests.service.support import Server, make_tokens

    token = make_tokens(tmp / "data", ("interviewer", "bench"))["bench"]
    server = Server(tmp / "data", workers=workers, env={"GRADER_MAX_IN_FLIGHT": "0", "GRADER_RATE_PER_MINUTE": "0",
                                                        "GRADER_QUEUE_MAX": str(10 * submissions)})
    return server.start(), token


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server")
    ap.add_argument("--token", default=os.environ.get("GRADER_TOKEN"))
    ap.add_argument("--submissions", type=int, default=200)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=1200)
    ap.add_argument("--wait", type=float, default=0.0,
                    help="POST with ?wait=S, as the candidate kit does (60), and poll only what is not graded by then; "
                         "0 (the default): POST, then GET every 0.5 s until graded")
    args = ap.parse_args()
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    if args.server:
        if not args.token:
            ap.error("--token (or GRADER_TOKEN) is required with --server")
        return run(args.server, args.token, args.submissions, args.clients, args.max_seconds, wait=args.wait)
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        server, token = own_server(Path(tmp), args.workers, args.submissions)
        try:
            print(f"server {server.url} (local sandbox, {args.workers} grading workers, SQLite in {server.data_dir})")
            return run(server.url, token, args.submissions, args.clients, args.max_seconds,
                       server_pid=server.proc.pid, wait=args.wait)
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
