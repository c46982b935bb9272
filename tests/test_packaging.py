"""A plain `pip install .` (a wheel) must carry everything `grade` reads at run time."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.core.exercises import all_exercises

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_the_data_files(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("attention_grader-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    needed = {"harness/core/schema/report.schema.json", "harness/sandbox/sandbox.Dockerfile", "harness/worker/worker.py",
              "harness/worker/wire.py", "graders/suite.ini", "graders/common/oracle.py", "graders/mutants/torch_template.py",
              "harness/sandbox/mount_setup.py", "harness/sandbox/mount_probe.py", "harness/sandbox/limits_probe.py",
              "harness/service/store/migrations/env.py", "harness/service/store/migrations/script.py.mako",
              "harness/service/store/migrations/versions/0001_initial.py",
              "harness/service/pages/templates/base.html", "harness/service/pages/templates/list.html",
              "gradekit/runner.py", "gradekit/cli.py"}
    for name, ex in all_exercises().items():
        needed |= {f"exercises/{name}/exercise.json", f"exercises/{name}/README.md", f"exercises/{name}/interviewer.md"}
        needed |= {f for track in ex.tracks for f in (f"exercises/{name}/stub_{track}.py", f"reference/{name}_{track}.py")}
        assert any(n.startswith(f"graders/{name}/test_") for n in names), f"suite for {name} missing"
    assert needed <= names, sorted(needed - names)
    assert not any(n.startswith("tests/") for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert entry and "grade = harness.launch:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()
