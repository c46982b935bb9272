"""`grade report` (terminal and HTML), `grade compare`, and the plot arrays behind them.

The HTML page is opened in headless Chromium: the verdict text is there, every plot decoded to a real image,
and a screenshot is saved under artifacts/ (gitignored) for a human to look at."""

from __future__ import annotations

import base64
import html.parser
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.core import sidecar
from harness.reports import plots as arts
from harness.core.case import random_case

from .helpers import validate

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
SECRET_MESSAGE = "SECRET-HIDDEN-MESSAGE-7f3a"
SECRET_INPUT = "SECRET-HIDDEN-INPUT-91c2"
PROBE = ("<script>window.addEventListener('load',function(){var ims=document.images;"
         "for(var i=0;i<ims.length;i++){ims[i].setAttribute('data-nw',ims[i].naturalWidth);"
         "ims[i].setAttribute('data-nh',ims[i].naturalHeight);}"
         "document.body.setAttribute('data-probe',String(ims.length));%s});</script>")

needs_chromium = pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true",
                                    reason="chromium is not installed (CI installs it: .ci/run)")


def grade_cli(cwd, *args, timeout=300):
    return subprocess.run(["grade", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A small batch: a passing and a wrong-scale NumPy file, and a torch module without the 1/sqrt(d_k)."""
    work = tmp_path_factory.mktemp("reports")
    subs = work / "subs"
    subs.mkdir()
    shutil.copy(ROOT / "reference" / "mha_numpy.py", subs / "alice.py")
    shutil.copy(ROOT / "examples" / "mha_wrong_scale.py", subs / "bob.py")
    torch_ref = (ROOT / "reference" / "mha_torch.py").read_text()
    no_scale = torch_ref.replace(" / math.sqrt(self.d_k)", "")
    assert no_scale != torch_ref
    (subs / "carol.py").write_text(no_scale)
    r = grade_cli(work, "batch", "subs", "--exercise", "mha", "--sandbox", "local", "--jobs", "2", "--out", "out")
    assert r.returncode == 1, r.stdout + r.stderr
    found = {p.name.split(".")[0].removeprefix("subs__"): p for p in (work / "out").glob("*.json")}
    assert set(found) == {"alice", "bob", "carol"}
    return work, found


def chromium(*args, cwd) -> subprocess.CompletedProcess:
    profile = Path(cwd) / "chromium-profile"
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


class _Imgs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.body, self.verdict, self._in_verdict = [], {}, "", False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a)
        elif tag == "body":
            self.body = a
        elif a.get("id") == "verdict":
            self._in_verdict = True

    def handle_data(self, data):
        if self._in_verdict:
            self.verdict += data

    def handle_endtag(self, tag):
        if self._in_verdict and tag == "div":
            self._in_verdict = False


def _no_network(page: str) -> None:
    low = page.lower()
    for needle in ('src="http', "src='http", 'href="http', "href='http", "url(http", "url(//", "<link",
                   "<iframe", "@import", 'src="//'):
        assert needle not in low, needle


# -- terminal ---------------------------------------------------------------------------------------------
def test_terminal_report_verdict_diagnosis_first_categories_and_failing_diagnostics(graded):
    work, found = graded
    r = grade_cli(work, "report", found["bob"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    rep = json.loads(found["bob"].read_text())           # the suite grows: read its figures, don't pin them
    failing = [t for t in rep["tests"] if t["status"] != "passed"]
    num = [t for t in rep["tests"] if t["category"] == "numeric"]
    num_pts = sum(t["points"] for t in num)
    assert "verdict: FAILED" in out and f"score {rep['score']:g}/{rep['max_score']:g}" in out
    assert 0 < rep["score"] < rep["max_score"]
    assert out.index("diagnosis:") < out.index("score by category:") < out.index(f"failing tests ({len(failing)}):")
    assert out.index("hint: divide Q·Kᵀ by sqrt(d_k)") < out.index("your output matches the reference")
    n_pass = sum(t["status"] == "passed" for t in num)
    assert "numeric    ##" in out
    assert f"{num_pts:g}/{sum(t['max_points'] for t in num):g} points, {n_pass}/{len(num)} tests" in out
    assert "FAIL    numeric   test_matches_reference_float64" in out and "max_abs_error: 1.187" in out
    r = grade_cli(work, "report", found["alice"])
    assert "verdict: PASSED" in r.stdout and "every test passed" in r.stdout


def test_report_usage_errors(tmp_path):
    r = grade_cli(tmp_path, "report", "missing.json")
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "bad.json").write_text('{"schema": "attention-grader/report/v1"}')
    r = grade_cli(tmp_path, "report", "bad.json")
    assert r.returncode == 2 and "not a valid grading report" in r.stderr


# -- candidate audience -----------------------------------------------------------------------------------
def _with_hidden_tests(graded, tmp_path) -> tuple[Path, list[str]]:
    """bob's report with two failing tests (one of them plotted) turned into hidden tests carrying secrets."""
    work, found = graded
    data = json.loads(found["bob"].read_text())
    plotted = [i["test_id"] for i in data["artifacts"]["items"]]
    hidden = [plotted[0], "test_non_contiguous_inputs[strided]"]
    for t in data["tests"]:
        if t["id"] in hidden:
            t["visibility"] = "hidden"
            t["message"] = f"{SECRET_MESSAGE}: got -0.123456, expected 0.654321"
            t["diagnostics"]["case"] = {"secret_input": SECRET_INPUT}
    validate(data)
    path = tmp_path / found["bob"].name
    path.write_text(json.dumps(data))
    shutil.copy(found["bob"].with_suffix(".npz"), tmp_path)
    shutil.copy(work / "subs" / "bob.py", tmp_path / "bob.py")
    return path, hidden


@needs_chromium
def test_candidate_audience_hides_hidden_test_messages_inputs_and_plots(graded, tmp_path):
    path, hidden = _with_hidden_tests(graded, tmp_path)
    src = ["--source", tmp_path / "bob.py"]
    cand = grade_cli(tmp_path, "report", path, "--audience", "candidate", "--html", "cand.html", *src)
    inter = grade_cli(tmp_path, "report", path, "--html", "inter.html", *src)
    assert cand.returncode == 0 and inter.returncode == 0, cand.stderr + inter.stderr
    cand_html, inter_html = (tmp_path / "cand.html").read_text(), (tmp_path / "inter.html").read_text()
    for secret in (SECRET_MESSAGE, SECRET_INPUT, "-0.123456"):
        assert secret in inter.stdout and secret in inter_html          # the control: interviewers see it
        assert secret not in cand.stdout and secret not in cand_html
    assert "hidden test: details are not shown to candidates" in cand.stdout
    assert all(h in cand.stdout for h in hidden)                         # the test is listed, its details are not
    # the hidden test's plots (its inputs) are gone for candidates, the visible ones stay
    assert f"<h3>{hidden[0]}</h3>" in inter_html and f"<h3>{hidden[0]}</h3>" not in cand_html
    assert cand_html.count("<img") >= 2
    assert 'class="src"' in cand_html  # the candidate's own source is shown


# -- HTML in a browser ------------------------------------------------------------------------------------
@needs_chromium
def test_html_page_renders_in_headless_chromium_with_plots(graded, tmp_path):
    work, found = graded
    page = tmp_path / "bob.html"
    r = grade_cli(work, "report", found["bob"], "--html", page)
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    _no_network(text)
    assert "<script" not in text.lower()
    for piece in ('id="categories"', 'id="diagnosis"', 'id="plots"', 'id="tests"', 'id="source"',
                  "Hint: divide Q·Kᵀ by sqrt(d_k)", "scale_sqrt_d", 'class="src"', "test_matches_reference_float64"):
        assert piece in text, piece
    # the diagnosis card leads with the bug id and its summary, then the hint
    assert text.index('class="bug">scale_sqrt_d') < text.index("your output matches the reference") < \
        text.index("Hint:")
    assert text.count("<tr><td><span class=\"st") == len(json.loads(found["bob"].read_text())["tests"])  # all tests
    # the plots: PNGs that decode to real, non-blank pictures
    parser = _Imgs()
    parser.feed(text)
    assert len(parser.imgs) >= 4
    from PIL import Image

    for img in parser.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        pic = Image.open(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1]))).convert("L")
        assert pic.width > 300 and pic.height > 200
        lo, hi = pic.getextrema()
        assert hi - lo > 100  # not a blank canvas

    # in the browser: the verdict is shown and every image decoded with a non-zero size
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE % "" + "</body>"))
    dom = chromium("--dump-dom", probe.as_uri(), cwd=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Imgs()
    parsed.feed(dom.stdout)
    assert parsed.verdict.strip() == "FAILED"
    assert parsed.body.get("data-probe") == str(len(parser.imgs))
    assert all(int(i["data-nw"]) > 300 and int(i["data-nh"]) > 200 for i in parsed.imgs)

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report_wrong_scale.png"
    shot.unlink(missing_ok=True)
    r = chromium(f"--screenshot={shot}", "--window-size=1200,3000", page.as_uri(), cwd=tmp_path)
    assert r.returncode == 0 and shot.stat().st_size > 50_000, r.stderr[-2000:]
    shutil.copy(page, ARTIFACTS / "report_wrong_scale.html")


@needs_chromium
def test_torch_report_plots_and_passing_report_has_none(graded, tmp_path):
    work, found = graded
    carol = json.loads(found["carol"].read_text())
    assert carol["track"] == "torch" and [d["bug"] for d in carol["diagnosis"]] == ["no_scale"]
    page = tmp_path / "carol.html"
    assert grade_cli(work, "report", found["carol"], "--html", page).returncode == 0
    text = page.read_text()
    assert text.count("<img") >= 4
    assert "below it the weights the candidate" in text  # derivable through the biases too
    alice = tmp_path / "alice.html"
    assert grade_cli(work, "report", found["alice"], "--html", alice).returncode == 0
    text = alice.read_text()
    assert 'id="verdict">PASSED<' in text and "<img" not in text and "Nothing to diagnose" in text


def test_report_without_sidecar_says_so(graded, tmp_path):
    work, found = graded
    data = json.loads(found["bob"].read_text())
    data.pop("artifacts")
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(data))
    r = grade_cli(tmp_path, "report", path, "--html", "plain.html")
    assert r.returncode == 0
    text = (tmp_path / "plain.html").read_text()
    assert "No plot data" in text and "<img" not in text
    assert "source is not available" in text  # the report's relative path does not resolve from here


