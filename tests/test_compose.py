"""docker-compose.yml end to end: the grader image built as an air-gapped host would, grading through compose."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.matrix   # a deployment's long run (an image build, a stack up and down): CI's matrix group
def test_compose_builds_the_grader_image_and_grades_through_it():
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(ROOT / ".ci" / "compose-smoke.sh")], capture_output=True, text=True,
                          timeout=1800, env=env)
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-2000:]
    assert "compose smoke: OK" in done.stdout
