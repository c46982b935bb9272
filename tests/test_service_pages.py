"""The web pages in a real headless Chromium (Debian's, driven by Playwright) against a real `grade serve`:
a candidate signs in, downloads a stub, uploads a file, watches the status and reads the report; an
interviewer filters the list, compares, regrades and exports. Candidate text is escaped, forms are
CSRF-protected, the session cookie is HttpOnly. Screenshots go to artifacts/service-pages/ (gitignored)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from tests.service.rounds import signed_in
from tests.service.browser import MARKS, browser, shots  # noqa: F401  (browser: the fixture)
from tests.service.support import Server, make_tokens, store_rows, submit, wait_done

ROOT = Path(__file__).resolve().parent.parent
REF = (ROOT / "reference" / "mha_numpy.py").read_text()
WRONG = (ROOT / "examples" / "mha_wrong_scale.py").read_text()
SHOTS = shots("service-pages")
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"

pytestmark = MARKS


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    data = tmp_path_factory.mktemp("svcpages") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"), ("candidate", "alice"))
    server = Server(data, workers=2).start()
    server.tokens = tokens
    yield server
    server.stop()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1200, "height": 900})
    pg = ctx.new_page()
    pg.csp_errors = []
    pg.on("console", lambda m: pg.csp_errors.append(m.text) if "Content Security Policy" in m.text else None)
    yield pg
    ctx.close()


def sign_in(page, srv, who: str):
    page.goto(srv.url + "/")
    assert page.url.startswith(srv.url + "/login")
    page.fill("#token", srv.tokens[who])
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_candidate_flow(srv, page, tmp_path):
    sign_in(page, srv, "alice")
    assert page.url == srv.url + "/exercises"
    cookie = next(c for c in page.context.cookies() if c["name"] == "grader_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.screenshot(path=str(SHOTS / "candidate-exercises.png"), full_page=True)
    page.click("#ex-mha a.prompt")
    page.wait_for_url(srv.url + "/exercises/mha")
    prompt = (ROOT / "exercises" / "mha" / "README.md").read_text()
    shown = page.inner_text("#prompt-text")   # rendered Markdown: the title is a heading, no markup shows
    assert page.inner_text("#prompt-text h2 >> nth=0") == prompt.splitlines()[0].lstrip("# ").replace("`", "")
    assert "```" not in shown and "**" not in shown
    assert "Multi-head attention" in page.inner_text("h1")
    page.screenshot(path=str(SHOTS / "candidate-prompt.png"), full_page=True)
    page.goto(srv.url + "/exercises")
    with page.expect_download() as dl:
        page.click("#ex-gqa a.stub >> nth=1")
    stub = tmp_path / "stub.py"
    dl.value.save_as(stub)
    assert stub.read_text() == (ROOT / "exercises" / "gqa" / "stub_torch.py").read_text()
    cost = page.inner_text("#ex-attention_cost")  # a one-track exercise of plain functions, and its track
    assert "python" in cost and "kv_cache_bytes(b, t, n_layers, h, g, d_k, bytes_per_elem)" in cost
    assert page.locator("#track option").all_inner_texts() == ["detect", "NumPy", "PyTorch", "Python"]
    upload = tmp_path / "my_mha.py"
    upload.write_text(WRONG)
    page.select_option("#exercise", "mha")
    page.set_input_files("#file", str(upload))
    page.click("#submit")
    page.wait_for_url(re.compile(r".*/submissions/[0-9a-f]+$"))
    sub_id = page.url.rsplit("/", 1)[1]
    page.screenshot(path=str(SHOTS / "candidate-status.png"), full_page=True)
    page.wait_for_selector("#verdict", timeout=120_000)   # the page refreshes itself until graded
    assert page.inner_text("#verdict") == "failed"
    assert "scale_sqrt_d" in page.inner_text("#summary")
    page.screenshot(path=str(SHOTS / "candidate-done.png"), full_page=True)
    page.click("#report-link")
    page.wait_for_load_state()
    assert page.inner_text("#verdict") == "FAILED" and "audience candidate" in page.content()
    assert page.locator("img[src^='data:image/png']").count() >= 1
    page.screenshot(path=str(SHOTS / "candidate-report.png"), full_page=True)
    assert [r["candidate"] for r in store_rows(srv.data_dir) if r["id"] == sub_id] == ["alice"]
    # interviewer pages are not for candidates
    page.goto(srv.url + "/submissions")
    assert page.url == srv.url + "/exercises"
    r = page.goto(srv.url + "/compare?ids=" + sub_id)
    assert r.status == 403
    assert page.csp_errors == []


def test_interviewer_flow_list_filter_compare_regrade_export(srv, page, tmp_path):
    ivy = srv.client(srv.tokens["ivy"])
    a = submit(ivy, "mha", REF, candidate="carol", wait=60).json()
    b = submit(ivy, "mha", WRONG, candidate="dan", wait=60).json()
    sign_in(page, srv, "ivy")
    assert page.url == srv.url + "/submissions"
    assert page.locator("tr.sub").count() >= 2
    page.screenshot(path=str(SHOTS / "interviewer-list.png"), full_page=True)
    page.fill("#f-candidate", "dan")
    page.click("#filter")
    page.wait_for_load_state()
    assert [t.strip() for t in page.locator("tr.sub td.candidate").all_inner_texts()] == ["dan"]
    with page.expect_download() as dl:
        page.click("#export-csv")
    csv_path = tmp_path / "x.csv"
    dl.value.save_as(csv_path)
    text = csv_path.read_text()
    assert "dan" in text and "carol" not in text
    page.goto(srv.url + "/submissions")
    page.check(f"tr[data-id='{a['id']}'] input[type=checkbox]")
    page.check(f"tr[data-id='{b['id']}'] input[type=checkbox]")
    page.click("#compare")
    page.wait_for_load_state()
    assert page.locator("#compare tbody tr").count() == 2
    names = page.locator("#compare tbody tr td:first-child").all_inner_texts()
    assert sorted(n.split(" ")[0] for n in names) == ["carol", "dan"]
    first = page.locator("#compare tbody tr >> nth=0").inner_text()
    page.click("#compare th >> nth=0")          # the sorter runs: its hash is in the page's CSP
    page.click("#compare th >> nth=0")
    assert page.csp_errors == []
    page.screenshot(path=str(SHOTS / "interviewer-compare.png"), full_page=True)
    assert first  # rendered
    page.goto(f"{srv.url}/submissions/{a['id']}")
    page.click("#regrade")
    page.wait_for_url(f"{srv.url}/submissions/{a['id']}")
    done = wait_done(ivy, a["id"])
    assert done["verdict"] == "passed"
    page.goto(f"{srv.url}/submissions/{a['id']}")
    page.wait_for_selector("#verdict")
    page.screenshot(path=str(SHOTS / "interviewer-regraded.png"), full_page=True)
    page.goto(f"{srv.url}/v1/submissions/{b['id']}/report.html")
    assert page.locator("img[src^='data:image/png']").count() >= 2
    page.screenshot(path=str(SHOTS / "interviewer-report.png"), full_page=True)


def test_candidate_text_is_escaped(srv, page):
    ivy = srv.client(srv.tokens["ivy"])
    source = f"def mha(*a, **k):\n    raise ValueError({HOSTILE!r})\n"
    s = submit(ivy, "mha", source, candidate=HOSTILE, wait=60).json()
    sign_in(page, srv, "ivy")
    for url in ("/submissions", f"/submissions/{s['id']}", f"/v1/submissions/{s['id']}/report.html"):
        page.goto(srv.url + url)
        assert page.title() != "pwned", url
        assert page.locator("img[src=x]").count() == 0, url
        assert "onerror" in page.inner_text("body") or url == "/submissions" and HOSTILE in page.inner_text("body")
    page.goto(srv.url + f"/submissions/{s['id']}")
    assert "<script>" in page.inner_text("#summary")


def test_forms_need_the_csrf_token_and_a_bad_token_does_not_sign_in(srv, page):
    before = len(store_rows(srv.data_dir))
    with httpx.Client(base_url=srv.url) as c:
        # a bearer token in the cookie is no session
        c.cookies.set("grader_session", srv.tokens["ivy"])
        assert c.get("/submissions").status_code == 303
    with signed_in(srv.url, srv.tokens["ivy"]) as c:
        assert c.cookies["grader_session"] != srv.tokens["ivy"]
        r = c.post("/submit", files={"file": ("x.py", REF.encode())}, data={"exercise": "mha"})
        assert r.status_code == 403
        sid = store_rows(srv.data_dir)[0]["id"]
        r = c.post(f"/submissions/{sid}/regrade", data={"csrf": "forged"})
        assert r.status_code == 403
        # the API never accepts the cookie for a change
        r = c.post("/v1/submissions", json={"exercise": "mha", "source": REF})
        assert r.status_code == 401
    assert len(store_rows(srv.data_dir)) == before
    page.goto(srv.url + "/login")
    page.fill("#token", "gr_not_a_token")
    page.click("button[type=submit]")
    assert "unknown, revoked or expired" in page.inner_text("#error")
    csp = page.goto(srv.url + "/login").headers["content-security-policy"]
    assert "default-src 'none'" in csp
    scripts = re.search(r"script-src ([^;]*)", csp).group(1).split()   # only hashed scripts (the local times)
    assert scripts and all(re.fullmatch(r"'sha256-[A-Za-z0-9+/]+=*'", x) for x in scripts), csp
