"""The pages as a first-time user meets them (issue 23), in headless Chromium against a real `grade serve`: the
prompt is rendered Markdown, a refused upload (too large, empty) shows the page with an error and keeps the chosen
exercise, the default exercise is the page's first, times are relative with the exact local time on hover, the
status page shows the diagnosis, points per category and failing tests, the error badge is a badge, /docs works
with every outside request blocked, and kv_cache / flash_attention reports have plots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.exercises import all_exercises
from tests.service.browser import MARKS, browser, shots  # noqa: F401  (browser: the fixture)
from tests.service.support import Server, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
SHOTS = shots("service-pages")

pytestmark = MARKS


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("svcux") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"), ("candidate", "alice"))
    server = Server(data, workers=2).start()
    server.tokens = tokens
    yield server
    server.stop()


@pytest.fixture
def page(browser, srv):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900}, timezone_id="Asia/Tokyo",
                              locale="en-GB")
    pg = ctx.new_page()
    pg.outside = []

    def only_this_server(route):   # an air-gapped host: nothing but the server answers
        if route.request.url.startswith(srv.url):
            return route.continue_()
        pg.outside.append(route.request.url)
        return route.abort()

    pg.route("**/*", only_this_server)
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" and not m.text.startswith(
        "Failed to load resource: the server responded with a status of 4") else None)   # a refusal's status
    yield pg
    ctx.close()


def sign_in(page, srv, who: str):
    page.goto(srv.url + "/login")
    page.fill("#token", srv.tokens[who])
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_the_prompt_is_rendered_markdown(srv, page):
    sign_in(page, srv, "alice")
    page.goto(srv.url + "/exercises/kv_cache")
    prompt = page.locator("#prompt-text")
    assert prompt.locator("h1").count() == 0 and prompt.locator("h2, h3").count() >= 2 and prompt.locator("table").count() >= 1
    assert prompt.locator("pre code").count() >= 1 and prompt.locator("strong").count() >= 1
    text = prompt.inner_text()
    assert "```" not in text and "**" not in text and "|---" not in text
    page.screenshot(path=str(SHOTS / "ux-prompt.png"), full_page=True)
    page.click("#submit-link")
    page.wait_for_load_state()
    assert page.input_value("#exercise") == "kv_cache"     # "Submit a solution" preselects this exercise


def test_refused_uploads_show_the_page_and_keep_the_choice(srv, page, tmp_path):
    sign_in(page, srv, "alice")
    page.goto(srv.url + "/exercises")
    first = next(iter(all_exercises()))
    assert first == "mha" and page.input_value("#exercise") == first      # the page's first exercise
    names = [o.get_attribute("value") for o in page.locator("#exercise option").all()]
    assert names == list(all_exercises())
    assert [s.get_attribute("id") for s in page.locator("section.exercise").all()] == [f"ex-{n}" for n in names]
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 2_000_000 + b"\n")
    page.select_option("#exercise", "gqa")
    page.select_option("#track", "numpy")
    page.set_input_files("#file", str(big))
    with page.expect_response(lambda r: r.url.endswith("/submit")) as resp:
        page.click("#submit")
    assert resp.value.status == 413 and resp.value.headers["content-type"].startswith("text/html")
    page.wait_for_load_state()
    assert "too large" in page.inner_text("#error") and "1 MB (1,000,000 bytes)" in page.inner_text("#error")
    assert "{" not in page.inner_text("body").split("Exercises", 1)[0]
    assert page.input_value("#exercise") == "gqa" and page.input_value("#track") == "numpy"   # the choice stuck
    page.screenshot(path=str(SHOTS / "ux-too-large.png"), full_page=True)
    empty = tmp_path / "empty.py"
    empty.write_text("")
    page.select_option("#exercise", "gqa")
    page.select_option("#track", "numpy")
    page.set_input_files("#file", str(empty))
    page.click("#submit")
    page.wait_for_load_state()
    assert "empty" in page.inner_text("#error")
    assert page.input_value("#exercise") == "gqa" and page.input_value("#track") == "numpy"   # the choice stuck
    assert page.outside == [] and page.errors == []


def test_status_page_times_and_badges(srv, page, tmp_path):
    ivy = srv.client(srv.tokens["ivy"])
    wrong = submit(ivy, "mha", WRONG, candidate="dan", wait=60).json()
    broken = submit(ivy, "mha", "raise ValueError('boom')\n", candidate="eve", wait=60).json()
    assert wait_done(ivy, wrong["id"])["verdict"] == "failed" and wait_done(ivy, broken["id"])["verdict"] == "error"
    sign_in(page, srv, "ivy")
    page.goto(f"{srv.url}/submissions/{wrong['id']}")
    assert page.locator("#diagnosis .diag .bug").inner_text() == "scale_sqrt_d"
    assert "sqrt(d_k)" in page.inner_text("#diagnosis .hint")
    cats = page.locator("#categories tr").all_inner_texts()[1:]
    assert cats and any(c.startswith("numeric") for c in cats)
    assert page.locator("#failing .failgroup").count() >= 1
    assert "see the JSON report" not in page.inner_text("body") and page.locator("pre.summary").count() == 0
    assert page.get_attribute("#report-link-bottom", "href") == wrong["links"]["report_html"]
    # times: relative text, the exact time in the reader's zone (Tokyo here) on hover; no raw ISO on the page
    t = page.locator("#status time").first
    assert re.fullmatch(r"just now|\d+ s ago|\d+ min ago", t.inner_text()), t.inner_text()
    assert t.get_attribute("title").endswith("(your time)")
    iso = t.get_attribute("datetime")
    assert f"{(int(iso[11:13]) + 9) % 24:02d}:{iso[14:16]}:{iso[17:19]}" in t.get_attribute("title")   # UTC+9
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", page.inner_text("body"))
    page.screenshot(path=str(SHOTS / "ux-status.png"), full_page=True)
    page.goto(f"{srv.url}/submissions/{broken['id']}")
    assert "Nothing to diagnose: your code stopped with an error" in page.inner_text("#diagnosis")
    assert "ValueError: boom" in page.inner_text("#failing")
    page.goto(f"{srv.url}/compare?ids={wrong['id']}&ids={broken['id']}")
    page.click("#back")                                             # the compare page has a way back
    page.wait_for_url(srv.url + "/submissions")
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", page.inner_text("#subs"))
    badge = page.locator(f"tr[data-id='{broken['id']}'] span.v.error")
    style = badge.evaluate("e => { const s = getComputedStyle(e); "
                           "return [s.borderLeftWidth, s.paddingLeft, s.paddingTop, s.color] }")
    assert style == ["0px", "8px", "1px", "rgb(255, 255, 255)"], style
    page.screenshot(path=str(SHOTS / "ux-list.png"), full_page=True)
    assert page.outside == [] and page.errors == []


def test_docs_work_offline(srv, page):
    page.goto(srv.url + "/docs")
    page.wait_for_selector(".opblock", timeout=30_000)     # Swagger UI rendered the operations
    assert page.locator(".opblock").count() >= 10
    assert page.locator("button.authorize").count() == 1          # "Try it out" can carry the token
    assert page.outside == [] and page.errors == [], (page.outside, page.errors)
    page.screenshot(path=str(SHOTS / "ux-docs.png"))


@pytest.mark.parametrize("exercise,ref,old,new", [
    ("kv_cache", "kv_cache_numpy.py", "/ np.sqrt(d_k)", "/ np.sqrt(2 * d_k)"),
    ("flash_attention", "flash_attention_numpy.py", "1.0 / np.sqrt(hs)", "1.0 / np.sqrt(2 * hs)"),
])
def test_kv_cache_and_flash_reports_have_plots(srv, page, exercise, ref, old, new):
    source = (ROOT / "reference" / ref).read_text()
    assert old in source
    ivy = srv.client(srv.tokens["ivy"])
    sub = submit(ivy, exercise, source.replace(old, new), candidate="frank", wait=60).json()
    assert wait_done(ivy, sub["id"])["verdict"] == "failed"
    sign_in(page, srv, "ivy")
    page.goto(srv.url + sub["links"]["report_html"])
    assert page.locator("#plots img[src^='data:image/png']").count() >= 2
    assert "grade batch" not in page.inner_text("body") and "No plot data" not in page.inner_text("body")
    page.locator("#plots").screenshot(path=str(SHOTS / f"ux-plots-{exercise}.png"))


def test_an_interviewers_over_long_candidate_name_is_refused_on_the_page(srv, page, tmp_path):
    upload = tmp_path / "mine.py"
    upload.write_text(WRONG)
    before = len(store_rows(srv.data_dir))
    sign_in(page, srv, "ivy")
    page.goto(srv.url + "/exercises")
    page.fill("#candidate", "c" * 300)
    page.select_option("#exercise", "masked_mha")
    page.set_input_files("#file", str(upload))
    page.click("#submit")
    page.wait_for_load_state()
    assert "candidate: at most 200 characters" in page.inner_text("#error")
    assert page.input_value("#exercise") == "masked_mha"
    assert len(store_rows(srv.data_dir)) == before
