"""The candidate kit (issue 21): `grade kit build` makes a wheel and a zip holding the prompts, stubs and public
vectors and nothing hidden; installed alone (NumPy its only dependency) in a fresh venv, its `grade check` passes
the references and names the vector and the mismatch of a wrong file, and its `grade submit --wait` returns the
verdict of a running `grade serve`. The kit is built once and installed once per session."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from tests.service.support import Server, make_tokens

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = sorted(p.parent.name for p in (ROOT / "exercises").glob("*/exercise.json"))


def tracks_of(exercise: str) -> list[str]:
    meta = json.loads((ROOT / "exercises" / exercise / "exercise.json").read_text())
    return [t for t, spec in meta.items() if isinstance(spec, dict) and ("entry" in spec or "functions" in spec)]


def bug_ids(exercise: str) -> set[str]:
    """The mistakes the grader names for the exercise: the catalogue's and those interviewer.md's table lists."""
    from graders.mutants.catalog import CATALOG

    notes = (ROOT / "exercises" / exercise / "interviewer.md").read_text()
    listed = set(re.findall(r"^\| `([a-z][a-z0-9_]+)` \|", notes, re.M))
    return listed | {b.id for b in CATALOG if any(b.applies(exercise, t) for t in tracks_of(exercise))}


def follow_ups(exercise: str) -> list[str]:
    """The numbered follow-up items of interviewer.md (question and answer), whitespace folded."""
    notes = (ROOT / "exercises" / exercise / "interviewer.md").read_text()
    part = notes[notes.index("## Follow-up"):]
    items = re.findall(r"^\d+\. (.+?)(?=^\d+\. |^#|\Z)", part, re.M | re.S)
    return [" ".join(i.split()) for i in items]
WRONG = ROOT / "examples" / "mha_wrong_scale.py"
TEXT = (".py", ".md", ".json", ".txt", "METADATA", "RECORD", "WHEEL")


def _clean_env(home: Path) -> dict:
    """No PYTHONPATH (the repository must not leak into the venv), no pip configuration (no index, no
    constraints file), no grader settings, a home of its own (grade login's file)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("PIP_", "GRADER_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", HOME=str(home),
               XDG_CONFIG_HOME=str(home / ".config"), PYTHONWARNINGS="ignore")
    return env


