"""The host's BLAS on one thread while it grades (harness/core/blas.py): limited inside a grade and restored after
for a library caller; set from the start, for free, in a process of ours (the CLI's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.core import blas

SCRIPT = """
import json, os
from harness.core import blas
if {start}:
    blas.from_the_start()
import numpy as np
from threadpoolctl import threadpool_info
from harness.grading.engine import grade
def threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
seen = {{"before": threads()}}
with blas.one_thread():
    seen["inside"] = threads()
seen["after"] = threads()
report = grade(exercise="mha", submission={ref!r}, track="numpy", sandbox="local")
seen["after_grade"] = threads()
seen["verdict"] = report.verdict
seen["env"] = os.environ.get("OPENBLAS_NUM_THREADS")
print(json.dumps(seen))
"""
FIRST_GRADE = """
import json, sys
from harness.grading.engine import grade
assert "numpy" not in sys.modules   # a library caller whose first grade is what loads NumPy (and its BLAS)
during = []
def blas_threads():
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
def progress(index, total, test_id):
    if test_id:
        during.append(blas_threads())
report = grade(exercise="mha", submission={ref!r}, track="numpy", sandbox="local", progress=progress)
print(json.dumps({{"during": during, "after": blas_threads(), "verdict": report.verdict}}))
"""
REF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference", "mha_numpy.py")


def _run(start: bool, script: str = SCRIPT) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in blas.THREAD_VARS}
    if not start:
        env["OPENBLAS_NUM_THREADS"] = "2"   # the library caller's own setting, which a grade must give back
    done = subprocess.run([sys.executable, "-c", script.format(start=start, ref=REF)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_library_callers_blas_is_limited_inside_a_grade_and_restored_after():
    seen = _run(start=False)
    assert seen["before"] and all(n == 2 for n in seen["before"]), seen   # the caller's own setting
    assert all(n == 1 for n in seen["inside"]), seen
    assert seen["after"] == seen["after_grade"] == seen["before"], seen
    assert seen["verdict"] == "passed"


def test_a_library_callers_first_grade_limits_the_blas_it_loads():
    """The grade that first imports NumPy: its BLAS is limited from its first test on (a controller made before
    NumPy was loaded found no library and, kept, limited nothing in any later grade either)."""
    seen = _run(start=False, script=FIRST_GRADE)
    assert len(seen["during"]) == 33 and all(n == [1] for n in seen["during"]), seen
    assert seen["after"] == [2] and seen["verdict"] == "passed", seen


def test_a_process_of_ours_starts_with_one_blas_thread():
    seen = _run(start=True)
    assert seen["env"] == "1" and all(n == 1 for n in seen["before"] + seen["after_grade"]), seen
    assert seen["verdict"] == "passed"
