"""What a candidate may not learn, and what staff may do, against a real server: every submission draws its
own seed, kept from the candidate (issue 28 #2); only staff choose one, and a staff replay with it reproduces
the report; an infrastructure error reads as a plain sentence to the candidate and in full to staff (#10);
report.html is rendered once per submission, audience and report version (#9)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.service.auth import COOKIE
from tests.service.support import Server, error_of, make_tokens, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("aud") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"), ("candidate", "alice"))
    server = Server(data, workers=1, env={"GRADER_SUBMISSION_TIMEOUT_S": "10", "GRADER_MAX_ATTEMPTS": "1"}).start()
    server.tokens = tokens
    yield server
    server.stop()


def _comparable(report: dict) -> list:
    return [(t["id"], t["status"], t.get("message"), t.get("points")) for t in report["tests"]]


def test_each_submission_draws_its_own_seed_which_the_candidate_never_sees(srv):
    alice, ivy = srv.client(srv.tokens["alice"]), srv.client(srv.tokens["ivy"])
    ids = [submit(alice, "mha", WRONG, wait=60).json()["id"] for _ in range(2)]
    seeds = [ivy.get(f"/v1/submissions/{i}").json()["seed"] for i in ids]
    assert None not in seeds and seeds[0] != seeds[1]
    for i, seed in zip(ids, seeds):
        assert alice.get(f"/v1/submissions/{i}").json()["seed"] is None
        assert ivy.get(f"/v1/submissions/{i}/report").json()["environment"]["seed"] == seed
        mine = alice.get(f"/v1/submissions/{i}/report").json()
        assert "seed" not in mine["environment"]
        assert not re.search(rf"\b{seed}\b", str(mine["tests"])), "the seed is written in a candidate's report"
    page = alice.get(f"/v1/submissions/{ids[0]}/report.html").text   # (a page costs seconds: one is enough)
    assert "seed" not in page.split("<main>", 1)[1].split("</section>", 1)[0] and str(seeds[0]) not in page
    assert all(r["seed"] is None for r in alice.get("/v1/submissions").json()["items"])


def test_a_candidate_may_not_choose_the_seed_and_a_staff_replay_reproduces_the_report(srv):
    alice, ivy = srv.client(srv.tokens["alice"]), srv.client(srv.tokens["ivy"])
    r = submit(alice, "mha", WRONG, seed=7)
    assert r.status_code == 403 and "seed" in error_of(r)["message"]
    r = alice.post("/v1/submissions", files={"file": ("a.py", WRONG.encode())}, data={"exercise": "mha", "seed": "7"})
    assert r.status_code == 403
    first = submit(alice, "mha", WRONG, wait=60).json()
    seed = ivy.get(f"/v1/submissions/{first['id']}").json()["seed"]
    replay = submit(ivy, "mha", WRONG, wait=60, seed=seed, candidate="alice").json()
    assert replay["seed"] == seed
    a = ivy.get(f"/v1/submissions/{first['id']}/report").json()
    b = ivy.get(f"/v1/submissions/{replay['id']}/report").json()
    assert a["verdict"] == b["verdict"] == "failed" and _comparable(a) == _comparable(b)
    # a regrade keeps the seed unless staff name another
    assert ivy.post(f"/v1/submissions/{first['id']}/regrade").json()["seed"] == seed
    wait_done(ivy, first["id"])
    assert _comparable(ivy.get(f"/v1/submissions/{first['id']}/report").json()) == _comparable(a)
    other = (seed + 1) % 2**32
    assert ivy.post(f"/v1/submissions/{first['id']}/regrade", params={"seed": other}).json()["seed"] == other
    assert alice.post(f"/v1/submissions/{first['id']}/regrade", params={"seed": other}).status_code == 403
    wait_done(ivy, first["id"])


def test_report_html_is_rendered_once_per_submission_audience_and_version(srv):
    alice, ivy = srv.client(srv.tokens["alice"]), srv.client(srv.tokens["ivy"])
    sid = submit(alice, "mha", WRONG, wait=60).json()["id"]

    def renders() -> int:
        m = re.search(r"^grader_report_renders_total (\S+)$", ivy.get("/metrics").text, re.M)
        return int(float(m.group(1))) if m else 0
    n = renders()
    first = alice.get(f"/v1/submissions/{sid}/report.html").text
    assert renders() == n + 1
    assert alice.get(f"/v1/submissions/{sid}/report.html").text == first
    assert renders() == n + 1                        # the second request rendered nothing
    staff = ivy.get(f"/v1/submissions/{sid}/report.html").text
    assert renders() == n + 2 and staff != first     # another audience, another page
    ivy.post(f"/v1/submissions/{sid}/regrade")
    wait_done(ivy, sid)
    alice.get(f"/v1/submissions/{sid}/report.html")
    assert renders() == n + 3                        # a new report version


def test_an_infrastructure_error_is_a_plain_sentence_for_the_candidate_and_detailed_for_staff(srv):
    from harness.service.views import CANDIDATE_INFRA_ERROR

    alice, ivy = srv.client(srv.tokens["alice"]), srv.client(srv.tokens["ivy"])
    sid = submit(alice, "mha", "import time\ntime.sleep(60)\n" + REF).json()["id"]
    staff = wait_done(ivy, sid, timeout=90)
    assert staff["status"] == "infrastructure_error" and "did not finish within 10 s" in staff["error"]
    mine = alice.get(f"/v1/submissions/{sid}").json()
    assert mine["error"] == CANDIDATE_INFRA_ERROR
    listed = next(r for r in alice.get("/v1/submissions").json()["items"] if r["id"] == sid)
    assert listed["error"] == CANDIDATE_INFRA_ERROR
    import httpx

    for token, want, unwanted in ((srv.tokens["alice"], CANDIDATE_INFRA_ERROR, staff["error"]),
                                  (srv.tokens["ivy"], staff["error"], None)):
        with httpx.Client(base_url=srv.url) as c:      # signed in through the form, as a browser is
            csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/login").text).group(1)
            assert c.post("/login", data={"csrf": csrf, "token": token, "next": "/"}).status_code == 303
            assert COOKIE in c.cookies
            page = c.get(f"/submissions/{sid}").text
        assert want.replace("'", "&#39;") in page or want in page
        if unwanted:
            assert unwanted not in page and "did not finish within" not in page
