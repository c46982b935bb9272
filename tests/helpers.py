"""Small helpers shared by the project's tests."""

from __future__ import annotations

import json
import os
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


def worker_facts_line(handle, timeout: float = 30.0) -> str:
    """The rest of the line after ``FACTS`` that a started worker's submission printed on its stderr."""
    import select
    import time

    deadline, seen = time.monotonic() + timeout, b""
    fd = handle.proc.stderr.fileno()
    while b"FACTS" not in seen or not seen.split(b"FACTS", 1)[1].count(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        assert chunk, f"no facts from the worker: {seen[-500:]!r}"
        seen += chunk
    return seen.split(b"FACTS", 1)[1].split(b"\n", 1)[0].decode()


def namespaced_worker_facts(tmp_path: Path, submission: str) -> str:
    """The FACTS line a local worker in its mount namespace prints while it imports ``submission`` (no mount
    namespace: skipped, but failed in CI, whose machine must allow it)."""
    import pytest

    from harness.sandbox import Limits
    from harness.sandbox.local import LocalSandbox, mount_isolation

    if not mount_isolation():
        if os.environ.get("CI") == "true":
            pytest.fail("CI's machine must allow the mount namespace")
        pytest.skip("no mount namespace here: the worker is executed directly")
    handle = LocalSandbox().start(track="numpy", entry="mha", submission=write(tmp_path, "sub.py", submission),
                                  limits=Limits())
    try:
        return worker_facts_line(handle)
    finally:
        handle.kill()
        handle.cleanup()
