"""Interviewer review in a real headless Chromium against a real `grade serve` (issue 25): a round of three
candidates who sign in through their invitation links and submit through the page. The interviewer reads a
candidate's timeline, the diff between two attempts and downloads a source; scores a rubric and overrides a score
and reads the audit trail; reads the similarity list (an identical file and a near-copy flagged, the matching
regions marked) and the analytics page, whose SVG charts are read back (bars, labels, widths, pixels). Over the
API: a regrade keeps the earlier report as a version; another candidate's export zip validates against the
report schema; deleting a candidate leaves nothing of theirs in any table or file of the data directory."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import zipfile
from pathlib import Path

import pytest

from harness.core.report import validate_report
from tests.service.nearcopy import near_copy
from tests.service.rounds import csrf_of, join, page_submit, signed_in
from tests.service.browser import MARKS, browser, shots  # noqa: F401  (browser: the fixture)
from tests.service.support import Server, make_tokens, wait_done

ROOT = Path(__file__).resolve().parent.parent
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
RIGHT = (ROOT / "tests" / "variants" / "mha" / "numpy_einsum.py").read_text()
SHOTS = shots("review-pages")
DEE = "Dee Gonewithdata"
DEE_MARK = "# dee-marker-2f9c41 my own words\n"

pytestmark = MARKS


@pytest.fixture(scope="module")
def rnd(tmp_path_factory):
    """The server, a round with Ada (a failing attempt then a pass), Bob (a near-copy of Ada's pass) and Cy (a
    byte-identical copy of Ada's first attempt), and Dee in a second round."""
    data = tmp_path_factory.mktemp("review") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"))
    srv = Server(data, workers=2).start()
    srv.tokens = tokens
    ivy = srv.client(tokens["ivy"])
    out = {"srv": srv, "ivy": ivy, "subs": {}}
    try:
        for name, people in (("main", ["Ada", "Bob", "Cy"]), ("other", [DEE])):
            r = ivy.post("/v1/rounds", json={"name": f"Review {name}", "exercises": ["mha"], "opens_at": "now",
                                             "closes_at": "2h", "feedback": "full"})
            assert r.status_code == 201, r.text
            inv = ivy.post(f"/v1/rounds/{r.json()['id']}/invitations",
                           json={"candidates": [{"display_name": p} for p in people]})
            assert inv.status_code == 201, inv.text
            out[name] = r.json()
            for i in inv.json()["invitations"]:
                out[i["display_name"]] = {"id": i["candidate_id"], "client": join(srv.url, i["link"])}
        plan = [("Ada", WRONG), ("Ada", RIGHT), ("Bob", near_copy(RIGHT)), ("Cy", WRONG), (DEE, DEE_MARK + WRONG)]
        for who, source in plan:
            r = page_submit(out[who]["client"], "mha", source)
            assert r.status_code == 303, r.text
            sub_id = r.headers["location"].rsplit("/", 1)[1]
            out["subs"].setdefault(who, []).append(sub_id)
            assert wait_done(ivy, sub_id)["status"] == "done"
        yield out
    finally:
        for k, v in out.items():
            if isinstance(v, dict) and "client" in v:
                v["client"].close()
        srv.stop()


@pytest.fixture
def page(browser, rnd):
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1300, "height": 900})
    pg = ctx.new_page()
    pg.csp_errors = []
    pg.on("console", lambda m: pg.csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    srv = rnd["srv"]
    pg.goto(srv.url + "/login")
    pg.fill("#token", srv.tokens["ivy"])
    pg.click("button[type=submit]")
    pg.wait_for_load_state()
    yield pg
    assert pg.csp_errors == []
    ctx.close()


def test_candidate_page_timeline_diff_and_download(rnd, page, tmp_path):
    srv, ada = rnd["srv"], rnd["Ada"]
    page.goto(f"{srv.url}/rounds/{rnd['main']['id']}")
    page.click(f"a.candidate-link[href^='/candidates/{ada['id']}']")
    page.wait_for_load_state()
    assert page.inner_text("#candidate-name").startswith("Ada")
    story = page.locator("section.exercise-story[data-exercise=mha]")
    atts = story.locator("li.attempt")
    assert atts.count() == 2
    assert [atts.nth(i).locator(".verdict").inner_text() for i in range(2)] == ["failed", "passed"]
    assert "scale_sqrt_d" in atts.nth(0).locator(".diagnosis").inner_text()
    assert "numeric" in atts.nth(0).locator(".cats").inner_text()
    assert story.locator(".attempts-used").inner_text() == "2"
    best, last = float(story.locator(".best").inner_text()), float(story.locator(".last").inner_text())
    scores = [float(atts.nth(i).locator(".score").inner_text().split("/")[0]) for i in range(2)]
    assert best == max(scores) == last == scores[1] > scores[0]
    assert re.fullmatch(r"\d+ min \d+ s", story.locator(".to-pass").inner_text())
    page.screenshot(path=str(SHOTS / "candidate.png"), full_page=True)
    with page.expect_download() as dl:
        atts.nth(0).locator("a.download").click()
    got = tmp_path / "first.py"
    dl.value.save_as(got)
    assert got.read_text() == WRONG
    atts.nth(1).locator("a.diff-link").click()
    page.wait_for_load_state()
    assert page.inner_text("#attempt-number") == "2"
    diff = page.locator("#diff table.diff")
    assert diff.count() == 1
    changed = " ".join(diff.locator("td").all_inner_texts())
    assert "einsum" in changed                     # the new attempt's lines, side by side with the old
    assert diff.locator(".diff_add, .diff_chg, .diff_sub").count() > 3
    assert page.locator("#diff .diff-scroll").evaluate("e => e.scrollWidth <= e.clientWidth + 1")   # fits its card
    assert page.locator("#source span[style]").count() > 20       # highlighted by pygments
    assert "def mha" in page.inner_text("#source")
    page.screenshot(path=str(SHOTS / "attempt-diff.png"), full_page=True)
    page.click("#back-candidate")
    page.wait_for_url(re.compile(f".*/candidates/{ada['id']}$"))


def test_rubric_and_override_with_the_audit_trail(rnd, page):
    srv, ivy = rnd["srv"], rnd["ivy"]
    rid = rnd["main"]["id"]
    page.goto(f"{srv.url}/rounds/{rid}/rubric")
    page.fill("#rubric-text", "Correctness, 60, from the grade\nClarity, 40, names and shapes")
    page.click("#save-rubric-def")
    page.wait_for_url(f"{srv.url}/rounds/{rid}/rubric")
    assert page.locator("tr.criterion-def").count() == 2
    sub = rnd["subs"]["Ada"][1]
    page.goto(f"{srv.url}/review/{sub}")
    crit = page.locator("#rubric tr.criterion")
    assert crit.nth(0).locator("input.points").input_value() == "60"            # passed: the full 60
    assert "pre-filled from the grade" in crit.nth(0).inner_text()
    crit.nth(1).locator("input.points").fill("31")
    page.click("#save-rubric")
    page.wait_for_load_state()
    assert page.locator("#rubric tr.criterion").nth(1).locator("input.points").input_value() == "31"
    assert "scored by ivy" in page.locator("#rubric tr.criterion").nth(1).inner_text()
    page.fill("#override-score", "7")
    page.click("#save-override")                                                  # no reason: refused
    page.wait_for_load_state()
    assert "needs a reason" in page.inner_text("#error")
    page.fill("#override-score", "7")
    page.fill("#override-reason", "explained the scaling wrongly in the interview")
    page.click("#save-override")
    page.wait_for_load_state()
    assert page.inner_text("#final-score") == "7" and "explained the scaling" in page.inner_text("#overridden")
    page.fill("#note", "asked about <b>masking</b>")
    page.click("#add-note")
    page.wait_for_load_state()
    assert "asked about <b>masking</b>" in page.inner_text("#notes")               # escaped
    rows = page.locator("#audit tr.audit-entry")
    assert page.locator("#notes time").count() >= 1 and page.locator("#audit time").count() == rows.count()
    by_action = {rows.nth(i).get_attribute("data-action"): rows.nth(i) for i in range(rows.count())}
    assert {"rubric.scored", "score.overridden", "note.added"} <= set(by_action)
    ov = by_action["score.overridden"]
    assert "ivy" in ov.locator(".actor").inner_text()
    assert json.loads(ov.locator(".before").inner_text())["overridden"] is False
    assert json.loads(ov.locator(".after").inner_text())["score"] == 7
    assert json.loads(by_action["rubric.scored"].locator(".after").inner_text()) == {"criterion": "Clarity",
                                                                                     "points": 31}
    page.screenshot(path=str(SHOTS / "rubric-override.png"), full_page=True)
    # the CSV says so too
    rows = list(csv.DictReader(io.StringIO(ivy.get("/v1/exports/csv", params={"round": rid}).text)))
    mine = next(r for r in rows if r["id"] == sub)
    assert (mine["rubric:Clarity"], mine["override_score"], mine["final_score"]) == ("31.0", "7.0", "7.0")
    assert mine["attempt"] == "2" and mine["attempts_used"] == "2" and mine["points_numeric"]
    gs = ivy.get("/v1/exports/gradescope", params={"round": rid}).json()
    assert gs[sub]["extra_data"]["candidate"] == "Ada"
    # the candidate sees none of it
    mine_report = rnd["Ada"]["client"].get(f"/v1/submissions/{sub}/report").text
    assert "explained the scaling" not in mine_report and "masking" not in mine_report
    assert rnd["Ada"]["client"].get(f"/review/{sub}").status_code == 403


def test_similarity_lists_the_identical_file_and_the_near_copy(rnd, page):
    srv = rnd["srv"]
    page.goto(f"{srv.url}/rounds/{rnd['main']['id']}")
    page.click("#round-similarity")
    page.wait_for_load_state()
    pairs = page.locator("#pairs tr.pair")
    listed = {}
    for i in range(pairs.count()):
        names = frozenset(pairs.nth(i).locator("td a").all_inner_texts())
        listed[names] = (float(pairs.nth(i).get_attribute("data-score")), pairs.nth(i).locator(".identical").count())
    assert listed[frozenset({"Ada", "Cy"})] == (1.0, 1)
    score, identical = listed[frozenset({"Ada", "Bob"})]
    assert score >= 0.7 and identical == 0           # renamed, reordered, recommented: not byte-identical
    assert frozenset({"Bob", "Cy"}) not in listed
    detail = page.locator("section.pair-detail", has_text="Bob")
    assert detail.locator(".side-a mark.match").count() >= 1 and detail.locator(".side-b mark.match").count() >= 1
    assert "einsum" in " ".join(detail.locator(".side-b mark.match").all_inner_texts())
    page.screenshot(path=str(SHOTS / "similarity.png"), full_page=True)


def test_analytics_page_charts_read_back(rnd, page):
    import numpy as np
    from PIL import Image

    srv = rnd["srv"]
    page.goto(f"{srv.url}/rounds/{rnd['main']['id']}")
    page.click("#round-analytics")
    page.wait_for_load_state()
    sec = page.locator("section.exercise-stats[data-exercise=mha]")
    assert sec.locator(".n-candidates").inner_text() == "3"
    assert sec.locator(".pass-rate").inner_text() == "67%"                 # Ada and Bob of three
    assert sec.locator(".median-attempts").inner_text() == "1"            # 2, 1, 1
    hist = sec.locator(".hist rect.bar")
    assert hist.count() == 10 and sum(float(hist.nth(i).get_attribute("data-value")) for i in range(10)) == 3
    bugs = sec.locator(".bugs rect.bar")
    values = {bugs.nth(i).get_attribute("data-label"): float(bugs.nth(i).get_attribute("data-value"))
              for i in range(bugs.count())}
    assert values["scale_sqrt_d"] == 2                                       # Ada's first attempt and Cy
    widths = [float(bugs.nth(i).get_attribute("width")) for i in range(bugs.count())]
    assert widths[0] == max(widths) > 0
    shot = SHOTS / "analytics-bugs.png"
    sec.locator(".bugs svg").screenshot(path=str(shot))
    px = np.asarray(Image.open(shot).convert("RGB")).astype(int)          # (H, W, 3)
    blue = int((np.abs(px - np.array([0x24, 0x57, 0xC5])).max(axis=-1) < 30).sum())
    assert blue > 200                                                        # the bars are drawn
    page.screenshot(path=str(SHOTS / "analytics.png"), full_page=True)


def test_reports_say_whose_and_compare_lives_in_the_app(rnd, page):
    srv = rnd["srv"]
    first, second = rnd["subs"]["Ada"]
    page.goto(f"{srv.url}/v1/submissions/{second}/report.html")
    line = page.inner_text("#whose")
    assert line.startswith("Ada · round Review main · mha · attempt 2")
    page.click("#whose-back")
    page.wait_for_url(f"{srv.url}/review/{second}")
    ada = rnd["Ada"]["client"]                     # the candidate's own report links to her submission's page
    assert f'href="/submissions/{first}"' in ada.get(f"/v1/submissions/{first}/report.html").text
    page.goto(f"{srv.url}/submissions?round={rnd['main']['id']}")
    page.check(f"tr[data-id='{first}'] input[type=checkbox]")
    page.check(f"tr[data-id='{rnd['subs']['Bob'][0]}'] input[type=checkbox]")
    page.click("#compare")
    page.wait_for_load_state()
    assert page.locator("header").count() == 1 and page.locator("header a[href='/rounds']").count() == 1   # the frame
    rows = page.locator("#compare tbody tr")
    assert rows.count() == 2
    ada_row = page.locator(f"#compare tbody tr[data-id='{first}']")
    assert ada_row.locator("td").first.inner_text().startswith("Ada")
    assert ada_row.locator("td").nth(2).inner_text() == "1"
    assert re.fullmatch(r"[\d.]+/[\d.]+", ada_row.locator(".cat-numeric").inner_text())
    assert "scale_sqrt_d" in ada_row.inner_text()
    ada_row.locator("a.review").click()
    page.wait_for_url(f"{srv.url}/review/{first}")
    page.go_back()
    page.click("#compare-detailed")
    page.wait_for_load_state()
    assert page.locator("#compare tbody tr").count() == 2          # the detailed standalone comparison


def test_regrade_keeps_a_version(rnd):
    ivy, sub = rnd["ivy"], rnd["subs"]["Bob"][0]
    first = ivy.get(f"/v1/submissions/{sub}/report").json()
    r = ivy.post(f"/v1/submissions/{sub}/regrade", params={"reason": "suite updated"})
    assert r.status_code == 202, r.text
    wait_done(ivy, sub)
    v = ivy.get(f"/v1/review/submissions/{sub}/versions").json()
    assert v["latest"] == 2 and v["versions"][0]["reason"] == "suite updated"
    assert "ivy" in v["versions"][0]["superseded_by"]
    old = ivy.get(f"/v1/review/submissions/{sub}/versions/1").json()
    assert validate_report(old) and old["score"] == first["score"]
    with signed_in(rnd["srv"].url, rnd["srv"].tokens["ivy"]) as c:      # the review page's form: a new seed
        form = c.get(f"/review/{sub}").text
        r = c.post(f"/submissions/{sub}/regrade", data={"csrf": csrf_of(form), "reason": "new inputs", "seed": "7"})
        assert r.status_code == 303, r.text
    assert wait_done(ivy, sub)["seed"] == 7
    v = ivy.get(f"/v1/review/submissions/{sub}/versions").json()
    assert v["latest"] == 3 and v["versions"][1]["reason"] == "new inputs"
    assert v["versions"][1]["seed"] == v["versions"][0]["seed"] != 7       # the earlier versions keep theirs


def test_export_zip_validates_and_deletion_leaves_nothing(rnd, page):
    srv, ivy = rnd["srv"], rnd["ivy"]
    bob = rnd["Bob"]["id"]
    z = zipfile.ZipFile(io.BytesIO(ivy.get(f"/v1/review/candidates/{bob}/export").content))
    meta = json.loads(z.read("candidate.json"))
    assert meta["candidate"]["id"] == bob and [s["id"] for s in meta["submissions"]] == rnd["subs"]["Bob"]
    reports = [n for n in z.namelist() if n.startswith("reports/")]
    assert reports and all(validate_report(json.loads(z.read(n))) for n in reports)
    assert z.read(next(n for n in z.namelist() if n.startswith("sources/"))).decode() == near_copy(RIGHT)
    # Dee: delete through the page
    dee, dee_subs = rnd[DEE]["id"], rnd["subs"][DEE]
    page.goto(f"{srv.url}/candidates/{dee}")
    page.fill("#cand-note", "note about Dee")
    page.click("#add-cand-note")
    page.wait_for_load_state()
    page.fill("#confirm", dee)
    page.click("#delete")
    page.wait_for_load_state()
    assert "Candidate deleted" in page.content()
    theirs = [dee, DEE, "dee-marker-2f9c41", *dee_subs]
    con = sqlite3.connect(str(srv.data_dir / "grader.db"))
    try:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            for row in con.execute(f'SELECT * FROM "{table}"'):
                text = " ".join(str(bytes(x)) if isinstance(x, (bytes, memoryview)) else str(x) for x in row)
                assert not [t for t in theirs if t in text], (table, text[:300])
    finally:
        con.close()
    found = [(p.name, t) for p in srv.data_dir.rglob("*") if p.is_file() for t in theirs if t.encode() in p.read_bytes()]
    assert found == []
    assert ivy.get(f"/v1/review/candidates/{dee}").status_code == 404
    trail = ivy.get(f"/v1/review/submissions/{rnd['subs']['Ada'][0]}/audit")
    assert trail.status_code == 200
