"""Small helpers shared by the project's tests."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema

from harness.core.report import load_schema

NUMPY_HEADER = "import numpy as np\n\n"


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def validate(report) -> dict:
    """Validate a Report (or its dict / JSON text) against the shipped JSON Schema; return the dict."""
    data = report
    if hasattr(report, "to_json"):
        data = json.loads(report.to_json())
    elif isinstance(report, (str, bytes)):
        data = json.loads(report)
    jsonschema.validate(data, load_schema())
    return data


def statuses(report) -> dict[str, str]:
    return {t.id: t.status for t in report.tests}


def descendants(pids: set[int]) -> set[int]:
    """Every live process below ``pids`` (their sandbox workers included), from /proc."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = set(), set(pids)
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found
