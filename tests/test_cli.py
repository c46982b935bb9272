"""The `grade` command line through Click's CliRunner: exit codes, one-line errors, the JSON report."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.core.exercises import all_exercises

from .helpers import validate

ROOT = Path(__file__).resolve().parent.parent
REF_NUMPY = ROOT / "reference" / "mha_numpy.py"
EXAMPLE = ROOT / "examples" / "mha_wrong_scale.py"


@pytest.fixture
def run():
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


def test_list_shows_every_exercise_and_its_tracks(run):
    result = run("list")
    assert result.exit_code == 0
    for name, ex in all_exercises().items():
        assert name in result.output
        assert all(f"{t}: {ex.entry_label(t)}" in result.output for t in ex.track_names)
    assert {"mha", "masked_mha", "cross_attention", "gqa", "kv_cache", "flash_attention",
            "attention_cost"} == set(all_exercises())
    assert "python: shapes, params, gqa_params, flops, cross_flops, kv_cache_bytes, score_bytes" in result.output


def test_start_writes_the_stub_and_refuses_to_overwrite(run, tmp_path):
    target = tmp_path / "mine.py"
    assert run("start", "gqa", "--track", "torch", target).exit_code == 0
    assert "class GroupedQueryAttention" in target.read_text()
    again = run("start", "gqa", target)
    assert again.exit_code == 2 and "--force" in again.stderr
    assert run("start", "gqa", "--track", "numpy", target, "--force").exit_code == 0
    assert "def gqa(" in target.read_text()


def test_start_defaults_to_the_exercises_own_track(run, tmp_path):
    target = tmp_path / "cost.py"
    result = run("start", "attention_cost", target)
    assert result.exit_code == 0, result.output
    assert "def kv_cache_bytes(" in target.read_text() and "implement shapes, params" in result.output
    wrong = run("start", "attention_cost", "--track", "torch", tmp_path / "x.py")
    assert wrong.exit_code == 2 and "has no 'torch' track; choose python" in wrong.stderr
    assert run("start", "mha", tmp_path / "m.py").exit_code == 0  # numpy, the first of mha's tracks
    assert "def mha(" in (tmp_path / "m.py").read_text()


def test_passing_run_exits_0_and_writes_a_valid_report(run, tmp_path):
    out = tmp_path / "report.json"
    result = run("mha", REF_NUMPY, "--sandbox", "local", "--json", out, "--seed", "7")
    assert result.exit_code == 0, result.output
    assert "PASSED" in result.output and "shape" in result.output
    data = validate(out.read_text())
    assert data["verdict"] == "passed" and data["score"] == data["max_score"] > 0
    assert data["environment"]["seed"] == 7 and data["environment"]["sandbox"] == "local"
    assert data["track"] == "numpy" and len(data["submission"]["sha256"]) == 64


def test_failing_run_exits_1_and_leads_with_the_diagnosis(run, tmp_path):
    result = run("run", "mha", EXAMPLE, "--sandbox", "local", "--json", tmp_path / "r.json")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert "FAILED" in lines[0]
    assert lines[1].strip().startswith("diagnosis: scale_sqrt_d")
    assert json.loads((tmp_path / "r.json").read_text())["diagnosis"][0]["bug"] == "scale_sqrt_d"


@pytest.mark.parametrize("make,needle", [
    (lambda p: p / "missing.py", "does not exist"),
    (lambda p: p, "is a directory"),
    (lambda p: (p / "bin.py").write_bytes(b"\x00\x01\x02") and p / "bin.py", "binary"),
    (lambda p: (p / "latin.py").write_bytes(b"x = '\xe9'\n") and p / "latin.py", "not UTF-8"),
    (lambda p: (p / "big.py").write_text("#" * 1_000_001) and p / "big.py", "at most 1 MB (1,000,000 bytes)"),
])
def test_unusable_input_exits_2_with_one_line(run, tmp_path, make, needle):
    result = run("mha", make(tmp_path), "--sandbox", "local")
    assert result.exit_code == 2
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("grade: error:")


def test_unknown_exercise_suggests_the_closest(run):
    result = run("mhaa", REF_NUMPY)
    assert result.exit_code == 2
    assert "did you mean 'mha'?" in result.stderr


def test_bad_option_is_a_usage_error(run):
    result = run("mha", REF_NUMPY, "--track", "jax")
    assert result.exit_code == 2


def test_docker_sandbox_unavailable_exits_3_with_a_fix(run, monkeypatch):
    monkeypatch.setenv("GRADER_SANDBOX_IMAGE", "attn-grader-sandbox:does-not-exist")
    result = run("mha", REF_NUMPY, "--sandbox", "docker")
    assert result.exit_code == 3
    assert "fix:" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_track_is_detected_from_the_file(run, tmp_path):
    result = run("mha", ROOT / "reference" / "mha_torch.py", "--sandbox", "local", "--json", tmp_path / "r.json",
                 "-q")
    assert result.exit_code == 0
    assert json.loads((tmp_path / "r.json").read_text())["track"] == "torch"


def test_every_command_has_help_text(run):
    def walk(group, prefix=()):
        for name, cmd in group.commands.items():
            yield prefix + (name,), cmd
            if hasattr(cmd, "commands"):
                yield from walk(cmd, prefix + (name,))

    for path, cmd in walk(main):
        assert cmd.help and cmd.help.strip(), f"`grade {' '.join(path)}` has no help text"
        assert run(*path, "--help").exit_code == 0


def test_console_script_works(grade_cli):
    result = grade_cli("list")
    assert result.returncode == 0 and "mha" in result.stdout


# -- first-hour frictions (issue 9) -------------------------------------------------------------------------
@pytest.fixture
def docker_probe(monkeypatch):
    """Make the Docker availability probe answer with the given checks (and forget its cached answer)."""
    from harness.sandbox import docker as docker_backend

    def use(checks):
        monkeypatch.setattr(docker_backend, "probe", lambda image=None, **kw: checks)
        docker_backend._available_cache.clear()

    yield use
    docker_backend._available_cache.clear()


@pytest.mark.parametrize("checks,why,fix", [
    ([("engine", False, "no Docker engine socket at /var/run/docker.sock", "start it")],
     "no Docker engine socket at /var/run/docker.sock", "grade sandbox doctor"),
    ([("engine", True, "ok", ""), ("image", False, "sandbox image attn-grader-sandbox:9 is missing", "build")],
     "sandbox image attn-grader-sandbox:9 is missing", "grade sandbox build"),
    ([("engine", True, "ok", ""), ("image", True, "ok", ""),
      ("image current", False, "sandbox image attn-grader-sandbox:9 is stale: grader.version='0.0.1'", "rebuild")],
     "is stale", "grade sandbox build"),
])
def test_auto_sandbox_fallback_says_why_and_how_to_fix(run, docker_probe, checks, why, fix):
    docker_probe(checks)
    result = run("mha", REF_NUMPY, "--sandbox", "auto", "-q")
    assert result.exit_code == 0, result.output
    notes = [ln for ln in result.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1, result.stderr
    assert "local process" in notes[0] and "not an isolation boundary" in notes[0]
    assert why in notes[0] and f"`{fix}`" in notes[0]
    assert run("mha", REF_NUMPY, "--sandbox", "local", "-q").stderr == ""  # an explicit choice: no note


class _Engine:
    """A Docker engine client whose ping takes ``slow_s`` to answer: a call with a shorter timeout times out."""

    def __init__(self, timeout: float, slow_s: float, asked: list, refuse: bool = False):
        self.timeout, self.slow_s, self.refuse = timeout, slow_s, refuse
        asked.append(timeout)

    def ping(self):
        import requests

        if self.refuse:
            raise requests.exceptions.ConnectionError("Connection refused")
        if self.timeout < self.slow_s:
            raise requests.exceptions.ReadTimeout(f"Read timed out. (read timeout={self.timeout})")
        return True

    def version(self, api_version=False):
        return {"Version": "99.0"}

    def inspect_image(self, image):
        from harness.sandbox import docker as docker_backend

        return {"Id": "sha256:" + "0" * 64, "Config": {"Labels": {"grader.version": docker_backend._version(),
                                                                 "grader.worker_sha256": docker_backend.worker_sha256()}}}

    def close(self):
        pass


def _starting_client(timeout: float, slow_s: float, asked: list, refuse: bool = False) -> _Engine:
    """As docker.APIClient starts: it asks the engine's API version, and raises a DockerException *from* the
    timeout (what a busy engine gave on this machine, right after the test suite's containers)."""
    import requests
    from docker.errors import DockerException

    engine = _Engine(timeout, slow_s, asked, refuse)
    try:
        engine.ping()
    except requests.exceptions.ReadTimeout as exc:
        raise DockerException(f"Error while fetching server API version: {exc}") from exc
    return engine


@pytest.mark.parametrize("client", [_Engine, _starting_client])
@pytest.mark.parametrize("slow_s,refuse,asked,why", [
    (2.0, False, [0.8, 5.0], None),                       # busy (2 s to answer): asked again, patiently, and used
    (9.0, False, [0.8, 5.0], "timed out"),                # no answer even then: the fallback, saying why
    (0.0, True, [0.8], "Connection refused"),             # an answer (refused): not asked again
])
def test_auto_sandbox_asks_a_slow_engine_again_before_falling_back(monkeypatch, client, slow_s, refuse, asked, why):
    """`--sandbox auto` must not grade in a local process because the engine was busy for a moment (right after
    a run that removed many containers, a ping took over 0.8 s): a timed-out check is made once more with
    BUSY_PROBE_TIMEOUT_S. An engine that answers (even with a refusal) is not asked twice."""
    from harness.sandbox import docker as docker_backend

    seen: list[float] = []
    monkeypatch.setattr(docker_backend, "docker_cli", lambda: "/usr/bin/docker")
    monkeypatch.setattr(docker_backend, "engine_socket_missing", lambda: None)
    monkeypatch.setattr(docker_backend, "api_client",
                        lambda timeout=docker_backend.API_TIMEOUT_S: client(timeout, slow_s, seen, refuse))
    monkeypatch.setattr(docker_backend, "BUSY_PROBE_TIMEOUT_S", 5.0)
    docker_backend._available_cache.clear()
    try:
        reason = docker_backend.DockerSandbox.unavailable_reason(runtime="runc")
    finally:
        docker_backend._available_cache.clear()
    assert seen == asked
    if why is None:
        assert reason is None
    else:
        assert reason[0] == "engine" and why in reason[1]


def _points(text: str) -> list[tuple[str, float, float]]:
    import re

    return [(m[0], float(m[1]), float(m[2])) for m in re.findall(r"(\w+) ([\d.]+)/([\d.]+) pts \[\d+/\d+ tests\]", text)]


def test_summary_shows_points_per_category_summing_to_the_score(run, tmp_path):
    result = run("mha", EXAMPLE, "--sandbox", "local", "--json", tmp_path / "r.json")
    assert result.exit_code == 1
    data = json.loads((tmp_path / "r.json").read_text())
    cats = _points(result.output)
    assert [c[0] for c in cats] == ["shape", "numeric", "edge"]
    assert sum(c[1] for c in cats) == pytest.approx(data["score"]) and 0 < data["score"] < data["max_score"]
    assert sum(c[2] for c in cats) == pytest.approx(data["max_score"])
    numeric = [t for t in data["tests"] if t["category"] == "numeric"]
    passed = sum(t["status"] == "passed" for t in numeric)
    got, of = sum(t["points"] for t in numeric), sum(t["max_points"] for t in numeric)
    assert passed < len(numeric) and f"numeric {got:g}/{of:g} pts [{passed}/{len(numeric)} tests]" in result.output


def test_an_import_error_is_reported_once(run, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\nraise RuntimeError('boom at import')\n")
    result = run("mha", bad, "--sandbox", "local", "--json", tmp_path / "r.json")
    assert result.exit_code == 1
    assert result.output.count("boom at import") == 1, result.output
    data = json.loads((tmp_path / "r.json").read_text())
    n = len(data["tests"])
    assert f"ERROR   all {n} tests: your code raised RuntimeError: boom at import (while importing your file)" \
        in result.output
    assert "... and" not in result.output
    shown = run("report", tmp_path / "r.json")
    assert shown.exit_code == 0
    assert shown.output.count("boom at import") == 2  # the message and the traceback's source line, once each
    assert f"ERROR   {n} tests (all of them), {data['max_score']:g} points lost" in shown.output


HANG = "import numpy as np\nimport time\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    time.sleep(3600)\n"


def test_a_hang_shows_which_test_is_running_and_for_how_long(run, tmp_path, monkeypatch):
    """Off a terminal (CI logs): a plain line per interval while a test runs long, none for quick tests."""
    monkeypatch.setenv("GRADER_PROGRESS_INTERVAL_S", "0.5")
    hang = tmp_path / "hang.py"
    hang.write_text(HANG)
    result = run("mha", hang, "--sandbox", "local", "--timeout", "1.5")
    assert result.exit_code == 1
    lines = [ln for ln in result.stderr.splitlines() if "still running" in ln]
    assert lines, result.stderr
    assert re.match(rf"grading {re.escape(str(hang))}: test 1/\d+ test_output_shape\[b1-s1-d8-h2\] still running "
                    r"after \d+ s", lines[0]), lines[0]
    per_test = {}
    for ln in lines:   # sparse: at most one line per interval (0.5 s) of a test's run, not a stream
        m = re.search(r"test \d+/\d+ (\S+) still running after (\d+) s", ln)
        assert m, ln
        per_test.setdefault(m[1], []).append(int(m[2]))
    for test, secs in per_test.items():   # (a count, not a time: a loaded machine makes runs longer, not denser)
        assert secs == sorted(secs) and len(secs) <= 2 * (max(secs) + 1) + 1, (test, secs)
    assert "\r" not in result.stderr
    quiet = run("mha", hang, "--sandbox", "local", "--timeout", "0.8", "-q")  # still past the 0.5 s interval
    assert quiet.exit_code == 1 and "still running" not in quiet.stderr


def test_a_quick_run_adds_no_progress_lines(run):
    result = run("mha", REF_NUMPY, "--sandbox", "local")
    assert result.exit_code == 0 and "grading" not in result.stderr and "still running" not in result.stderr


def test_live_status_line_on_a_terminal_is_rewritten_and_erased():
    import io

    from harness.cli.progress import RunProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    p = RunProgress(out, label="grading x.py")
    assert p.live
    p(3, 23, "test_causal_mask")
    p.render()
    p.close()
    text = out.getvalue()
    assert text.startswith("\rgrading x.py: test 3/23 test_causal_mask (0 s;") and "\n" not in text
    assert text.endswith("\r") and text.rstrip("\r").endswith(" ")  # erased at the end


@pytest.fixture
def two_exercises(run, tmp_path):
    assert run("mha", EXAMPLE, "--sandbox", "local", "--json", tmp_path / "mha.json", "-q").exit_code == 1
    assert run("gqa", ROOT / "reference" / "gqa_numpy.py", "--sandbox", "local", "--json", tmp_path / "gqa.json",
               "-q").exit_code == 0
    return tmp_path


def test_compare_has_an_exercise_column_and_warns_when_exercises_are_mixed(run, two_exercises):
    one = run("compare", two_exercises / "mha.json")
    assert one.exit_code == 0 and one.stderr == ""
    assert one.stdout.splitlines()[0].strip() == "1 candidate"
    assert "exercise" in one.output and "mha (numpy)" in one.output
    both = run("compare", two_exercises / "mha.json", two_exercises / "gqa.json", "--html", two_exercises / "c.html")
    assert both.exit_code == 0
    assert both.stdout.splitlines()[0].strip() == "2 candidates"
    assert both.stderr.startswith("grade: warning: these reports are for different exercises (gqa (numpy), "
                                  "mha (numpy))")
    page = (two_exercises / "c.html").read_text()
    assert "<h1>2 candidates compared</h1>" in page and 'id="mixed"' in page


def test_compare_missing_file_is_a_one_line_error(run, two_exercises):
    result = run("compare", two_exercises / "mha.json", two_exercises / "nope.json")
    assert result.exit_code == 2
    assert result.stderr.startswith("grade: error: report ") and "does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_help_shows_examples_and_exit_codes(run):
    text = run("run", "--help").output
    assert "Examples:" in text and "grade mha my_mha.py --json r.json" in text
    codes = text[text.index("Exit codes:"):]
    for code in ("0  every test passed", "1  graded and something failed", "2  bad usage",
                 "3  infrastructure fault"):
        assert code in codes
    assert max(len(ln) for ln in text.splitlines()) <= 80


def test_top_level_help_does_not_cut_command_descriptions(run):
    text = run("--help").output
    listed = text[text.index("Commands:"):].splitlines()[1:]
    assert len(listed) == len(main.commands)
    for line in listed:
        assert not line.rstrip().endswith("..."), line
        name = line.split()[0]
        assert main.commands[name].short_help in line  # whole, on one line
    sub = run("sandbox", "--help").output
    assert "..." not in sub[sub.index("Commands:"):]


def test_a_reader_closing_the_pipe_is_no_grader_error(tmp_path):
    """`grade ... | head -1`: the rest of the output has nowhere to go; no 'internal grader error', no exit 3."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "from harness.cli import main; main()", "mha", str(EXAMPLE),
                             "--sandbox", "local"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    first = proc.stdout.readline()
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert b"FAILED" in first
    assert "internal grader error" not in err and code in (1, 141), (code, err)