# -- compare ----------------------------------------------------------------------------------------------
@needs_chromium
def test_compare_table_and_sortable_html(graded, tmp_path):
    work, found = graded
    r = grade_cli(work, "compare", "out", "--html", tmp_path / "cmp.html")
    assert r.returncode == 0, r.stderr
    for name, bug in (("alice", None), ("bob", "scale_sqrt"), ("carol", "no_scale")):
        line = next(ln for ln in r.stdout.splitlines() if f"subs/{name}.py" in ln)
        if bug:
            assert bug in line and "failed" in line
        else:
            assert "passed" in line
    page = (tmp_path / "cmp.html").read_text()
    _no_network(page)
    assert page.count("<tr>") == 4
    # click "score" twice (descending by percentage): alice (full marks) first
    click = ("var th=document.querySelectorAll('th')[3];th.click();th.click();"
             "document.body.setAttribute('data-order',Array.from(document.querySelectorAll('tbody tr'))"
             ".map(function(r){return r.cells[0].textContent}).join('|'));")
    probe = tmp_path / "cmp_probe.html"
    probe.write_text(page.replace("</body>", PROBE % click + "</body>"))
    dom = chromium("--dump-dom", probe.as_uri(), cwd=tmp_path)
    order = dom.stdout.split('data-order="', 1)[1].split('"', 1)[0].split("|")
    reports = {n: json.loads(p.read_text()) for n, p in found.items()}
    pct = {n: d["score"] / d["max_score"] for n, d in reports.items()}
    assert order == [f"subs/{n}.py" for n in sorted(pct, key=lambda n: -pct[n])]


