"""Hostile and careless input over real HTTP (issue 23): every body, however deep, large, oddly typed or long in
any field, gets a 4xx with the JSON error body, never a 500; the size limit is stated the same way by the
OpenAPI document, the server and the file check; exports are downloads; /docs needs nothing from the network;
an empty file is refused and a missing entry point is reported as what it is."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from harness.core.exercises import all_exercises
from harness.grading.submission import LIMIT_TEXT, MAX_BYTES
from tests.service.support import Server, error_of, make_tokens, submit

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
DEEP = b"[" * 200_000 + b"]" * 200_000           # 400 KB, under the body limit
LONG = "x" * 100_000


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("hostile") / "data"
    tokens = make_tokens(data, ("admin", "boss"), ("candidate", "alice"))
    server = Server(data, workers=1, env={"GRADER_RATE_PER_MINUTE": "0", "GRADER_MAX_IN_FLIGHT": "0"}).start()
    server.tokens = tokens
    yield server
    server.stop()


def _is_4xx(r) -> dict:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    return error_of(r)


@pytest.mark.parametrize("path", ["/v1/submissions", "/v1/tokens", "/v1/submissions?wait=1"])
def test_deep_nesting_is_a_4xx_everywhere(srv, path):
    boss = srv.client(srv.tokens["boss"])
    err = _is_4xx(boss.post(path, content=DEEP, headers={"content-type": "application/json"}))
    assert err["status"] == 422
    nested = b'{"exercise": "mha", "source": "x", "candidate": ' + DEEP + b"}"
    _is_4xx(boss.post(path, content=nested, headers={"content-type": "application/json"}))


@pytest.mark.parametrize("body", [
    b'{"exercise": "mha", "source": "x=1", "seed": 1' + b"0" * 5000 + b"}",
    b'{"exercise": "mha", "source": "x=1", "seed": 1e999}',
    b'{"exercise": "mha", "source": "x=1", "seed": -1e308}',
    b'{"exercise": "mha", "source": "x=1", "seed": NaN}',
    b'{"role": "candidate", "name": "n", "expires_in_days": 1' + b"0" * 5000 + b"}",
])
def test_huge_numbers_are_a_4xx(srv, body):
    path = "/v1/tokens" if b"role" in body else "/v1/submissions"
    _is_4xx(srv.client(srv.tokens["boss"]).post(path, content=body, headers={"content-type": "application/json"}))
    _is_4xx(srv.client(srv.tokens["boss"]).get("/v1/submissions", params={"limit": "9" * 5000}))
    _is_4xx(srv.client(srv.tokens["boss"]).post("/v1/submissions", params={"wait": "1e999"},
                                                 json={"exercise": "mha", "source": "x=1"}))


@pytest.mark.parametrize("field", ["exercise", "track", "candidate", "filename", "callback_url", "queue", "seed"])
def test_long_strings_in_every_field_are_a_4xx(srv, field):
    boss = srv.client(srv.tokens["boss"])
    _is_4xx(boss.post("/v1/submissions", json={"exercise": "mha", "source": REF, field: LONG}))
    if field == "filename":   # multipart's file name is the upload's own (a part header that long is refused)
        _is_4xx(boss.post("/v1/submissions", files={"file": (LONG + ".py", REF.encode())}, data={"exercise": "mha"}))
    else:
        data = {"exercise": "mha", field: LONG}
        _is_4xx(boss.post("/v1/submissions", files={"file": ("x.py", REF.encode())}, data=data))
    _is_4xx(boss.post("/v1/tokens", json={"role": "candidate", "name": LONG if field == "exercise" else "n",
                                          field: LONG}))


@pytest.mark.parametrize("ctype,body", [
    ("text/plain", b"def mha(): pass"),
    ("application/xml", b"<submission/>"),
    ("", b'{"exercise": "mha", "source": "x=1"}'),
    ("application/json; charset=utf-16", '{"exercise": "mha", "source": [1]}'.encode("utf-16")),
    ("application/json", b'{"exercise": "mha", "source": "\xff\xfe"}'),
    ("application/json", b"\xef\xbb\xbf" + b'{"exercise": "mha"'),
    ("multipart/form-data", b"--x\r\nContent-Disposition: form-data; name=file\r\n\r\nabc\r\n--x--\r\n"),
    ("multipart/form-data; boundary=x", b"--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc"),
    ("application/x-www-form-urlencoded", b"exercise=mha&source=x%3D1"),
])
def test_odd_content_types_are_a_4xx(srv, ctype, body):
    headers = {"content-type": ctype} if ctype else {}
    _is_4xx(srv.client(srv.tokens["boss"]).post("/v1/submissions", content=body, headers=headers))


@pytest.mark.parametrize("source", ["", "   \n\t\n"])
def test_an_empty_source_is_refused(srv, source):
    boss = srv.client(srv.tokens["boss"])
    err = _is_4xx(boss.post("/v1/submissions", json={"exercise": "mha", "source": source}))
    assert err["status"] == 422 and "empty" in err["message"]
    err = _is_4xx(boss.post("/v1/submissions", files={"file": ("x.py", source.encode())}, data={"exercise": "mha"}))
    assert err["status"] == 422 and "empty" in err["message"]


def test_a_missing_entry_point_is_called_that(srv):
    boss = srv.client(srv.tokens["boss"])
    r = submit(boss, "mha", "import numpy as np\n\ndef attention(x):\n    return x\n", wait=60)
    assert r.status_code == 200, r.text
    report = boss.get(r.json()["links"]["report"]).json()
    messages = {t["message"] for t in report["tests"]}
    assert len(messages) == 1, messages
    (msg,) = messages
    assert msg.startswith("missing entry point: the file defines no 'mha'") and "attention" in msg
    assert "raised" not in msg


def test_the_size_limit_is_one_limit_stated_once(srv):
    boss = srv.client(srv.tokens["boss"])
    spec = boss.get("/openapi.json").json()
    post = spec["paths"]["/v1/submissions"]["post"]
    assert LIMIT_TEXT in post["responses"]["413"]["description"]
    assert LIMIT_TEXT in post["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"][
        "description"]
    over_file = boss.post("/v1/submissions", json={"exercise": "mha", "source": "#" * (MAX_BYTES + 1)})
    over_body = boss.post("/v1/submissions", content=b"#" * (2 * MAX_BYTES + 1),
                          headers={"content-type": "application/json"})
    at_limit = boss.post("/v1/submissions", json={"exercise": "mha", "source": "#" * (MAX_BYTES - 10) + "\nx=1\n"})
    assert at_limit.status_code == 202, at_limit.text
    for r in (over_file, over_body):
        err = _is_4xx(r)
        assert err["status"] == 413 and LIMIT_TEXT in err["message"], err
    assert LIMIT_TEXT in (ROOT / "docs" / "service.md").read_text().replace("\n", " ")


@pytest.mark.parametrize("fmt,ctype,name", [("junit", "application/xml", "submissions-junit.xml"),
                                            ("gradescope", "application/json", "submissions-gradescope.json"),
                                            ("csv", "text/csv", "submissions.csv")])
def test_every_export_is_a_download(srv, fmt, ctype, name):
    r = srv.client(srv.tokens["boss"]).get(f"/v1/exports/{fmt}")
    assert r.status_code == 200 and r.headers["content-type"].startswith(ctype)
    assert r.headers["content-disposition"] == f'attachment; filename="{name}"'


def test_docs_are_served_from_this_server(srv):
    r = srv.client().get("/docs")
    assert r.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", r.text) + re.findall(r"url: *'([^']+)'", r.text)
    assert urls and all(u.startswith("/") for u in urls), urls        # nothing from a CDN
    for u in urls:
        assert srv.client().get(u).status_code == 200, u
    csp = r.headers["content-security-policy"]
    assert "http" not in csp and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]


def test_descriptions_list_every_exercise_of_the_registry(srv):
    names = list(all_exercises())
    spec = srv.client().get("/openapi.json").json()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]
    from click.testing import CliRunner

    from harness.cli import main
    help_text = CliRunner().invoke(main, ["--help"]).output.replace("\n  ", " ")
    for text in (spec["info"]["description"], pyproject, help_text):
        assert all(n in text for n in names), (names, text)
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    assert all(p.name in layout for p in (ROOT / "docs").glob("*.md"))


def test_an_unchanged_stub_is_refused_with_what_to_do(srv):
    boss = srv.client(srv.tokens["boss"])
    for track in ("numpy", "torch"):
        stub = (ROOT / "exercises" / "gqa" / f"stub_{track}.py").read_text()
        err = _is_4xx(boss.post("/v1/submissions", json={"exercise": "gqa", "source": stub + "\n\n"}))
        assert err["code"] == "unchanged_stub" and f"unchanged gqa stub ({track} track)" in err["message"]
    spec = boss.get("/openapi.json").json()     # /docs can authorise: the bearer scheme is declared
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert spec["paths"]["/v1/submissions"]["post"]["security"] == [{"bearer": []}]
    assert "security" not in spec["paths"]["/healthz"]["get"]


def test_prompt_markdown_is_sanitised():
    from harness.service.pages.markdown import to_html

    hostile = ("# T\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1)) ![i](x onerror=alert(1))\n\n"
               '<img src=x onerror="alert(1)"> <a href="https://e.org" onclick="x()">e</a>\n\n| a |\n|---|\n| `b` |\n')
    html = to_html(hostile, shift=1)
    tags = re.findall(r"<[^>]*>", html)                  # what the browser would parse as markup
    assert tags and not any(re.search(r"\bon\w+=|javascript:|<(script|img|style|iframe)", t) for t in tags), tags
    assert "&lt;script&gt;" in html                      # raw HTML in a prompt stays text
    assert "<h2>T</h2>" in html and "<table>" in html and "<code>b</code>" in html
