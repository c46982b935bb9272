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


def test_air_gapped_wheel_list_has_torch_and_every_grader_image_dependency():
    line = next(ln for ln in README.splitlines() if "pip download" in ln and ".wheels" in ln)
    assert "torch==2.13.0" in line and " numpy" in line  # the sandbox image installs them from /wheels
    dockerfile = (ROOT / "docker" / "grader.Dockerfile").read_text()
    install = next(ln for ln in dockerfile.splitlines() if "pip install -q $idx \"" in ln)
    for requirement in re.findall(r'"([A-Za-z][\w-]*)[><=]', install):
        assert re.search(rf"\b{requirement}\b", line), f"{requirement} is missing from the README's wheel list"


def test_compose_instructions_create_the_folders_and_cover_compose_v1_and_v2():
    section = README[README.index("### The grader in a container"):]
    section = section[:section.index("\n## ")]
    assert "mkdir -p submissions reports" in section
    assert section.index("mkdir -p submissions") < section.index("docker compose run --rm grade")
    assert "docker compose build" in section and "docker-compose build" in section
    assert "v1" in section and "v2" in section
