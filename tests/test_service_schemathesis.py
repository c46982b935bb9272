"""Property-based run of schemathesis against the server's own /openapi.json (real HTTP on loopback): no 5xx,
every status code, content type, header and body as documented. Seeded, bounded (--max-examples)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.service.support import Server, make_tokens

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "response_headers_conformance")


@pytest.mark.slow
@pytest.mark.parametrize("role", ["admin", "candidate"])
def test_openapi_schema_holds_under_generated_requests(tmp_path, role):
    data = tmp_path / "data"
    tokens = make_tokens(data, (role, "st"))
    server = Server(data, workers=1, env={"GRADER_RATE_PER_MINUTE": "0", "GRADER_MAX_IN_FLIGHT": "0"}).start()
    try:
        r = subprocess.run([sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())", "run", f"{server.url}/openapi.json",
                            "-H", f"Authorization: Bearer {tokens['st']}", "--checks", CHECKS,
                            "--max-examples", "40", "--seed", "11", "--workers", "1", "--no-color"],
                           capture_output=True, text=True, timeout=900, cwd=tmp_path,
                           env={**os.environ, "SCHEMATHESIS_HOOKS": "", "PYTHONWARNINGS": "ignore"})
        tail = r.stdout[-6000:]
        assert r.returncode == 0, tail
        assert " passed" in tail and "generated" in tail
        assert "Traceback" not in server.log(), server.log()[-4000:]
    finally:
        server.stop()
