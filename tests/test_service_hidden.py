"""What the local sandbox hides is worked out for every worker start, not once per process: a top-level folder
made while `grade serve` runs (after its grading process has a warm zygote) is hidden from the next worker."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import pytest

from tests.service.support import Server, make_tokens, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
# The reference, plus a look for the folder: whatever it finds ends up in the report (an exception's message).
LOOK = '''
import os as _os

def _look(folder):
    try:
        return sorted(_os.listdir(folder)), open(_os.path.join(folder, "secret.txt")).read()
    except OSError:
        return None

_SEEN = _look(@@FOLDER@@)
if _SEEN is not None:
    raise RuntimeError("the worker sees " + repr(_SEEN))
'''


def _need_root_and_namespaces() -> None:
    from harness.sandbox import local

    why = "not root (a top-level folder cannot be made)" if os.geteuid() != 0 else \
        "" if local.mount_isolation() else "no mount-namespace isolation (the local backend hides nothing)"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run this test: {why}")
        pytest.skip(f"{why}; never skipped when CI=true")


def _grade(client, source: str) -> tuple[dict, dict]:
    r = submit(client, "mha", source)
    assert r.status_code == 202, r.text[:2000]
    body = wait_done(client, r.json()["id"])
    report = client.get(f"/v1/submissions/{body['id']}/report")
    assert report.status_code == 200, report.text[:2000]
    return body, report.json()


def test_a_folder_made_while_grade_serve_runs_is_hidden_from_its_workers(tmp_path):
    _need_root_and_namespaces()
    data = tmp_path / "data"
    tokens = make_tokens(data, ("candidate", "alice"))
    server = Server(data, workers=1).start()
    folder = Path("/") / f"attn-late-{secrets.token_hex(6)}"
    secret = "late-secret-" + secrets.token_hex(8)
    try:
        alice = server.client(tokens["alice"])
        look = LOOK.replace("@@FOLDER@@", repr(str(folder))) + REF
        first, _ = _grade(alice, look)
        assert first["verdict"] == "passed", first
        # the grading process is warm now (its zygote hid what / held then); a folder appears
        folder.mkdir()
        (folder / "secret.txt").write_text(secret)
        body, report = _grade(alice, look)
        leaked = secret in json.dumps(report)
        assert not leaked, "a worker read a folder made after `grade serve` started"
        assert body["verdict"] == "passed", json.dumps(report["tests"][:2])[:2000]
        assert report["environment"]["warm"] is True
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        server.stop()
