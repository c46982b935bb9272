"""Property-based run of schemathesis against the server's own /openapi.json (real HTTP on loopback): no 5xx,
every status code, content type, header and body as documented. Seeded, bounded (--max-examples).

Depth (issue 24: at full depth each role took five minutes, most of it schemathesis's coverage phase, which
sends the boundary values of every parameter of every operation whatever --max-examples says): the default run
fuzzes every operation as the admin with a few examples (4), without the coverage phase; the matrix group (CI) both
roles with the full number, and the admin's with the coverage phase (the admin reaches every operation; to the
candidate most answer 403)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.service.support import Server, make_tokens

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "response_headers_conformance")


# the default run: the admin's quick run (the admin reaches every operation); the matrix group: both roles in full
RUNS = [pytest.param("admin", "quick"), pytest.param("admin", "full", marks=pytest.mark.matrix),
        pytest.param("candidate", "full", marks=pytest.mark.matrix)]


def depth_args(role: str, depth: str) -> list[str]:
    examples = ["--max-examples", "40" if depth == "full" else "4"]
    coverage = role == "admin" and depth == "full"
    return examples + ([] if coverage else ["--phases", "examples,fuzzing,stateful"])


@pytest.mark.slow
@pytest.mark.parametrize("role,depth", RUNS)
def test_openapi_schema_holds_under_generated_requests(tmp_path, role, depth):
    data = tmp_path / "data"
    tokens = make_tokens(data, (role, "st"))
    server = Server(data, workers=1, env={"GRADER_RATE_PER_MINUTE": "0", "GRADER_MAX_IN_FLIGHT": "0"}).start()
    try:
        r = subprocess.run([sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())", "run", f"{server.url}/openapi.json",
                            "-H", f"Authorization: Bearer {tokens['st']}", "--checks", CHECKS,
                            *depth_args(role, depth), "--seed", "11", "--workers", "1", "--no-color"],
                           capture_output=True, text=True, timeout=900, cwd=tmp_path,
                           env={**os.environ, "SCHEMATHESIS_HOOKS": "", "PYTHONWARNINGS": "ignore"})
        tail = r.stdout[-6000:]
        assert r.returncode == 0, tail
        assert " passed" in tail and "generated" in tail
        assert "Traceback" not in server.log(), server.log()[-4000:]
    finally:
        server.stop()
