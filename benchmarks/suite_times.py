"""Where the test suite's time goes (issue 24): runs `python -m pytest` (any extra arguments are passed on) with a
JUnit XML report, then prints the wall time, the seconds each test file took (summed over its tests: under
`--dist loadfile` a file's tests run on one worker, so one heavy file sets the suite's floor) and the slowest
tests. README "Tests" records the figures; run it on a quiet machine.

    CI=true python benchmarks/suite_times.py                 # the default suite
    CI=true python benchmarks/suite_times.py -m matrix       # the matrix group
    python benchmarks/suite_times.py --from junit.xml        # summarise a report written earlier
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def summarise(junit: Path, files: int = 15, tests: int = 10) -> str:
    per_file: dict[str, float] = collections.defaultdict(float)
    counts: collections.Counter = collections.Counter()
    cases = []
    for case in ET.parse(junit).iter("testcase"):
        path = case.get("classname", "").replace(".", "/")
        # classname is the module (tests.test_x) or the module and a class (tests.test_x.TestY)
        path = next((p for p in _prefixes(path) if Path(p + ".py").is_file()), path) + ".py"
        seconds = float(case.get("time") or 0)
        per_file[path] += seconds
        counts[path] += 1
        cases.append((seconds, f"{path}::{case.get('name')}"))
    lines = [f"{len(cases)} tests, {sum(per_file.values()):.0f} s of test time",
             "", f"the {files} heaviest files (seconds, tests):"]
    for path, seconds in sorted(per_file.items(), key=lambda kv: -kv[1])[:files]:
        lines.append(f"  {seconds:7.1f}  {counts[path]:4d}  {path}")
    lines += ["", f"the {tests} slowest tests:"]
    lines += [f"  {seconds:7.1f}  {name}" for seconds, name in sorted(cases, reverse=True)[:tests]]
    return "\n".join(lines)


def _prefixes(dotted_path: str):
    parts = dotted_path.split("/")
    for n in range(len(parts), 0, -1):
        yield "/".join(parts[:n])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="junit", type=Path, help="summarise this JUnit XML report instead of running")
    args, pytest_args = parser.parse_known_args()
    if args.junit:
        print(summarise(args.junit))
        return
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        start = time.monotonic()
        code = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={junit}", *pytest_args]).returncode
        wall = time.monotonic() - start
        print(f"\nwall time {wall:.0f} s ({wall / 60:.1f} min), pytest exit code {code}")
        if junit.is_file():
            print(summarise(junit))
    sys.exit(code)


if __name__ == "__main__":
    main()
