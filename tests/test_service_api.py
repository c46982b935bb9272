"""The grading service over real HTTP: a `grade serve` subprocess on a loopback port (local sandbox), every
endpoint, every role boundary and every bad input the issue lists."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers import validate
from tests.service.support import Server, error_of, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
SLOW = "import time\ntime.sleep(4)\n" + REF


def mutant(bug: str, exercise: str = "mha", track: str = "numpy") -> str:
    import tempfile

    from graders.mutants.build import write_mutant

    with tempfile.TemporaryDirectory() as tmp:
        return write_mutant(Path(tmp), exercise, track, {bug}).read_text()


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("svc") / "data"
    tokens = make_tokens(data, ("admin", "boss"), ("interviewer", "ivy"), ("candidate", "alice"),
                         ("candidate", "bob"))
    server = Server(data, workers=2).start()
    server.tokens = tokens
    yield server
    server.stop()
    log = server.log()
    for secret in tokens.values():
        assert secret not in log, "a token appeared in the server's log"


@pytest.fixture(scope="module")
def graded(srv):
    """A few submissions graded once for the read-only tests."""
    ivy = srv.client(srv.tokens["ivy"])
    alice = srv.client(srv.tokens["alice"])
    out = {}
    r = submit(alice, "mha", WRONG, wait=60, filename="alice_mha.py")
    assert r.status_code == 200, r.text
    out["alice_wrong"] = r.json()
    r = submit(alice, "mha", mutant("no_max_subtraction"), wait=60)
    assert r.status_code == 200, r.text
    out["alice_hidden"] = r.json()
    r = submit(ivy, "mha", REF, wait=60, candidate="carol")
    assert r.status_code == 200, r.text
    out["carol_ref"] = r.json()
    return out


# -- health, docs ------------------------------------------------------------------------------------------
def test_health_ready_and_openapi(srv):
    c = srv.client()
    assert c.get("/healthz").json() == {"status": "ok"}
    r = c.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"
    assert set(r.json()["checks"]) == {"store", "sandbox", "workers"}
    spec = c.get("/openapi.json").json()
    for path in ("/v1/submissions", "/v1/submissions/{sub_id}", "/v1/submissions/{sub_id}/report",
                 "/v1/submissions/{sub_id}/report.html", "/v1/submissions/{sub_id}/regrade", "/v1/exercises",
                 "/v1/exercises/{name}", "/v1/exercises/{name}/stub", "/v1/exports/{fmt}", "/healthz", "/readyz",
                 "/metrics"):
        assert path in spec["paths"], path
    body = spec["paths"]["/v1/submissions"]["post"]["requestBody"]["content"]
    assert {"application/json", "multipart/form-data"} <= set(body)
    assert c.get("/docs").status_code == 200


# -- authentication and roles -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/v1/exercises", "/v1/submissions", "/v1/submissions/x", "/metrics",
                                  "/v1/tokens", "/v1/exports/csv"])
def test_no_token_is_401_with_a_json_body(srv, path):
    r = srv.client().get(path)
    assert r.status_code == 401
    assert error_of(r)["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


def test_bad_tokens_are_401(srv):
    for header in ("Bearer gr_nope", "Basic abc", "Bearer", "token"):
        r = srv.client().get("/v1/exercises", headers={"Authorization": header})
        assert r.status_code == 401, header
    r = srv.client().post("/v1/submissions", json={"exercise": "mha", "source": REF})
    assert r.status_code == 401
    assert len(store_rows(srv.data_dir)) == len(store_rows(srv.data_dir))


@pytest.mark.parametrize("who,method,path,body", [
    ("alice", "get", "/metrics", None),
    ("alice", "get", "/v1/tokens", None),
    ("ivy", "get", "/v1/tokens", None),
    ("ivy", "post", "/v1/tokens", {"role": "admin", "name": "x"}),
    ("alice", "get", "/v1/exports/csv", None),
    ("alice", "post", "/v1/submissions/000/regrade", None),
])
def test_wrong_role_is_403(srv, who, method, path, body):
    r = getattr(srv.client(srv.tokens[who]), method)(path, **({"json": body} if body else {}))
    assert r.status_code == 403, r.text
    assert error_of(r)["code"] == "forbidden"


def test_candidate_sees_only_their_own_submissions(srv, graded):
    alice, bob = srv.client(srv.tokens["alice"]), srv.client(srv.tokens["bob"])
    mine = graded["alice_wrong"]["id"]
    assert alice.get(f"/v1/submissions/{mine}").status_code == 200
    for path in (f"/v1/submissions/{mine}", f"/v1/submissions/{mine}/report", f"/v1/submissions/{mine}/report.html"):
        r = bob.get(path)
        assert r.status_code == 404 and error_of(r)["code"] == "not_found", path
    theirs = graded["carol_ref"]["id"]
    assert alice.get(f"/v1/submissions/{theirs}").status_code == 404
    listed = alice.get("/v1/submissions", params={"candidate": "carol"}).json()["items"]
    assert listed and {s["candidate"] for s in listed} == {"alice"}
    assert bob.get("/v1/submissions").json()["items"] == []


def test_candidate_gets_the_candidate_view_of_reports(srv, graded):
    sid = graded["alice_hidden"]["id"]
    full = srv.client(srv.tokens["ivy"]).get(f"/v1/submissions/{sid}/report").json()
    validate(full)
    assert full["diagnosis"][0]["bug"] == "no_max_subtraction"
    hidden = [t for t in full["tests"] if t["visibility"] == "hidden" and t["status"] != "passed"]
    assert hidden, "the example should fail a hidden test"
    alice = srv.client(srv.tokens["alice"])
    for params in ({}, {"audience": "interviewer"}):
        seen = alice.get(f"/v1/submissions/{sid}/report", params=params).json()
        by_id = {t["id"]: t for t in seen["tests"]}
        for t in hidden:
            assert by_id[t["id"]]["diagnostics"] == {} and t["message"] not in json.dumps(seen)
        assert all(d["evidence"] == {} for d in seen["diagnosis"])
    page = alice.get(f"/v1/submissions/{sid}/report.html").text
    assert "audience candidate" in page
    assert hidden[0]["message"][:60] not in page
    as_candidate = srv.client(srv.tokens["ivy"]).get(f"/v1/submissions/{sid}/report",
                                                     params={"audience": "candidate"}).json()
    assert as_candidate == alice.get(f"/v1/submissions/{sid}/report").json()


def test_candidate_cannot_submit_for_someone_else_or_set_a_webhook(srv):
    alice = srv.client(srv.tokens["alice"])
    before = len(store_rows(srv.data_dir))
    r = submit(alice, "mha", REF, candidate="bob")
    assert r.status_code == 403 and error_of(r)["code"] == "forbidden"
    r = submit(alice, "mha", REF, callback_url="http://127.0.0.1:9/hook")
    assert r.status_code == 403 and "callback_url" in error_of(r)["message"]
    assert len(store_rows(srv.data_dir)) == before


def test_admin_manages_tokens_and_a_revoked_token_stops_working(srv):
    boss = srv.client(srv.tokens["boss"])
    r = boss.post("/v1/tokens", json={"role": "candidate", "name": "dave"})
    assert r.status_code == 201, r.text
    tok = r.json()
    assert tok["candidate"] == "dave" and tok["token"].startswith("gr_")
    listed = boss.get("/v1/tokens").json()
    assert all("token" not in t for t in listed) and tok["prefix"] in {t["prefix"] for t in listed}
    dave = srv.client(tok["token"])
    assert dave.get("/v1/exercises").status_code == 200
    assert boss.delete(f"/v1/tokens/{tok['id']}").status_code == 204
    assert dave.get("/v1/exercises").status_code == 401
    assert boss.delete(f"/v1/tokens/{tok['id']}").status_code == 404
    r = boss.post("/v1/tokens", json={"role": "wizard", "name": "x"})
    assert r.status_code == 422


def test_expired_tokens_are_refused(srv):
    from harness.service.server import open_store
    from harness.service.settings import Settings
    import datetime as dt

    store = open_store(Settings.resolve(srv.data_dir))
    secret, _ = store.create_token(role="interviewer", name="old", expires_at=dt.datetime(2000, 1, 1))
    store.dispose()
    assert srv.client(secret).get("/v1/exercises").status_code == 401


# -- exercises --------------------------------------------------------------------------------------------
def test_exercises_prompt_and_stubs(srv):
    c = srv.client(srv.tokens["alice"])
    names = [e["name"] for e in c.get("/v1/exercises").json()]
    assert set(names) == {"mha", "masked_mha", "cross_attention", "gqa", "kv_cache", "flash_attention",
                          "attention_cost"}
    cost = c.get("/v1/exercises/attention_cost").json()
    assert list(cost["tracks"]) == ["python"] and "params(d, h, bias=True)" in cost["tracks"]["python"]["signature"]
    stub = c.get("/v1/exercises/attention_cost/stub")  # no track: the exercise's own
    assert stub.status_code == 200 and "def kv_cache_bytes(" in stub.text
    assert 'filename="attention_cost_python.py"' in stub.headers["content-disposition"]
    r = c.get("/v1/exercises/attention_cost/stub", params={"track": "numpy"})
    assert r.status_code == 422 and "has no 'numpy' track; choose python" in error_of(r)["message"]
    flash = c.get("/v1/exercises/flash_attention").json()["tracks"]
    assert flash["torch"]["signature"] == flash["numpy"]["signature"] == (
        "flash_attention(Q, K, V, block_size=64, causal=False)")
    d = c.get("/v1/exercises/gqa").json()
    assert "gqa(X, Wq, Wk, Wv, Wo, h, g, mask=None)" == d["tracks"]["numpy"]["signature"]
    assert "GroupedQueryAttention" in d["tracks"]["torch"]["signature"] and len(d["prompt"]) > 200
    stub = c.get("/v1/exercises/mha/stub", params={"track": "torch"})
    assert stub.status_code == 200 and "class MultiHeadAttention" in stub.text
    assert stub.text == (ROOT / "exercises" / "mha" / "stub_torch.py").read_text()
    r = c.get("/v1/exercises/mah")
    assert r.status_code == 404 and "did you mean 'mha'" in error_of(r)["message"]
    r = c.get("/v1/exercises/mha/stub", params={"track": "numpi"})
    assert r.status_code == 422 and "did you mean 'numpy'" in error_of(r)["message"]


# -- grading ----------------------------------------------------------------------------------------------
def test_submit_json_wait_returns_the_report(srv, graded):
    s = graded["carol_ref"]
    assert s["status"] == "done" and s["verdict"] == "passed" and s["score"] == s["max_score"] > 0
    assert s["received_at"] <= s["started_at"] <= s["finished_at"]
    validate(s["report"])
    assert s["report"]["verdict"] == "passed"
    assert s["links"]["report"] == f"/v1/submissions/{s['id']}/report"


def test_submit_multipart_without_wait_is_202_then_done(srv):
    ivy = srv.client(srv.tokens["ivy"])
    r = ivy.post("/v1/submissions", files={"file": ("my_mha.py", WRONG.encode(), "text/x-python")},
                 data={"exercise": "mha", "track": "numpy", "candidate": "erin", "seed": "7"})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["status"] in ("queued", "running") and r.headers["location"] == body["links"]["self"]
    assert body["filename"] == "my_mha.py" and body["seed"] == 7
    done = wait_done(ivy, body["id"])
    assert done["verdict"] == "failed"
    rep = ivy.get(f"/v1/submissions/{body['id']}/report").json()
    assert rep["environment"]["seed"] == 7 and rep["submission"]["path"] == "my_mha.py"


def test_report_before_it_is_ready_is_409(srv):
    ivy = srv.client(srv.tokens["ivy"])
    r = submit(ivy, "mha", SLOW)
    assert r.status_code == 202
    sid = r.json()["id"]
    r = ivy.get(f"/v1/submissions/{sid}/report")
    assert r.status_code == 409 and error_of(r)["code"] == "not_ready" and "retry-after" in r.headers
    assert wait_done(ivy, sid)["verdict"] == "passed"


def test_report_html_has_plots_source_and_a_csp(srv, graded):
    ivy = srv.client(srv.tokens["ivy"])
    r = ivy.get(f"/v1/submissions/{graded['alice_wrong']['id']}/report.html")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.text.count("data:image/png") >= 2, "the plots from the stored .npz are missing"
    assert "1/sqrt(d)" in r.text or "scale_sqrt_d" in r.text
    assert "The submission source is not available" not in r.text


def test_idempotency_key_returns_the_same_submission(srv):
    ivy = srv.client(srv.tokens["ivy"])
    h = {"Idempotency-Key": "k-123"}
    a = ivy.post("/v1/submissions", json={"exercise": "mha", "source": REF, "candidate": "zed"}, headers=h)
    b = ivy.post("/v1/submissions", json={"exercise": "mha", "source": REF, "candidate": "zed"}, headers=h)
    assert a.status_code == 202 and b.status_code == 200 and a.json()["id"] == b.json()["id"]
    c = ivy.post("/v1/submissions", json={"exercise": "mha", "source": WRONG}, headers=h)
    assert c.status_code == 409 and error_of(c)["code"] == "idempotency_conflict"
    assert sum(r["idempotency_key"] == "k-123" for r in store_rows(srv.data_dir)) == 1
    # another token's key space is its own
    d = srv.client(srv.tokens["boss"]).post("/v1/submissions", json={"exercise": "mha", "source": REF},
                                            headers=h)
    assert d.status_code == 202 and d.json()["id"] != a.json()["id"]
    wait_done(ivy, a.json()["id"])
    wait_done(ivy, d.json()["id"])


def test_regrade_replaces_the_report_with_exactly_one(srv, graded):
    ivy = srv.client(srv.tokens["ivy"])
    sid = graded["carol_ref"]["id"]
    r = ivy.post(f"/v1/submissions/{sid}/regrade")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    done = wait_done(ivy, sid)
    assert done["verdict"] == "passed"
    row = next(r for r in store_rows(srv.data_dir) if r["id"] == sid)
    assert row["reports_written"] == 1 and row["attempts"] == 1
    assert ivy.post("/v1/submissions/nope/regrade").status_code == 404


def test_listing_filters_and_cursor(srv, graded):
    ivy = srv.client(srv.tokens["ivy"])
    failed = ivy.get("/v1/submissions", params={"verdict": "failed"}).json()["items"]
    assert failed and all(s["verdict"] == "failed" for s in failed)
    carol = ivy.get("/v1/submissions", params={"candidate": "carol", "exercise": "mha"}).json()["items"]
    assert [s["id"] for s in carol] == [graded["carol_ref"]["id"]]
    assert ivy.get("/v1/submissions", params={"since": "2999-01-01T00:00:00Z"}).json()["items"] == []
    seen, cursor = [], None
    while True:
        page = ivy.get("/v1/submissions", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    all_ids = [r["id"] for r in reversed(store_rows(srv.data_dir))]
    assert seen == all_ids
    for bad in ({"since": "yesterday"}, {"limit": 0}, {"limit": 1000}, {"cursor": "abc"}, {"verdict": "great"}):
        r = ivy.get("/v1/submissions", params=bad)
        assert r.status_code == 422 and error_of(r)["code"] == "invalid", bad


def test_exports(srv, graded):
    ivy = srv.client(srv.tokens["ivy"])
    ids = ",".join([graded["alice_wrong"]["id"], graded["carol_ref"]["id"]])
    xml = ivy.get("/v1/exports/junit", params={"ids": ids})
    assert xml.status_code == 200
    root = ET.fromstring(xml.content)
    assert len(root.findall("testsuite")) == 2 and int(root.get("failures")) > 0
    gs = ivy.get("/v1/exports/gradescope", params={"ids": ids}).json()
    assert set(gs) == set(ids.split(",")) and gs[graded["carol_ref"]["id"]]["score"] > 0
    rows = list(csv.DictReader(io.StringIO(ivy.get("/v1/exports/csv", params={"candidate": "alice"}).text)))
    assert rows and {r["candidate"] for r in rows} == {"alice"}
    assert "scale_sqrt_d" in {r["diagnosis"] for r in rows}
    assert ivy.get("/v1/exports/pdf").status_code == 404


def test_metrics(srv, graded):
    text = srv.client(srv.tokens["ivy"]).get("/metrics").text
    for needle in ("grader_queue_depth ", "grader_in_flight ", 'grader_verdicts_total{exercise="mha",verdict="passed"}',
                   'grader_grading_seconds_bucket{exercise="mha",le="+Inf",sandbox="local",track="numpy"}',
                   "grader_grading_seconds_count", 'grader_rejections_total{reason='):
        assert needle in text, needle


def test_the_python_track_is_graded_like_any_other(srv):
    """attention_cost: detected, graded in a warm python worker, its mistake named; a track the exercise
    does not offer is a 422 at intake."""
    ivy = srv.client(srv.tokens["ivy"])
    r = submit(ivy, "attention_cost", mutant("cost_kv_no_factor_two", "attention_cost", "python"), wait=60)
    assert r.status_code == 200, r.text
    s = r.json()
    assert s["track"] == "python" and s["verdict"] == "failed" and 0 < s["score"] < s["max_score"]
    validate(s["report"])
    assert [d["bug"] for d in s["report"]["diagnosis"]] == ["cost_kv_no_factor_two"]
    r = ivy.post("/v1/submissions", json={"exercise": "attention_cost", "source": REF, "track": "numpy"})
    assert r.status_code == 422 and "has no 'numpy' track" in error_of(r)["message"]


# -- bad input: a clear 4xx, a JSON body, nothing stored -------------------------------------------------------
BAD = [
    ("unknown exercise", {"json": {"exercise": "mah", "source": REF}}, 422, "did you mean 'mha'"),
    ("unknown track", {"json": {"exercise": "mha", "source": REF, "track": "pytorch"}}, 422, "did you mean"),
    ("binary source", {"json": {"exercise": "mha", "source": "abc\x00def"}}, 422, "binary"),
    ("non-UTF-8 file", {"files": {"file": ("x.py", b"caf\xe9 = 1\n")}, "data": {"exercise": "mha"}}, 422, "UTF-8"),
    ("source over 1 MB", {"json": {"exercise": "mha", "source": "#" * 1_000_001}}, 413, "1 MB"),
    ("body over the limit", {"content": b"x" * (3 * 1024 * 1024), "headers": {"Content-Type": "application/json"}},
     413, "1 MB"),
    ("file over 1 MB", {"files": {"file": ("x.py", b"#" * 1_200_000)}, "data": {"exercise": "mha"}}, 413, "1 MB"),
    ("not JSON", {"content": b"{nope", "headers": {"Content-Type": "application/json"}}, 422, "JSON"),
    ("no source", {"json": {"exercise": "mha"}}, 422, "source"),
    ("unknown field", {"json": {"exercise": "mha", "source": REF, "colour": "red"}}, 422, "colour"),
    ("negative seed", {"json": {"exercise": "mha", "source": REF, "seed": -1}}, 422, "seed"),
    ("no file field", {"files": {"other": ("x.py", b"x")}, "data": {"exercise": "mha"}}, 422, "file"),
    ("plain text body", {"content": b"hello", "headers": {"Content-Type": "text/plain"}}, 415, "multipart"),
    ("ftp callback", {"json": {"exercise": "mha", "source": REF, "callback_url": "ftp://127.0.0.1/x"}}, 422, "http"),
    ("wait too long", {"json": {"exercise": "mha", "source": REF}, "params": {"wait": 61}}, 422, "wait"),
]


@pytest.mark.parametrize("what,kw,status,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_clear_4xx_and_nothing_is_stored(srv, what, kw, status, needle):
    ivy = srv.client(srv.tokens["ivy"])
    before = len(store_rows(srv.data_dir))
    r = ivy.post("/v1/submissions", **kw)
    assert r.status_code == status, r.text
    assert needle.lower() in error_of(r)["message"].lower()
    assert len(store_rows(srv.data_dir)) == before
