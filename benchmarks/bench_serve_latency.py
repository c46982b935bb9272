"""Submit-to-report time of one correct submission through an idle `grade serve` (warm workers), against the
import floors measured in the same run: targets torch <= 0.25x `python -c "import torch"`, NumPy <= 0.5x
`python -c "import numpy, pytest"` (issue 27; issue 13's were 0.35x and 1.0x). The load average is printed
before and after: on a shared machine other processes' load inflates every wall time.

Each submission is one POST /v1/submissions?wait=60 (the server answers when the report is ready), one client,
after two warm-up submissions per track (the grading process's warm pool fills on first use).

    python benchmarks/bench_serve_latency.py [--repeat 7] [--sandbox local|docker]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FLOORS = {"numpy": [sys.executable, "-c", "import numpy, pytest"], "torch": [sys.executable, "-c", "import torch"]}
TARGETS = {"numpy": 0.5, "torch": 0.25}


def floor(cmd: list[str], repeat: int) -> float:
    subprocess.run(cmd, check=True)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def submit(client: httpx.Client, url: str, token: str, track: str) -> float:
    source = (ROOT / "reference" / f"mha_{track}.py").read_text()
    t = time.perf_counter()
    r = client.post(f"{url}/v1/submissions?wait=60", headers={"Authorization": f"Bearer {token}"},
                    json={"exercise": "mha", "track": track, "source": source, "candidate": "bench"})
    took = time.perf_counter() - t
    body = r.json()
    if r.status_code != 200 or body.get("verdict") != "passed":
        raise SystemExit(f"unexpected answer {r.status_code}: {str(body)[:300]}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sandbox", default="local", choices=("local", "docker"))
    args = ap.parse_args()
    from tests.service.support import Server, make_tokens

    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        data = Path(tmp) / "data"
        tokens = make_tokens(data, ("interviewer", "bench"))
        server = Server(data, workers=1, sandbox=args.sandbox,
                        env={"GRADER_MAX_IN_FLIGHT": "0", "GRADER_RATE_PER_MINUTE": "0"}).start()
        rows = []
        try:
            with httpx.Client(timeout=120) as client:
                for track in ("numpy", "torch"):
                    for _ in range(2):
                        submit(client, server.url, tokens["bench"], track)
                    times = [submit(client, server.url, tokens["bench"], track) for _ in range(args.repeat)]
                    rows.append((track, statistics.median(times)))
        finally:
            server.stop()
    print(f"grade serve ({args.sandbox} sandbox, warm workers), one correct MHA submission, median of {args.repeat}")
    for track, took in rows:
        base = floor(FLOORS[track], args.repeat)
        ratio = took / base
        print(f"{track:6} {took:6.3f} s   floor {base:6.3f} s   ratio {ratio:4.2f}x   target <= {TARGETS[track]}x "
              f"{'ok' if ratio <= TARGETS[track] else 'MISSED'}")
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
