"""What a service grade cannot drop, against issue 27's throughput target (`bench_service.py`: >= 18 graded/s on
this machine's cores, i.e. at most cores / 18 s of machine CPU per submission, everything included).

Grades `bench_service.py`'s mix (mha: the correct reference and a wrong file in turn, NumPy) the way a grading
process of `grade serve` does (`harness.grading.process.grade_task`: kept suites, a warm worker from the local
zygote, a fresh seed per submission, no answer kept), one at a time, and measures per submission:

- the candidate's own calls, in its worker (the report's ``candidate_calls_s``: our reference's compute, which a
  real candidate's file does too);
- the host's float64 oracle for the same cases (``graders/common/oracle.py`` ``forward``, CPU of the calling
  thread), which a fresh seed makes new for every submission and no case may be dropped (the issue's own rule);
- the cases' random inputs (``graders/common/shapes.py`` ``build`` and ``harness/core/case.py`` ``random_case``);
- the named-bug diagnosis of the wrong files (``graders/mutants/diagnose.py``, averaged over both files);
- and the grading process's whole CPU, for scale.

The sum of the first four is a floor for what a faster grader could still not remove (short of dropping cases,
reusing seeds or the diagnosis); the API's own CPU per submission (HTTP, the store: `cpu_split.py`) comes on top.

    python benchmarks/service_floor.py [--grades 40]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # as a grading process runs
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Exclusive:
    """CPU time of the calling thread charged to the innermost wrapped function running (a nested call's time is
    its own, not its caller's too)."""

    def __init__(self):
        self.spent: collections.Counter = collections.Counter()
        self.stack: list[str] = []
        self.mark = 0.0

    def wrap(self, original, key: str):
        def wrapper(*args, **kwargs):
            now = time.thread_time()
            if self.stack:
                self.spent[self.stack[-1]] += now - self.mark
            self.stack.append(key)
            self.mark = now
            try:
                return original(*args, **kwargs)
            finally:
                now = time.thread_time()
                self.spent[self.stack.pop()] += now - self.mark
                self.mark = now
        return wrapper

    def everywhere(self, original, key: str) -> None:
        """Replace ``original`` wherever a loaded module of ours holds it (``from x import f`` copies included)."""
        wrapper = self.wrap(original, key)
        for name, module in list(sys.modules.items()):
            if name.split(".")[0] in ("graders", "harness"):
                for attr, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attr, wrapper)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grades", type=int, default=40)
    opts = parser.parse_args()

    from graders.common import oracle, shapes
    from graders.mutants import diagnose
    from harness.core import case
    from harness.grading import kept_suites
    from harness.grading.process import grade_task

    kept_suites.keep()
    clock = Exclusive()
    folder = Path(tempfile.mkdtemp(prefix="service-floor-"))
    files = []
    for i, source in enumerate((ROOT / "reference" / "mha_numpy.py", ROOT / "examples" / "mha_wrong_scale.py")):
        files.append(folder / f"submission{i}.py")
        shutil.copy(source, files[-1])

    def task(i: int) -> dict:
        return {"exercise": "mha", "path": str(files[i % 2]), "track": "numpy", "sandbox": "local",
                "seed": random.randrange(2 ** 31), "warm": True, "answers_on_disk": False, "keep_answers": False,
                "keep_artifacts": True}

    try:
        for i in range(6):   # the warm pool, the kept suites, first-use caches (and every module loaded)
            grade_task(task(i))
        for original, key in ((oracle.forward, "oracle"), (shapes.build, "cases"), (case.random_case, "cases"),
                              (diagnose.diagnose, "diagnosis")):
            clock.everywhere(original, key)
        spent = clock.spent
        calls, cpu0 = 0.0, time.process_time()
        for i in range(opts.grades):
            answer = grade_task(task(i))
            calls += answer["report"]["timings"]["candidate_calls_s"]
        n = opts.grades
        host = (time.process_time() - cpu0) / n
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    rows = {"candidate's calls (worker)": calls / n,
            "oracle (host; the diagnosis's mutants too)": spent["oracle"] / n,
            "cases' inputs (host)": spent["cases"] / n,
            "diagnosis (host, its oracle calls apart)": spent["diagnosis"] / n}
    floor = sum(rows.values())
    cores = os.cpu_count() or 1
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {n} grades, mha NumPy, correct and wrong "
          f"in turn, fresh seeds")
    for name, value in rows.items():
        print(f"  {name:<46} {value * 1000:7.1f} ms")
    print(f"  {'sum: what no faster grader removes':<46} {floor * 1000:7.1f} ms  (the API's own CPU comes on top)")
    print(f"  {'the grading process, all of it, for scale':<46} {host * 1000:7.1f} ms")
    print(f"{cores} cores / 18 graded/s = {cores / 18 * 1000:.0f} ms of machine CPU per submission allowed; "
          f"the floor alone allows {cores / floor:.1f} graded/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
