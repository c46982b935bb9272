"""Throughput of the distributed service with 1 and then 2 `grade worker` processes (their ratio), and the
time from submit to report under a steady load, on this machine.

It starts its own Redis (redis-server) and Postgres (initdb/pg_ctl in a temp dir, as the postgres user), the
API (`grade serve --broker`, local sandbox) and the workers (each `--concurrency 1`; in its own network
namespace when run as root, else on loopback). Each throughput phase submits a burst of N submissions (half
correct, half with a bug, so the diagnosis runs too) and times the first submit to the last report; the steady
phase submits at a fixed rate (a fraction of the 2-worker throughput) for a while and reports submit-to-report
latency percentiles.

    python benchmarks/bench_queue.py                      # N=30 per phase, steady load at 60 % for 60 s
    python benchmarks/bench_queue.py --burst 60 --steady-s 120 --load 0.7
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(q / 100 * len(values) + 0.5)) - 1))] if values else float("nan")


SOURCES = [(ROOT / "reference" / "mha_numpy.py").read_text(), (ROOT / "examples" / "mha_wrong_scale.py").read_text()]


SLEEP = 0.0


def submit(c: httpx.Client, i: int) -> str:
    prefix = f"import time\ntime.sleep({SLEEP})\n" if SLEEP else ""
    while True:
        r = c.post("/v1/submissions", json={"exercise": "mha", "source": f"# bench {i} {time.time()}\n" + prefix
                                            + SOURCES[i % 2],
                                            "candidate": f"bench-{i % 7}"})
        if r.status_code == 202:
            return r.json()["id"]
        if r.status_code in (429, 503):
            time.sleep(float(r.headers.get("Retry-After", "1")))
            continue
        raise RuntimeError(f"POST answered {r.status_code}: {r.text[:300]}")


def wait_all(c: httpx.Client, ids: list[str], timeout: float) -> dict[str, float]:
    """{id: seconds from received_at to finished_at} once every id is done."""
    import datetime as dt

    deadline = time.monotonic() + timeout
    left = set(ids)
    out = {}
    while left and time.monotonic() < deadline:
        items = c.get("/v1/submissions", params={"limit": 200}).json()["items"]
        for b in items:
            sid = b["id"]
            if sid in left and b["status"] in ("done", "infrastructure_error"):
                if b["status"] != "done":
                    raise RuntimeError(f"{sid}: {b['status']} {b.get('error')}")
                t0 = dt.datetime.fromisoformat(b["received_at"].rstrip("Z"))
                t1 = dt.datetime.fromisoformat(b["finished_at"].rstrip("Z"))
                out[sid] = (t1 - t0).total_seconds()
                left.discard(sid)
        time.sleep(0.3)
    if left:
        raise RuntimeError(f"{len(left)} submissions not graded within {timeout} s")
    return out


def burst(c: httpx.Client, n: int) -> float:
    t0 = time.monotonic()
    ids = [submit(c, i) for i in range(n)]
    wait_all(c, ids, timeout=60 * n)
    return n / (time.monotonic() - t0)


def steady(c: httpx.Client, rate: float, seconds: float) -> list[float]:
    ids = []
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        ids.append(submit(c, 1000 + i))
        i += 1
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
    return list(wait_all(c, ids, timeout=600).values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burst", type=int, default=30, help="submissions per throughput phase")
    ap.add_argument("--load", type=float, default=0.6, help="steady rate as a fraction of the 2-worker throughput")
    ap.add_argument("--steady-s", type=float, default=60.0)
    ap.add_argument("--sleep", type=float, default=0.0,
                    help="seconds each submission sleeps at import: gradings that wait (a Docker sandbox starting) "
                         "rather than compute")
    args = ap.parse_args()
    global SLEEP
    SLEEP = args.sleep
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    from tests.service.cluster import NetHosts, PostgresCluster, RedisProc, WorkerProc
    from tests.service.support import Server, make_tokens

    env = {"GRADER_MAX_IN_FLIGHT": "0", "GRADER_RATE_PER_MINUTE": "0", "GRADER_QUEUE_MAX": "100000",
           "GRADER_HEARTBEAT_S": "1", "GRADER_RECONCILE_S": "2"}
    tmp = Path(tempfile.mkdtemp(prefix="bench-queue-"))
    net = NetHosts(2).create()
    pg = redis = server = None
    workers: list = []
    try:
        redis = RedisProc(net.host_ips, tmp / "redis").start()
        pg = PostgresCluster(net.host_ips, [f"10.213.{net.octet}.0/24"] if net.available else []).init()
        db = pg.create_db()
        tokens = make_tokens(tmp / "api", ("admin", "bench"), db=pg.url(db))
        server = Server(tmp / "api", env={"GRADER_DATABASE_URL": pg.url(db), "GRADER_BROKER_URL": redis.url(), **env})
        server.start()
        c = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens['bench']}"}, timeout=60)
        print(f"each submission sleeps {SLEEP:g} s at import; " if SLEEP else "", end="")
        print(f"machine: {os.cpu_count()} cores; workers in {'network namespaces' if net.available else 'loopback'}; "
              f"load before: {open('/proc/loadavg').read().split()[:3]}")

        def start_worker(i):
            where = net.address_for(i)
            w = WorkerProc(net, i, broker=redis.url(where), db=pg.url(db, where), data_dir=tmp / f"w{i}", env=env)
            workers.append(w.start())
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                alive = [x for x in c.get("/v1/workers").json()["workers"] if x["alive"]]
                if len(alive) >= len([x for x in workers if x.proc.poll() is None]):
                    return
                time.sleep(0.3)
            raise RuntimeError("worker did not come up:\n" + w.log()[-2000:])

        start_worker(0)
        burst(c, 4)                                   # warm up: grading processes start, imports cached
        one = burst(c, args.burst)
        print(f"1 worker : {one:.2f} submissions/s ({args.burst} submissions)")
        start_worker(1)
        burst(c, 4)
        two = burst(c, args.burst)
        print(f"2 workers: {two:.2f} submissions/s ({args.burst} submissions)")
        print(f"ratio 2/1: {two / one:.2f}")
        rate = two * args.load
        lat = steady(c, rate, args.steady_s)
        print(f"steady load {rate:.2f}/s for {args.steady_s:g} s with 2 workers ({len(lat)} submissions): submit to "
              f"report p50 {pct(lat, 50):.2f} s, p95 {pct(lat, 95):.2f} s, max {max(lat):.2f} s")
        print(f"load after: {open('/proc/loadavg').read().split()[:3]}")
        return 0
    finally:
        for w in workers:
            w.stop(timeout=30)
        if server is not None:
            server.stop()
        if redis is not None:
            redis.kill()
        if pg is not None:
            pg.destroy()
        net.delete()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


if __name__ == "__main__":
    sys.exit(main())