# -- the arrays behind the plots --------------------------------------------------------------------------
def _arrays(case):
    return {k: v for k, v in case.arrays().items()}


@pytest.mark.parametrize("kind", ["mha_bias_mask", "cross", "gqa"])
def test_reference_pattern_reproduces_the_oracle(kind):
    from graders.common import oracle

    rng = np.random.default_rng(3)
    if kind == "cross":
        case = random_case(rng, b=2, s=4, s_k=6, d=8, h=2, cross=True)
    elif kind == "gqa":
        case = random_case(rng, b=2, s=5, d=8, h=4, g=2)
    else:
        mask = rng.random((2, 2, 5, 5)) < 0.3
        mask[0, 0, 1] = True  # a fully masked row
        case = random_case(rng, b=2, s=5, d=8, h=2, bias=True, mask=mask)
    a = _arrays(case)
    ref = oracle.forward(case.x, case.wq, case.wk, case.wv, case.wo, case.h, y=case.y, g=case.g, mask=case.mask,
                         bq=case.bq, bk=case.bk, bv=case.bv, bo=case.bo)
    p = arts.reference_pattern(a, case.h, case.g)
    ctx = p @ arts.values(a, case.h, case.g)
    merged = ctx.transpose(0, 2, 1, 3).reshape(ref.shape)
    np.testing.assert_allclose(merged @ case.wo + (case.bo if case.bo is not None else 0), ref, atol=1e-12)
    np.testing.assert_allclose(arts.contexts(a, case.h, ref), ctx, atol=1e-9)


