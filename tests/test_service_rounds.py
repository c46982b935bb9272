"""Hiring rounds over real HTTP against a real `grade serve` (SQLite): an interviewer creates a round and
invites two candidates who share a display name; each signs in through their own single-use link; they see only
the round's exercises and the time left; neither reaches the other's submissions, reports or source; the
attempt limit, the track, the window and the close refuse with a 403 whose code names the limit, storing
nothing; `after_close` holds the verdict back until the close; resend and revoke; bulk CSV; staff tokens (the
last admin stays) with the one expiry form; the candidate filter is a case-insensitive substring; and the
server's log, for the whole module, holds none of the secrets it handed out."""

from __future__ import annotations

import csv
from html import escape
import io
import re
from pathlib import Path

import httpx
import pytest

from tests.service.rounds import join, page_submit
from tests.service.support import (FreshPostgres, Server, error_of, make_tokens, postgres_url_or_skip, store_rows,
                                   submit, wait_done)

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
TORCH_MHA = (ROOT / "reference" / "mha_torch.py").read_text()
SECRETS: list[str] = []          # every token, session id and invitation secret this module made


def _cluster_rows(url: str):
    from sqlalchemy import create_engine, text

    def rows() -> list[dict]:
        eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        with eng.connect() as c:
            out = [dict(r._mapping) for r in c.execute(text("SELECT * FROM submissions ORDER BY seq"))]
        eng.dispose()
        return out
    return rows


@pytest.fixture(scope="module", params=["serve", pytest.param("cluster", marks=[pytest.mark.postgres,
                                                                                   pytest.mark.redis])])
def srv(tmp_path_factory, request):
    """`grade serve` alone (SQLite, in-process workers), or the API on Postgres with a `grade worker` process
    grading through Redis."""
    tmp = tmp_path_factory.mktemp("rounds")
    data, pg, worker, env = tmp / "data", None, None, {}
    if request.param == "cluster":
        import random

        from tests.service.cluster import NetHosts, WorkerProc, redis_url_or_skip

        pg = FreshPostgres(postgres_url_or_skip())
        broker = f"{redis_url_or_skip().rsplit('/', 1)[0]}/{random.randint(1, 63)}"
        env = {"GRADER_DATABASE_URL": pg.url, "GRADER_BROKER_URL": broker}
        __import__("redis").Redis.from_url(broker).flushdb()
    tokens = make_tokens(data, ("admin", "boss"), ("interviewer", "ivy"), db=pg.url if pg else None)
    SECRETS.extend(tokens.values())
    server = Server(data, workers=2, env=env).start()
    server.tokens = tokens
    server.rows = _cluster_rows(pg.url) if pg else (lambda: store_rows(data))
    if pg:
        worker = WorkerProc(NetHosts(0), 0, broker=env["GRADER_BROKER_URL"], db=pg.url, data_dir=tmp / "worker",
                            concurrency=2).start()
    try:
        yield server
    finally:
        server.stop()
        if worker:
            worker.stop()
        if pg:
            pg.drop()
            __import__("redis").Redis.from_url(env["GRADER_BROKER_URL"]).flushdb()
    log = server.log() + (worker.log() if worker else "")
    # the access log: method, path without the query, status, duration, principal
    assert re.search(r"grader\.access: GET /v1/me 200 [0-9.]+ms token:[0-9]+\n", log), log[-3000:]
    assert re.search(r"grader\.access: GET /join 200 [0-9.]+ms -\n", log)
    assert re.search(r"grader\.access: GET /v1/submissions 200 [0-9.]+ms token:[0-9]+\n", log)
    leaked = [s[:8] for s in SECRETS if s in log]
    assert leaked == [], f"secrets in the server log: {leaked}"
    assert "?code=" not in log and "code=gi_" not in log


