"""Print the grader image's requirements, one per line: the project's dependencies from pyproject.toml without
torch (the host side never imports it; torch lives only in the sandbox image), plus the `postgres` extra.
Used by docker/grader.Dockerfile and docker/wheels.sh, so the list is never written down twice."""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
                         .joinpath("pyproject.toml").read_text()))["project"]
wanted = [r for r in project["dependencies"] if not r.replace(" ", "").lower().startswith("torch")]
wanted += project.get("optional-dependencies", {}).get("postgres", [])
# redis needs async-timeout on Python < 3.11.3, which Debian bookworm's python3 (3.11.2, the air-gapped base
# image's) is; the machine that downloads the wheels may run a newer Python whose resolution skips it.
wanted += ["async-timeout>=4.0.3"]
print("\n".join(wanted))
