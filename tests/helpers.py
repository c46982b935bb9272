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
