"""A bounded load run on loopback (benchmarks/bench_service.py): no 5xx, every submission graded."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.matrix  # a load run: CI's second invocation (README "Tests")
def test_bounded_load_has_no_5xx_and_grades_everything():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_service.py"), "--submissions", "60",
                        "--clients", "12", "--max-seconds", "600"], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "; 5xx: 0" in r.stdout and "60 submissions from 12 clients" in r.stdout
    # the whole machine's CPU per submission (the killed sandbox workers' too) and the throughput it allows
    line = next(x for x in r.stdout.splitlines() if x.startswith("machine CPU per graded submission: "))
    assert int(line.split(": ", 1)[1].split(" ms", 1)[0]) > 0 and "graded/s at that cost" in line