def test_implied_pattern_recovers_a_wrong_scale_exactly_and_refuses_when_underdetermined():
    from graders.common import oracle

    rng = np.random.default_rng(5)
    case = random_case(rng, b=1, s=5, d=8, h=2)           # d_k = 4, s_k = 5: solvable with sum(row) = 1
    a = _arrays(case)
    out = oracle.forward(case.x, case.wq, case.wk, case.wv, case.wo, 2, bugs={"scale_sqrt_d"})
    p, note = arts.implied_pattern(a, 2, None, out)
    assert p is not None and "sums to 1" in note
    wrong = arts.reference_pattern({**a, "wq": a["wq"] * np.sqrt(4 / 8)}, 2)  # scores scaled by 1/sqrt(d)
    np.testing.assert_allclose(p, wrong, atol=1e-8)
    assert not np.allclose(p, arts.reference_pattern(a, 2), atol=1e-3)
    big = random_case(rng, b=1, s=8, d=8, h=2)             # d_k + 1 < s_k: not derivable, and it says why
    p, note = arts.implied_pattern(_arrays(big), 2, None, np.zeros((1, 8, 8)))
    assert p is None and "underdetermined" in note


def test_sidecar_round_trip_and_hash_check(tmp_path):
    rng = np.random.default_rng(0)
    case = random_case(rng, b=1, s=3, d=4, h=2)
    item = {"test_id": "t", "h": 2, "g": None, "dtype": "float64",
            "arrays": {**_arrays(case), "out": np.ones((1, 3, 4)), "ref": np.zeros((1, 3, 4))}}
    entry = sidecar.save([item], tmp_path / "r.npz")
    (loaded,) = sidecar.load(entry, tmp_path / "r.json")
    assert set(loaded["arrays"]) == set(item["arrays"])
    np.testing.assert_array_equal(loaded["arrays"]["x"], case.x)
    with np.load(tmp_path / "r.npz", allow_pickle=False) as z:  # plain arrays only
        assert all(z[k].dtype != object for k in z.files)
    data, same = sidecar.encode([item], "r.npz")   # the service's path: the same bytes, made in memory
    assert data == (tmp_path / "r.npz").read_bytes() and same == entry
    (tmp_path / "r.npz").write_bytes(b"tampered")
    assert sidecar.load(entry, tmp_path / "r.json") == []


# -- the diagnosis card, plot ticks, test descriptions (issue 9) ---------------------------------------------
class _Cards(html.parser.HTMLParser):
    """The diagnosis cards: for each, its direct children in order as [tag, class, text], and its evidence table
    rows as lists of cell texts."""

    VOID = {"br", "img", "hr", "meta", "input", "wbr"}

    def __init__(self):
        super().__init__()
        self.cards, self.depth, self.child, self.cell = [], 0, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if not self.depth:
            if tag == "div" and a.get("class") == "diag":
                self.cards.append({"children": [], "evidence": []})
                self.depth = 1
            return
        if tag in self.VOID:
            return
        if self.depth == 1:
            self.child = [tag, a.get("class", ""), ""]
            self.cards[-1]["children"].append(self.child)
        if tag == "tr":
            self.cards[-1]["evidence"].append([])
        elif tag in ("th", "td"):
            self.cell = ""
        self.depth += 1

    def handle_data(self, data):
        if self.depth > 1 and self.child is not None:
            self.child[2] += data
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if not self.depth or tag in self.VOID:
            return
        self.depth -= 1
        if tag in ("th", "td") and self.cell is not None:
            self.cards[-1]["evidence"][-1].append(self.cell.strip())
            self.cell = None
        if self.depth == 1:
            self.child = None