def _round(ivy, **kw) -> dict:
    body = {"name": "Backend 2026-12", "exercises": ["mha", "kv_cache"], "opens_at": "now", "closes_at": "2h",
            "time_limit": "45m", "max_attempts": 3, "feedback": "summary", **kw}
    r = ivy.post("/v1/rounds", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def _invite(ivy, round_id: str, *people) -> list[dict]:
    r = ivy.post(f"/v1/rounds/{round_id}/invitations", json={"candidates": [{"display_name": p} for p in people]})
    assert r.status_code == 201, r.text
    links = r.json()["invitations"]
    SECRETS.extend(i["link"].split("code=")[1] for i in links)
    return links


def _remember_session(c: httpx.Client) -> httpx.Client:
    SECRETS.append(c.cookies["grader_session"])
    return c


def test_two_candidates_with_one_name_are_two_candidates(srv):
    ivy = srv.client(srv.tokens["ivy"])
    rnd = _round(ivy)
    assert rnd["state"] == "open" and rnd["exercises"] == {"mha": ["numpy", "torch"], "kv_cache": ["numpy", "torch"]}
    a_inv, b_inv = _invite(ivy, rnd["id"], "Ada Lovelace", "Ada Lovelace")
    assert a_inv["candidate_id"] != b_inv["candidate_id"] and a_inv["link"].startswith(srv.url + "/join?code=gi_")
    a, b = (_remember_session(join(srv.url, i["link"])) for i in (a_inv, b_inv))
    try:
        # single use: the link opens nothing a second time
        again = httpx.get(a_inv["link"])
        assert again.status_code == 404 and "unknown, used, revoked or expired" in again.text
        # only the round's exercises, and the time left
        assert sorted(e["name"] for e in a.get("/v1/exercises").json()) == ["kv_cache", "mha"]
        assert a.get("/v1/exercises/gqa").status_code == 404
        me = a.get("/v1/me").json()
        assert me["candidate_id"] == a_inv["candidate_id"]
        (mine,) = me["rounds"]
        assert mine["state"] == "open" and 44 * 60 < mine["seconds_left"] <= 45 * 60
        page = a.get("/exercises").text
        assert "time-left" in page and ("44 min left" in page or "45 min left" in page)
        assert 'value="gqa"' not in page and 'value="kv_cache"' in page
        # each submits; refused exercise and track say why, nothing stored
        r = page_submit(a, "mha", WRONG)
        assert r.status_code == 303, r.text
        a_sub = r.headers["location"].rsplit("/", 1)[1]
        b_sub = page_submit(b, "mha", REF).headers["location"].rsplit("/", 1)[1]
        rows = {row["id"]: row for row in srv.rows()}
        assert rows[a_sub]["candidate_id"] == a_inv["candidate_id"] and rows[a_sub]["round_id"] == rnd["id"]
        assert rows[b_sub]["candidate_id"] == b_inv["candidate_id"]
        before = len(rows)
        r = page_submit(a, "gqa", REF)
        assert r.status_code == 403 and "not part of your round" in r.text
        assert len(srv.rows()) == before
        # neither sees the other's submission, report, page or source
        for c, other in ((a, b_sub), (b, a_sub)):
            for path in (f"/v1/submissions/{other}", f"/v1/submissions/{other}/report",
                         f"/v1/submissions/{other}/report.html", f"/submissions/{other}"):
                assert c.get(path).status_code == 404, path
            listed = [s["id"] for s in c.get("/v1/submissions").json()["items"]]
            assert other not in listed and len(listed) == 1
            assert other not in c.get("/exercises").text
        done = wait_done(ivy, a_sub)
        assert done["verdict"] == "failed"
        # feedback "summary": verdict, points and the diagnosis, no test messages or inputs
        rep = a.get(f"/v1/submissions/{a_sub}/report").json()
        assert rep["verdict"] == "failed" and rep["feedback"] == "summary"
        assert rep["diagnosis"] and rep["diagnosis"][0]["bug"] == "scale_sqrt_d"
        assert all(t["message"] == "" and t["diagnostics"] == {} for t in rep["tests"])
        full = ivy.get(f"/v1/submissions/{a_sub}/report").json()
        messages = [t["message"] for t in full["tests"] if t["status"] == "failed" and len(t["message"]) > 20]
        assert messages
        html = a.get(f"/v1/submissions/{a_sub}/report.html")
        assert html.status_code == 200 and "scale_sqrt_d" in html.text
        assert not any(m[:60] in html.text or escape(m[:60]) in html.text for m in messages)
        # the attempt limit (3 per exercise): the fourth is a 403 naming the limit, nothing stored
        for _ in range(2):
            assert page_submit(a, "mha", REF).status_code == 303
        before = len(srv.rows())
        r = page_submit(a, "mha", REF)
        assert r.status_code == 403 and "all 3 attempts at mha" in r.text
        assert len(srv.rows()) == before
        # b is not affected by a's attempts
        assert page_submit(b, "kv_cache", REF).status_code == 303
        # after the close: refused, with the reason
        assert ivy.post(f"/v1/rounds/{rnd['id']}/close").json()["state"] == "closed"
        r = page_submit(b, "mha", REF)
        assert r.status_code == 403 and "closed at" in r.text
        assert len(srv.rows()) == before + 1
    finally:
        a.close()
        b.close()


def test_refusals_over_the_api_name_the_limit(srv):
    boss, ivy = srv.client(srv.tokens["boss"]), srv.client(srv.tokens["ivy"])
    rnd = _round(ivy, exercises=["mha:numpy"], max_attempts=1, feedback="full")
    (inv,) = _invite(ivy, rnd["id"], "Grace")
    r = boss.post("/v1/tokens", json={"role": "candidate", "name": "Grace", "candidate_id": inv["candidate_id"],
                                      "expires": "12h"})
    assert r.status_code == 201, r.text
    SECRETS.append(r.json()["token"])
    grace = srv.client(r.json()["token"])
    err = error_of(submit(grace, "mha", TORCH_MHA))
    assert err["code"] == "track_not_in_round" and "numpy track only" in err["message"]
    assert submit(grace, "mha", WRONG, wait=60).status_code == 200
    r = submit(grace, "mha", REF)
    err = error_of(r)
    assert r.status_code == 403 and err["code"] == "attempt_limit" and err["details"]["round"] == rnd["id"]
    later = _round(ivy, name="Later", opens_at="1h", closes_at="2h")
    (inv2,) = _invite(ivy, later["id"], "Hedy")
    code = inv2["link"].split("code=")[1]
    tok = httpx.post(srv.url + "/v1/join", json={"code": code})          # a command-line client's sign-in
    assert tok.status_code == 201 and tok.json()["candidate_id"] == inv2["candidate_id"], tok.text
    SECRETS.append(tok.json()["token"])
    assert httpx.post(srv.url + "/v1/join", json={"code": code}).status_code == 404     # single use
    assert httpx.get(inv2["link"]).status_code == 404
    err = error_of(submit(srv.client(tok.json()["token"]), "mha", REF))
    assert err["code"] == "round_not_open" and "opens at" in err["message"] and err["details"]["until"]


def test_after_close_holds_the_verdict_until_the_round_closes(srv):
    ivy = srv.client(srv.tokens["ivy"])
    rnd = _round(ivy, exercises=["mha"], feedback="after_close", feedback_after="full", max_attempts=None)
    (inv,) = _invite(ivy, rnd["id"], "Joan")
    c = _remember_session(join(srv.url, inv["link"]))
    try:
        sub = page_submit(c, "mha", WRONG).headers["location"].rsplit("/", 1)[1]
        wait_done(ivy, sub)
        shown = c.get(f"/v1/submissions/{sub}").json()
        assert shown["status"] == "done" and shown["verdict"] is None and shown["score"] is None
        rep = c.get(f"/v1/submissions/{sub}/report").json()
        assert rep["status"] == "received" and "verdict" not in rep and "diagnosis" not in rep
        html = c.get(f"/v1/submissions/{sub}/report.html").text
        assert "received" in html and "scale_sqrt_d" not in html
        page = c.get(f"/submissions/{sub}").text
        assert 'id="verdict"' not in page and "scale_sqrt_d" not in page
        ivy.post(f"/v1/rounds/{rnd['id']}/close")
        rep = c.get(f"/v1/submissions/{sub}/report").json()
        assert rep["verdict"] == "failed" and rep["diagnosis"][0]["bug"] == "scale_sqrt_d"
        assert c.get(f"/v1/submissions/{sub}").json()["verdict"] == "failed"
        assert 'id="verdict"' in c.get(f"/submissions/{sub}").text
    finally:
        c.close()


def test_invitations_resend_revoke_bulk_csv_and_sign_out(srv):
    ivy = srv.client(srv.tokens["ivy"])
    rnd = _round(ivy, name="Bulk")
    body = "name,email,external_ref\nAda Lovelace,ada@example.org,ATS-1\nAlan Turing,,ATS-2\n"
    r = ivy.post(f"/v1/rounds/{rnd['id']}/invitations", params={"format": "csv"}, content=body,
                 headers={"Content-Type": "text/csv"})
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"], r.text
    rows = list(csv.DictReader(io.StringIO(r.text)))
    SECRETS.extend(x["link"].split("code=")[1] for x in rows)
    assert [(x["display_name"], x["email"], x["external_ref"]) for x in rows] == [
        ("Ada Lovelace", "ada@example.org", "ATS-1"), ("Alan Turing", "", "ATS-2")]
    listed = ivy.get(f"/v1/rounds/{rnd['id']}/invitations").json()
    assert [i["state"] for i in listed] == ["pending", "pending"] and all(i["link"] is None for i in listed)
    # revoke: the link is dead; resend: a new link, the old one dead too
    assert ivy.delete(f"/v1/invitations/{listed[0]['id']}").status_code == 204
    assert httpx.get(rows[0]["link"]).status_code == 404
    new = ivy.post(f"/v1/invitations/{listed[1]['id']}/resend").json()
    SECRETS.append(new["link"].split("code=")[1])
    assert new["candidate_id"] == listed[1]["candidate_id"] and new["link"] != rows[1]["link"]
    assert httpx.get(rows[1]["link"]).status_code == 404
    c = _remember_session(join(srv.url, new["link"]))
    try:
        assert c.get("/v1/me").json()["candidate_id"] == listed[1]["candidate_id"]
        # sign out ends the session on the server: the old cookie opens nothing
        sid = c.cookies["grader_session"]
        page = c.get("/exercises").text
        from tests.service.rounds import csrf_of

        assert c.post("/logout", data={"csrf": csrf_of(page)}).status_code == 303
        stale = httpx.get(srv.url + "/v1/me", cookies={"grader_session": sid})
        assert stale.status_code == 401
    finally:
        c.close()
    # a bearer token in the cookie signs nothing in
    assert httpx.get(srv.url + "/v1/me", cookies={"grader_session": srv.tokens["ivy"]}).status_code == 401


def test_staff_tokens_last_admin_and_one_expiry_form(srv):
    boss, ivy = srv.client(srv.tokens["boss"]), srv.client(srv.tokens["ivy"])
    assert ivy.post("/v1/tokens", json={"role": "interviewer", "name": "x"}).status_code == 403
    r = boss.post("/v1/tokens", json={"role": "interviewer", "name": "priya", "expires": "12h"})
    assert r.status_code == 201, r.text
    SECRETS.append(r.json()["token"])
    assert r.json()["expires_at"] is not None
    bad = boss.post("/v1/tokens", json={"role": "interviewer", "name": "p", "expires": "soon"})
    assert bad.status_code == 422 and "30d, 12h, 90m" in error_of(bad)["message"]
    assert boss.post("/v1/tokens", json={"role": "admin", "name": "p", "expires_in_days": 1}).status_code == 422
    admins = [t for t in boss.get("/v1/tokens").json() if t["role"] == "admin" and not t["revoked_at"]]
    assert len(admins) == 1
    r = boss.delete(f"/v1/tokens/{admins[0]['id']}")
    assert r.status_code == 409 and error_of(r)["code"] == "last_admin"
    # revoking a token ends its sessions
    second = boss.post("/v1/tokens", json={"role": "admin", "name": "second"}).json()
    SECRETS.append(second["token"])
    with httpx.Client(base_url=srv.url) as c:
        from tests.service.rounds import csrf_of

        page = c.get("/login")
        c.post("/login", data={"csrf": csrf_of(page.text), "token": second["token"], "next": "/"})
        SECRETS.append(c.cookies["grader_session"])
        assert c.get("/tokens").status_code == 200
        assert boss.delete(f"/v1/tokens/{second['id']}").status_code == 204
        assert c.get("/v1/me").status_code == 401


def test_candidate_filter_is_a_case_insensitive_substring(srv):
    ivy = srv.client(srv.tokens["ivy"])
    sid = submit(ivy, "mha", REF, candidate="Ada Byron-King").json()["id"]
    for q in ("ada", "BYRON", "n-k"):
        assert sid in [s["id"] for s in ivy.get("/v1/submissions", params={"candidate": q}).json()["items"]], q
    assert sid not in [s["id"] for s in ivy.get("/v1/submissions", params={"candidate": "ada_"}).json()["items"]]
    assert "Ada Byron-King" in ivy.get("/v1/exports/csv", params={"candidate": "byron"}).text
    # the candidate records: the two "Ada Lovelace" of the first test are two, found by any part of the name
    found = ivy.get("/v1/candidates", params={"q": "lovelace"}).json()
    assert len({c["id"] for c in found if c["display_name"] == "Ada Lovelace"}) >= 2
    one = ivy.get(f"/v1/candidates/{found[0]['id']}").json()
    assert one["rounds"] and all(s["candidate_id"] == one["id"] for s in one["submissions"])
    assert srv.client(srv.tokens["boss"]).get("/v1/candidates/cand_nope").status_code == 404
