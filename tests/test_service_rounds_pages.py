"""A hiring round in a real headless Chromium against a real `grade serve`: an interviewer signs in, creates a
round (mha + kv_cache, now -> +2 h, 45-minute limit, 3 attempts, feedback summary) and invites two candidates
with the same display name; each opens their own link in a browser context of their own, sees exactly those two
exercises and the time left, and submits; neither reaches the other's submission, report or source (pages and
API); the fourth attempt is refused with the reason; after the interviewer closes the round a submission is
refused. Screenshots go to artifacts/service-pages/ (gitignored)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.service.support import Server, make_tokens, store_rows, wait_done
from tests.test_service_pages import SHOTS, browser, pytestmark  # noqa: F401  (the browser fixture, marker, skip)

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("roundpages") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"))
    server = Server(data, workers=2).start()
    server.tokens = tokens
    server.secrets = [tokens["ivy"]]
    yield server
    server.stop()
    log = server.log()
    assert "grader.access: POST /join 303" in log
    assert [s[:8] for s in server.secrets if s in log] == []      # no token, invitation or session id


def _context(browser):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    pg.csp_errors = []
    pg.on("console", lambda m: pg.csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    return ctx, pg


def _upload(pg, tmp_path, exercise: str, source: str, name: str = "solution.py", *, reload: bool = True):
    if reload:
        pg.goto(pg.url.split("/", 3)[0] + "//" + pg.url.split("/", 3)[2] + "/exercises")
    f = tmp_path / name
    f.write_text(source)
    pg.select_option("#exercise", exercise)
    pg.set_input_files("#file", str(f))
    pg.click("#submit")
    pg.wait_for_load_state()


def test_a_round_in_the_browser(srv, browser, tmp_path):
    ivy_ctx, ivy = _context(browser)
    ivy.goto(srv.url + "/login")
    ivy.fill("#token", srv.tokens["ivy"])
    ivy.click("button[type=submit]")
    ivy.wait_for_url(srv.url + "/submissions")
    ivy.click("header a[href='/rounds']")
    ivy.fill("#r-name", "Backend, December")
    ivy.check("#r-ex-mha")
    ivy.check("#r-ex-kv_cache")
    ivy.fill("#r-opens", "now")
    ivy.fill("#r-closes", "2h")
    ivy.fill("#r-limit", "45m")
    ivy.fill("#r-attempts", "3")
    ivy.select_option("#r-feedback", "summary")
    ivy.click("#r-create")
    ivy.wait_for_url(re.compile(r".*/rounds/round_[0-9a-f]+$"))
    round_url = ivy.url
    assert ivy.inner_text("#round-state") == "open"
    ivy.fill("#people", "Ada Lovelace, ada1@example.org\nAda Lovelace, ada2@example.org")
    ivy.click("#invite-button")
    ivy.wait_for_selector("#links")
    links = ivy.locator("code.invite-link").all_inner_texts()
    assert len(links) == 2 and len(set(links)) == 2 and all("/join?code=gi_" in x for x in links)
    srv.secrets += [x.split("code=")[1] for x in links]
    ivy.screenshot(path=str(SHOTS / "round-invited.png"), full_page=True)
    ivy.goto(round_url)                                     # the links are shown once
    assert ivy.locator("code.invite-link").count() == 0
    assert ivy.locator("tr.invitation td.state").all_inner_texts() == ["pending", "pending"]
    iso = re.compile(r"\d{4}-\d\d-\d\dT\d\d:")                 # times are clock times, the exact one on hover
    assert not iso.search(ivy.inner_text("body")) and ivy.locator("#invitations time").count() == 2
    ivy.goto(srv.url + "/rounds")
    assert not iso.search(ivy.inner_text("body")) and ivy.locator("time").count() >= 2
    ivy.goto(round_url)

    contexts, pages, subs = [], [], []
    for i, link in enumerate(links):
        ctx, pg = _context(browser)
        contexts.append(ctx)
        pages.append(pg)
        pg.goto(link)
        pg.click("#join")
        pg.wait_for_url(srv.url + "/exercises")
        srv.secrets += [c["value"] for c in ctx.cookies() if c["name"] == "grader_session"]
        assert sorted(pg.locator("section.exercise").evaluate_all("els => els.map(e => e.id)")) == [
            "ex-kv_cache", "ex-mha"]
        assert sorted(pg.locator("#exercise option").evaluate_all("els => els.map(e => e.value)")) == [
            "kv_cache", "mha"]
        assert re.search(r"^4[45] min left$", pg.inner_text(".time-left")), pg.inner_text(".time-left")
        pg.screenshot(path=str(SHOTS / f"round-candidate-{i}.png"), full_page=True)
        _upload(pg, tmp_path, "mha", WRONG if i == 0 else REF)
        assert re.search(r"/submissions/[0-9a-f]+$", pg.url), pg.url
        subs.append(pg.url.rsplit("/", 1)[1])
    a, b = pages
    ivy_api = srv.client(srv.tokens["ivy"])
    for s in subs:
        wait_done(ivy_api, s)
    # each page is still on its submission's page, which reloads itself every 2 s until the grading is done: a
    # goto meanwhile could be cut short by that reload (an error, or no response). The verdict shows after the
    # next reload, and from then on the page stays put.
    for pg, sid in ((a, subs[0]), (b, subs[1])):
        assert pg.url == f"{srv.url}/submissions/{sid}"
        pg.locator("#verdict").wait_for(timeout=30_000)
    assert a.inner_text("#verdict") == "failed" and "scale_sqrt_d" in a.inner_text("#summary")
    a.screenshot(path=str(SHOTS / "round-candidate-summary.png"), full_page=True)
    rows = {r["id"]: r for r in store_rows(srv.data_dir)}
    assert rows[subs[0]]["candidate_id"] != rows[subs[1]]["candidate_id"]
    assert rows[subs[0]]["candidate"] == rows[subs[1]]["candidate"] == "Ada Lovelace"
    # neither reaches the other's submission, report or source: pages and API (the session cookie)
    for pg, other in ((a, subs[1]), (b, subs[0])):
        for path in (f"/submissions/{other}", f"/v1/submissions/{other}", f"/v1/submissions/{other}/report",
                     f"/v1/submissions/{other}/report.html"):
            assert pg.goto(srv.url + path).status == 404, path
        listed = pg.request.get(srv.url + "/v1/submissions").json()["items"]
        assert [x["id"] for x in listed] == [s for s in subs if s != other]
        pg.goto(srv.url + "/exercises")
        assert other not in pg.content()
    # the fourth attempt is refused, with the reason
    for _ in range(2):
        _upload(a, tmp_path, "mha", REF)
        assert "/submissions/" in a.url
    before = len(store_rows(srv.data_dir))
    _upload(a, tmp_path, "mha", REF)
    assert a.url == srv.url + "/submit" and "all 3 attempts at mha" in a.inner_text("#error")
    a.screenshot(path=str(SHOTS / "round-attempt-limit.png"), full_page=True)
    # the interviewer closes the round while b has the form open: b's submission is refused, with the reason
    b.goto(srv.url + "/exercises")
    ivy.goto(round_url)
    ivy.click("#close-round")
    ivy.wait_for_load_state()
    assert ivy.inner_text("#round-state") == "closed"
    _upload(b, tmp_path, "kv_cache", REF, reload=False)
    assert "closed at" in b.inner_text("#error") and not iso.search(b.inner_text("#error"))
    assert len(store_rows(srv.data_dir)) == before
    b.screenshot(path=str(SHOTS / "round-closed.png"), full_page=True)
    # and the page no longer offers the form once the round is closed
    b.goto(srv.url + "/exercises")
    assert b.locator("#upload form").count() == 0 and b.locator("#file").count() == 0
    assert "round has ended" in b.inner_text("#no-submit")
    b.screenshot(path=str(SHOTS / "round-closed-exercises.png"), full_page=True)
    for pg in (ivy, a, b):
        assert pg.csp_errors == []
    for ctx in (ivy_ctx, *contexts):
        ctx.close()