def test_diagnosis_card_leads_with_bug_and_summary_then_hint_and_an_evidence_table(graded):
    from harness.core.report import read_report
    from harness.reports.html import render_html

    work, found = graded
    data = json.loads(found["bob"].read_text())
    page = render_html(read_report(found["bob"]), report_path=found["bob"])
    parser = _Cards()
    parser.feed(page)
    assert len(parser.cards) == len(data["diagnosis"]) == 1
    card, diag = parser.cards[0], data["diagnosis"][0]
    kinds = [(tag, cls) for tag, cls, _ in card["children"]]
    assert kinds == [("h3", "bug-title"), ("p", "summary"), ("div", "hint"), ("table", "evidence")], kinds
    assert card["children"][0][2].strip() == diag["bug"] == "scale_sqrt_d"
    assert card["children"][1][2].strip() == diag["summary"]
    assert card["children"][2][2].strip() == f"Hint: {diag['hint']}"
    rows = dict(card["evidence"])
    assert len(rows) == len(diag["evidence"])
    assert rows["outputs checked"] == str(diag["evidence"]["outputs_checked"])
    assert "test_matches_reference_float64" in rows["failing tests explained"]
    assert "{" not in card["children"][3][2]  # a table, not a printed dict


def test_plot_token_axes_have_integer_ticks(monkeypatch):
    from graders.common import oracle
    from harness.reports import html as html_report

    figures = []
    monkeypatch.setattr(html_report, "_png", lambda fig: (figures.append(fig), "data:image/png;base64,")[1])
    rng = np.random.default_rng(0)
    case = random_case(rng, b=1, s=3, d=8, h=2)   # 3 tokens: matplotlib's default ticks would be -0.5, 0, 0.5...
    a = _arrays(case)
    a["out"] = oracle.forward(case.x, case.wq, case.wk, case.wv, case.wo, 2, bugs={"scale_sqrt_d"})
    a["ref"] = oracle.forward(case.x, case.wq, case.wk, case.wv, case.wo, 2)
    item = {"test_id": "t", "h": 2, "g": None, "dtype": "float64", "arrays": a}
    html_report.error_heatmaps(item)
    html_report.attention_patterns(item)
    labelled = 0
    for fig in figures:
        for ax in fig.axes:
            for label, ticks, lim in ((ax.get_xlabel(), ax.get_xticks(), ax.get_xlim()),
                                      (ax.get_ylabel(), ax.get_yticks(), ax.get_ylim())):
                if not label:
                    continue  # colour bars measure values, not tokens
                labelled += 1
                lo, hi = sorted(lim)
                shown = [t for t in ticks if lo <= t <= hi]
                assert shown and all(float(t).is_integer() for t in shown), (label, shown)
    assert labelled >= 6


OTHER_EXERCISES = {"mha": ("GQA", "g=", "group", "cross"), "masked_mha": ("GQA", "g=", "group", "cross"),
                   "cross_attention": ("GQA", "g=", "group"), "gqa": ("cross",)}


@pytest.mark.parametrize("exercise,track", [("mha", "numpy"), ("mha", "torch"), ("masked_mha", "numpy"),
                                            ("cross_attention", "numpy"), ("gqa", "numpy")])
def test_test_descriptions_name_only_this_exercise(exercise, track):
    from harness.grading.engine import grade

    report = grade(exercise=exercise, submission=ROOT / "reference" / f"{exercise}_{track}.py", track=track,
                   sandbox="local")
    assert report.verdict == "passed"
    for t in report.tests:
        for word in OTHER_EXERCISES[exercise]:
            assert word.lower() not in t.description.lower(), (t.id, t.description)
