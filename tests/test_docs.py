"""The setup instructions a new user follows: the files they name exist, the commands list what they need."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCKER_FILES = [ROOT / "docker" / "grader.Dockerfile", ROOT / "docker-compose.yml", ROOT / "README.md"]


def test_every_ci_script_named_in_the_docker_setup_exists():
    for f in DOCKER_FILES:
        for name in re.findall(r"\.ci/[\w./-]+\w", f.read_text()):
            assert (ROOT / name).exists(), f"{f.name} names {name}, which does not exist"


def test_air_gapped_wheels_cover_torch_and_every_grader_image_dependency():
    """The README's air-gapped step is docker/wheels.sh, which downloads the sandbox image's torch and numpy
    and the grader image's requirements, derived from pyproject.toml like the Dockerfile's (one list)."""
    import subprocess
    import sys

    assert "bash docker/wheels.sh .wheels" in README
    script = (ROOT / "docker" / "wheels.sh").read_text()
    assert '"torch==2.13.0" numpy' in script and "constraints.txt" in script and "requirements.py" in script
    assert "docker/requirements.py" in (ROOT / "docker" / "grader.Dockerfile").read_text()
    reqs = subprocess.run([sys.executable, str(ROOT / "docker" / "requirements.py"), str(ROOT)], check=True,
                          capture_output=True, text=True).stdout.split()
    names = {re.split(r"[<>=\[]", r)[0].lower() for r in reqs}
    assert "torch" not in names and {"numpy", "click", "pytest", "docker", "fastapi", "psycopg"} <= names


def test_compose_instructions_create_the_folders_and_cover_compose_v1_and_v2():
    section = README[README.index("### The grader in a container"):]
    section = section[:section.index("\n## ")]
    assert "mkdir -p submissions reports" in section
    assert section.index("mkdir -p submissions") < section.index("docker compose run --rm grade")
    assert "docker compose build" in section and "docker-compose build" in section
    assert "v1" in section and "v2" in section