def _numpy_wheel_dir() -> Path | None:
    """A folder holding a NumPy wheel of this interpreter's version: the sandbox image's wheel cache, pip's
    find-links folders, or GRADER_TEST_WHEELS."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folders = [os.environ.get("GRADER_TEST_WHEELS"), "/var/cache/attn-grader/wheels", "/opt/wheels"]
    for folder in filter(None, folders):
        if any(Path(folder).glob(f"numpy-{np.__version__}-{tag}-*.whl")):
            return Path(folder)
    return None


@pytest.fixture(scope="session")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    done = subprocess.run([sys.executable, "-m", "harness", "kit", "build", "--out", str(out)], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr
    wheel, = out.glob("attention_grader_kit-*.whl")
    archive, = out.glob("attention-grader-kit-*.zip")
    return SimpleNamespace(out=out, wheel=wheel, zip=archive, stdout=done.stdout)


@pytest.fixture(scope="session")
def venv(kit, tmp_path_factory):
    """A fresh venv with the kit and NumPy only, installed offline (--no-index) from the built wheel and a local
    NumPy wheel; without one, NumPy's installed files are copied in (still nothing else)."""
    base = tmp_path_factory.mktemp("venv")
    path = base / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    py = path / "bin" / "python"
    env = _clean_env(base)
    cmd = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-index", "--find-links",
           str(kit.out)]
    wheels = _numpy_wheel_dir()
    if wheels is not None:
        cmd += ["--find-links", str(wheels), "attention-grader-kit"]
    else:
        site = Path(subprocess.check_output([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                            text=True).strip())
        here = Path(sysconfig.get_paths()["purelib"])
        for item in [Path(np.__file__).parent, *here.glob("numpy.libs"), *here.glob(f"numpy-{np.__version__}.dist-info")]:
            shutil.copytree(item, site / item.name)
        cmd += ["--no-deps", str(kit.wheel)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    env["PATH"] = f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return SimpleNamespace(py=py, env=env, home=base)


def grade(venv, *args, cwd, env=None, timeout=300):
    """`grade ...` as the venv's console script runs it."""
    return subprocess.run([str(venv.py.parent / "grade"), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**venv.env, **(env or {})}, timeout=timeout)


def _kit_texts(kit) -> dict[str, str]:
    """Every text in the wheel and the zip, the vectors' metadata included."""
    texts = {}
    for archive in (kit.wheel, kit.zip):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                data = z.read(name)
                if name.endswith(TEXT) or "entry_points" in name:
                    texts[f"{archive.name}:{name}"] = data.decode("utf-8")
                elif name.endswith(".npz"):
                    with np.load(io.BytesIO(data), allow_pickle=False) as v:
                        texts[f"{archive.name}:{name}"] = str(v["__meta__"])
                elif name.endswith(".whl"):
                    with zipfile.ZipFile(io.BytesIO(data)) as inner:
                        assert sorted(inner.namelist()) == sorted(zipfile.ZipFile(kit.wheel).namelist())
    return texts


# -- what is inside ----------------------------------------------------------------------------------------
def test_the_kit_and_the_grader_share_one_version():
    import gradekit
    import harness

    stated = re.search(r'^version = "(.+)"', (ROOT / "kit" / "pyproject.toml").read_text(), re.M)[1]
    assert stated == harness.__version__ == gradekit.__version__



@pytest.mark.slow
def test_the_build_prints_size_and_dependencies_and_the_readmes_state_them(kit):
    kb = kit.wheel.stat().st_size / 1024
    assert re.search(rf"wheel\s+{re.escape(str(kit.wheel))}\s+{kb:.0f} KB", kit.stdout), kit.stdout
    assert re.search(r"zip\s+\S+\.zip\s+\d+ KB", kit.stdout)
    assert "depends on: numpy<3,>=1.24; torch<=2.13.0,>=2.2; extra == \"torch\"" in kit.stdout
    for readme in (ROOT / "kit" / "README.md", ROOT / "README.md"):
        text = " ".join(readme.read_text().split())
        stated = re.search(r"wheel is about (\d+) KB", text)
        assert stated, f"{readme} does not state the kit's size"
        assert abs(int(stated[1]) - kb) <= 0.25 * kb, f"{readme} says {stated[1]} KB; the wheel is {kb:.0f} KB"
        assert "`numpy>=1.24,<3`" in text and "`torch>=2.2,<=2.13.0`" in text


@pytest.mark.slow
def test_the_kit_holds_prompts_stubs_and_vectors_of_every_exercise_and_track(kit):
    names = set(zipfile.ZipFile(kit.wheel).namelist())
    for exercise in EXERCISES:
        assert f"attention_kit/exercises/{exercise}/README.md" in names
        for track in tracks_of(exercise):
            assert f"attention_kit/exercises/{exercise}/stub_{track}.py" in names
            assert len([n for n in names if n.startswith(f"attention_kit/exercises/{exercise}/vectors/{track}/")]) >= 3
    masked = [n for n in names if n.endswith(("-masked.npz", "-fully_masked_row.npz"))]
    assert len(masked) >= 2 * 4 * 2   # four masked exercises, both tracks, both cases


@pytest.mark.slow
def test_nothing_hidden_is_in_the_kit(kit):
    listing = zipfile.ZipFile(kit.wheel).namelist() + zipfile.ZipFile(kit.zip).namelist()
    for name in listing:
        parts = set(Path(name).parts)
        assert not parts & {"reference", "graders", "harness"}, name
        assert not name.endswith("interviewer.md"), name
    texts = _kit_texts(kit)
    kit_lines = {line.strip() for text in texts.values() for line in text.splitlines()}
    # no line of a reference solution: its body (the imports and signatures are the public contract of the stubs)
    for ref in sorted(p for p in (ROOT / "reference").glob("*_*.py") if p.name != "__init__.py"):
        body = [ln.strip() for ln in ref.read_text().splitlines()
                if ln.strip() and not ln.strip().startswith(("import ", "from ", "def ", "class ", "super().__init__()"))]
        assert len(body) > 5
        leaked = [ln for ln in body if ln in kit_lines]
        assert not leaked, f"{ref.name} lines in the kit: {leaked[:3]}"
    # no bug id the grader names, no follow-up question or answer (the start and the end of every item)
    everything = "\n".join(texts.values())
    found = sorted({b for e in EXERCISES for b in bug_ids(e) if re.search(rf"\b{b}\b", everything)})
    assert not found, f"bug ids in the kit: {found}"
    flat = " ".join(everything.split())
    for exercise in EXERCISES:
        items = follow_ups(exercise)
        assert len(items) >= 5, exercise
        for item in items:
            for snippet in (item[:40], item[-40:]):
                assert snippet not in flat, f"{exercise}: {snippet!r} is in the kit"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_prompt_names_no_bug_and_the_interviewer_notes_list_every_one(exercise):
    from graders.mutants.catalog import CATALOG

    prompt = (ROOT / "exercises" / exercise / "README.md").read_text()
    notes = (ROOT / "exercises" / exercise / "interviewer.md").read_text()
    assert not [b for b in bug_ids(exercise) if re.search(rf"\b{b}\b", prompt)]
    assert "Follow-up" not in prompt and not [i for i in follow_ups(exercise) if i[-40:] in " ".join(prompt.split())]
    missing = [b.id for b in CATALOG if any(b.applies(exercise, t) for t in tracks_of(exercise))
               and f"`{b.id}`" not in notes]
    assert not missing, f"{exercise}/interviewer.md does not list {missing}"


@pytest.mark.slow
def test_the_venv_holds_the_kit_and_numpy_and_nothing_of_the_grader(venv, tmp_path):
    probe = ("import importlib.util as u, importlib.metadata as m, attention_kit, numpy; "
             "print([u.find_spec(n) is None for n in ('harness', 'graders', 'reference', 'exercises', 'gradekit')]); "
             "print(sorted(d.metadata['Name'].lower() for d in m.distributions()))")
    done = subprocess.run([str(venv.py), "-c", probe], capture_output=True, text=True, env=venv.env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    missing, dists = done.stdout.splitlines()
    assert missing == "[True, True, True, True, True]"
    assert eval(dists) == ["attention-grader-kit", "numpy"]   # noqa: S307  (our own probe's output)


@pytest.mark.slow
def test_list_and_start_in_the_venv(venv, tmp_path):
    listed = grade(venv, "list", cwd=tmp_path)
    assert listed.returncode == 0 and [ln.split()[0] for ln in listed.stdout.splitlines()[:-1]] == EXERCISES
    started = grade(venv, "start", "gqa", "--track", "torch", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert (tmp_path / "gqa_torch.py").read_text() == (ROOT / "exercises" / "gqa" / "stub_torch.py").read_text()
    assert grade(venv, "start", "gqa", "--track", "torch", cwd=tmp_path).returncode == 2   # exists: --force


@pytest.mark.slow
def test_beside_the_full_package_the_kit_hands_over_what_it_does_not_have(kit, tmp_path):
    """One environment with both: whichever `grade` script won, the grader's own commands still work."""
    with zipfile.ZipFile(kit.wheel) as z:
        z.extractall(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{ROOT}", "PYTHONWARNINGS": "ignore"}
    kit_grade = [sys.executable, "-c", "import sys; from attention_kit.cli import main; sys.exit(main())"]
    done = subprocess.run([*kit_grade, "tokens", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "revoke" in done.stdout, done.stderr
    done = subprocess.run([*kit_grade, "check", "mha", WRONG], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "mha (numpy track), public vectors: FAILED" in done.stdout


# -- grade check ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("exercise", EXERCISES)
def test_check_passes_the_reference(venv, tmp_path, exercise):
    track = next(t for t in tracks_of(exercise) if t != "torch")     # the venv has no torch
    mine = tmp_path / "solution.py"
    shutil.copy(ROOT / "reference" / f"{exercise}_{track}.py", mine)
    done = grade(venv, "check", exercise, mine, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{exercise} ({track} track), public vectors: PASSED" in done.stdout
    assert "the full hidden suite" in done.stdout and f"grade submit {mine} --exercise {exercise}" in done.stdout


@pytest.mark.slow
def test_check_fails_the_wrong_scale_naming_the_vector_and_the_mismatch(venv, tmp_path):
    done = grade(venv, "check", "mha", WRONG, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "mha (numpy track), public vectors: FAILED  0/4 passed"
    small = next(ln for ln in lines if ln.lstrip().startswith("FAIL") and " small " in ln)
    assert re.search(r"out differs from the reference: max abs error [\d.e-]+, 100\.0% of entries outside "
                     r"atol=rtol=1e-10; first mismatch at index \(0, 0, 0\): got \S+, expected \S+", small), small
    assert any("FAIL" in ln and "fully_masked_row" in ln for ln in lines)
    assert "the full hidden suite" in lines[-1]


@pytest.mark.slow
def test_check_words_shape_dtype_crash_hang_and_import_errors(venv, tmp_path):
    ref = (ROOT / "reference" / "mha_numpy.py").read_text()
    cases = {
        "shape": (ref + "\n_mha = mha\ndef mha(*a, **k):\n    return _mha(*a, **k)[:, :, :4]\n",
                  r"FAIL\s+small .*out has shape \[2, 5, 4\], expected \[2, 5, 8\]"),
        "dtype": (ref + "\n_mha = mha\ndef mha(*a, **k):\n    return _mha(*a, **k).astype('float64')\n",
                  r"FAIL\s+small_float32 .*out has dtype float64, expected float32"),
        "tuple": (ref + "\n_mha = mha\ndef mha(*a, **k):\n    return _mha(*a, **k).tolist()\n",
                  r"FAIL\s+small .*out is list, expected a numpy.ndarray"),
        "crash": ("def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    raise ValueError('boom')\n",
                  r"ERROR\s+small .*your code raised ValueError: boom"),
        "import": ("import nosuchmodule\n", r"ERROR\s+importing your file raised ModuleNotFoundError"),
        "hang": ("def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n        pass\n",
                 r"TIMEOUT\s+small .*no answer within 2 s"),
    }
    for name, (source, expected) in cases.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        done = grade(venv, "check", "mha", path, "--timeout", "2", cwd=tmp_path)
        assert done.returncode == 1 and re.search(expected, done.stdout), (name, done.stdout, done.stderr)
    short = grade(venv, "mha", tmp_path / "shape.py", cwd=tmp_path)   # the stubs' `grade mha FILE`: the check
    assert short.returncode == 1 and "out has shape [2, 5, 4]" in short.stdout
    usage = grade(venv, "check", "mah", tmp_path / "shape.py", cwd=tmp_path)
    assert usage.returncode == 2 and "did you mean 'mha'" in usage.stderr
    assert grade(venv, "check", "mha", tmp_path / "nope.py", cwd=tmp_path).returncode == 2
    torch_file = grade(venv, "check", "mha", ROOT / "reference" / "mha_torch.py", cwd=tmp_path)  # no torch here
    assert torch_file.returncode == 2 and "the torch track needs PyTorch" in torch_file.stderr
    other = grade(venv, "serve", cwd=tmp_path)
    assert other.returncode == 2 and "full attention-grader package" in other.stderr


@pytest.mark.slow
def test_the_full_package_checks_the_torch_track_the_same_way(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "harness", "check", "gqa", ROOT / "reference" / "gqa_torch.py"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and "gqa (torch track), public vectors: PASSED  4/4" in done.stdout, done.stderr
    done = subprocess.run([sys.executable, "-m", "harness", "check", "mha", WRONG], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 1 and "first mismatch at index (0, 0, 0)" in done.stdout


# -- grade submit against a running grade serve ----------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data = tmp_path_factory.mktemp("kitsrv") / "data"
    tokens = make_tokens(data, ("interviewer", "ivy"), ("candidate", "cat"))
    srv = Server(data, workers=1).start()
    srv.tokens = tokens
    yield srv
    srv.stop()


@pytest.mark.slow
def test_kit_submit_waits_for_the_verdict(venv, server, tmp_path):
    host = server.url.removeprefix("http://")
    done = grade(venv, "submit", WRONG, "--exercise", "mha", "--server", host, "--wait", cwd=tmp_path,
                 env={"GRADER_TOKEN": server.tokens["cat"]})
    assert done.returncode == 1, done.stderr
    first, verdict, *rest = done.stdout.splitlines()
    assert re.fullmatch(rf"submitted \w+: (queued|running|done)  {server.url}/submissions/\w+", first), first
    assert verdict.startswith("mha (numpy track): FAILED  score")
    assert "(see the JSON report)" not in done.stdout

    login = grade(venv, "login", server.tokens["cat"], "--server", host, cwd=tmp_path)
    assert login.returncode == 0 and f"logged in to {server.url}" in login.stdout, login.stderr
    saved = Path(login.stdout.split("saved in ")[1].strip())
    assert saved.is_relative_to(venv.home) and saved.stat().st_mode & 0o077 == 0
    mine = tmp_path / "mine.py"
    shutil.copy(ROOT / "reference" / "mha_numpy.py", mine)
    ok = grade(venv, "submit", mine, "--exercise", "mha", "--wait", cwd=tmp_path)
    assert ok.returncode == 0 and "mha (numpy track): PASSED" in ok.stdout, ok.stdout + ok.stderr

    queued = grade(venv, "submit", mine, "--exercise", "mha", cwd=tmp_path, env={"GRADER_SERVER": server.url + "/"})
    assert queued.returncode == 0 and "/submissions/" in queued.stdout and "/v1/" not in queued.stdout

    bad = grade(venv, "submit", mine, "--exercise", "mha", "--server", "ftp://example.com", cwd=tmp_path)
    assert bad.returncode == 2 and "expected http://HOST:PORT or HOST:PORT" in bad.stderr
    refused = grade(venv, "login", "gr_wrong", "--server", host, cwd=tmp_path)
    assert refused.returncode == 2 and "401" in refused.stderr
    invite = grade(venv, "login", f"{server.url}/join?code=abc123", cwd=tmp_path)   # unknown (or no rounds yet)
    assert invite.returncode == 2 and "refused the invitation (HTTP 404" in invite.stderr


@pytest.mark.slow
def test_login_exchanges_an_invitation_link_for_a_token(venv, tmp_path):
    """The round's link `BASE/join?code=CODE` goes to POST /v1/join once; submit then uses the token it gave."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Service(BaseHTTPRequestHandler):
        def _answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((self.path, body, self.headers.get("Authorization")))
            if self.path == "/grader/v1/join":
                self._answer(201, {"token": "gr_from_the_invitation"})
            elif "wait=0&" in self.path or self.path.endswith("wait=0"):
                self._answer(202, {"id": "abc", "status": "queued", "links": {"page": "/submissions/abc"}})
            else:  # a round whose feedback comes after it closes: graded, the verdict held back
                self._answer(200, {"id": "abd", "status": "done", "links": {"page": "/submissions/abd"},
                                   "report": {"status": "received", "feedback": "after_close",
                                              "available_after": "2026-12-02T18:00:00Z"}})

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/grader"
    try:
        done = grade(venv, "login", f"{base}/join?code=s3cret", cwd=tmp_path)
        assert done.returncode == 0 and f"logged in to {base}" in done.stdout, done.stderr
        mine = tmp_path / "mine.py"
        shutil.copy(ROOT / "reference" / "mha_numpy.py", mine)
        sent = grade(venv, "submit", mine, "--exercise", "mha", cwd=tmp_path)
        assert sent.returncode == 0 and sent.stdout.strip() == f"submitted abc: queued  {base}/submissions/abc"
        held = grade(venv, "submit", mine, "--exercise", "mha", "--wait", cwd=tmp_path)
        assert held.returncode == 0 and held.stdout.splitlines()[1] == (
            f"mha: received and graded; this round shows its feedback after 2026-12-02T18:00:00Z, on "
            f"{base}/submissions/abd"), held.stdout + held.stderr
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert seen[0] == ("/grader/v1/join", {"code": "s3cret"}, None)
    assert seen[1][0].startswith("/grader/v1/submissions") and seen[1][2] == "Bearer gr_from_the_invitation"


@pytest.mark.slow
def test_full_submit_takes_a_server_without_scheme_and_grader_server(server, tmp_path):
    env = {**os.environ, "GRADER_TOKEN": server.tokens["ivy"], "PYTHONWARNINGS": "ignore",
           "GRADER_SERVER": server.url.removeprefix("http://")}
    done = subprocess.run([sys.executable, "-m", "harness", "submit", WRONG, "--exercise", "mha", "--wait"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert re.match(rf"submitted \w+: \w+  {server.url}/submissions/\w+\n", done.stdout)
    assert "(see the JSON report)" not in done.stdout
    bad = subprocess.run([sys.executable, "-m", "harness", "submit", WRONG, "--exercise", "mha", "--server",
                          "http://host:notaport"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "expected http://HOST:PORT" in bad.stderr


@pytest.mark.slow
def test_interviewer_notes_reach_staff_only(server):
    ivy, cat = server.client(server.tokens["ivy"]), server.client(server.tokens["cat"])
    staff = ivy.get("/v1/exercises/mha").json()
    assert "**Answer.**" in staff["interviewer_notes"] and "`scale_sqrt_d`" in staff["interviewer_notes"]
    candidate = cat.get("/v1/exercises/mha").json()
    assert candidate["interviewer_notes"] is None and "scale_sqrt_d" not in json.dumps(candidate)
    def page(token):   # signed in through the sign-in form (the session cookie holds a session id, not the token)
        with httpx.Client(base_url=server.url, timeout=60) as browser:
            form = browser.get("/login").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
            assert browser.post("/login", data={"csrf": csrf, "token": token, "next": "/"}).status_code == 303
            r = browser.get("/exercises/mha")
            assert r.status_code == 200
            return r.text

    assert "Interviewer notes" in page(server.tokens["ivy"])   # rendered Markdown on the page
    assert "<strong>Answer.</strong>" in page(server.tokens["ivy"])
    page = page(server.tokens["cat"])
    assert "Interviewer notes" not in page and "scale_sqrt_d" not in page and "Answer." not in page


# -- a new exercise is data, not code --------------------------------------------------------------------------
def _toy(tmp_path, monkeypatch, name: str, meta: dict, reference: str, track: str) -> Path:
    from harness.kit import vectors

    (tmp_path / "exercises" / name).mkdir(parents=True)
    (tmp_path / "exercises" / name / "exercise.json").write_text(json.dumps({"name": name, "title": name,
                                                                              "summary": "", **meta}))
    (tmp_path / "reference").mkdir(exist_ok=True)
    (tmp_path / "reference" / f"{name}_{track}.py").write_text(reference)
    monkeypatch.setattr(vectors, "EXERCISES_DIR", tmp_path / "exercises")
    monkeypatch.setattr(vectors, "REFERENCE_DIR", tmp_path / "reference")
    return tmp_path / "reference" / f"{name}_{track}.py"


def _check(tmp_path, name, file, out) -> tuple[int, str]:
    from gradekit.check import check

    lines: list[str] = []
    code = check(name, Path(file), exercises_dir=tmp_path / "exercises", vectors_for=lambda e, t: out,
                 echo=lines.append, timeout=60)
    return code, "\n".join(lines)


def test_a_track_of_plain_functions_needs_only_its_public_calls(tmp_path, monkeypatch):
    from harness.kit import vectors

    meta = {"python": {"style": "functions", "functions": {"area": {"args": ["w", "h"]},
                                                          "dims": {"args": ["n"], "kwargs": ["square"]}}},
            "public": {"calls": [{"function": "area", "args": {"w": 2, "h": 3}},
                                 {"function": "dims", "args": {"n": 4, "square": True}}]}}
    ref = _toy(tmp_path, monkeypatch, "toy", meta, "def area(w, h):\n    return w * h\n\n\ndef dims(n, square=False):"
               "\n    return {'shape': (n, n) if square else (n,)}\n", "python")
    out = tmp_path / "vectors"
    assert [p.name for p in vectors.build_track("toy", "python", out)] == ["01-area-1.npz", "02-dims-1.npz"]
    code, text = _check(tmp_path, "toy", ref, out)
    assert code == 0 and "toy (python track), public vectors: PASSED  2/2" in text, text
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def area(w, h):\n    return w + h\n\n\ndef dims(n, square=False):\n    return {'shape': [n]}\n")
    code, text = _check(tmp_path, "toy", wrong, out)
    assert code == 1 and "area-1  [area(w=2, h=3)]: returned 5, expected 6" in text, text
    assert "dims-1  [dims(n=4, square=True)]: 'shape': got [4], expected [4, 4]" in text


def test_an_array_track_takes_unknown_arguments_from_exercise_json(tmp_path, monkeypatch):
    from harness.kit import vectors

    meta = {"numpy": {"entry": "scaled", "args": ["X", "alpha"], "kwargs": []}}
    ref = _toy(tmp_path, monkeypatch, "scale", meta, "def scaled(X, alpha):\n    return X * alpha\n", "numpy")
    with pytest.raises(vectors.VectorError, match="no generator for argument 'alpha'"):
        vectors.build_track("scale", "numpy", tmp_path / "v0")
    meta["public"] = {"dims": {"alpha": 3}}
    (tmp_path / "exercises" / "scale" / "exercise.json").write_text(json.dumps({"name": "scale", "title": "",
                                                                               "summary": "", **meta}))
    out = tmp_path / "v1"
    assert len(vectors.build_track("scale", "numpy", out)) == 2   # small and small_float32
    assert _check(tmp_path, "scale", ref, out)[0] == 0
    wrong = tmp_path / "wrong.py"
    wrong.write_text("def scaled(X, alpha):\n    return X * 2\n")
    code, text = _check(tmp_path, "scale", wrong, out)
    assert code == 1 and "out differs from the reference" in text and "first mismatch at index (0, 0, 0)" in text
