"""The one-shot CLI starts its worker before click (harness/launch.py, harness/grading/start.py, issue 27): a
plain reading of the command line, a start the grade adopts only when it asks for exactly that, and otherwise
a worker closed unused, nothing said twice, nothing left behind."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.grading import start
from harness.grading.engine import grade
from harness.launch import one_shot
from harness.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parent.parent
REF = str(ROOT / "reference" / "mha_numpy.py")
NO_LIMITS = {"call_timeout_s": None, "memory_mb": None}


def wanted(exercise="mha", submission=REF, track="auto", sandbox="auto", limits=NO_LIMITS):
    return {"exercise": exercise, "submission": submission, "track": track, "sandbox": sandbox, "limits": limits}


@pytest.mark.parametrize("argv, environ, expected", [
    (["mha", REF], {}, wanted()),
    (["run", "mha", REF, "-q"], {}, wanted()),
    (["mha", "--track", "numpy", REF, "--sandbox=local"], {}, wanted(track="numpy", sandbox="local")),
    (["mha", REF, "--timeout", "5", "--memory-mb=512", "--seed", "3", "--json", "r.json"], {},
     wanted(limits={"call_timeout_s": 5.0, "memory_mb": 512})),
    (["mha", REF], {"GRADER_SANDBOX": "local"}, wanted(sandbox="local")),
    (["mha", REF, "--sandbox", "docker"], {"GRADER_SANDBOX": "local"}, wanted(sandbox="docker")),
], ids=["plain", "run -q", "options anywhere", "valued options", "sandbox from env", "option over env"])
def test_a_plain_one_shot_command_line_is_read_as_grade_run_reads_it(argv, environ, expected):
    assert one_shot(argv, environ) == expected


@pytest.mark.parametrize("argv, environ", [
    ([], {}), (["list"], {}), (["mha"], {}), (["check", "mha", REF], {}), (["mha", REF, "extra"], {}),
    (["mha", REF, "--help"], {}), (["-h"], {}), (["mha", REF, "--runtime", "runsc"], {}),
    (["mha", REF, "--track", "jax"], {}), (["mha", REF, "--sandbox", "vm"], {}),
    (["mha", REF], {"GRADER_SANDBOX": "vm"}), (["mha", REF, "--seed", "x"], {}),
    (["mha", REF, "--timeout", "soon"], {}), (["mha", REF, "--memory-mb", "1.5"], {}),
    (["mha", REF, "--seed", "1", "--seed", "2"], {}), (["mha", REF, "--json"], {}), (["mha", REF, "--verbose"], {}),
    (["--version"], {}),
])
def test_anything_else_starts_nothing_early(argv, environ):
    assert one_shot(argv, environ) is None


@pytest.fixture
def counted_starts(monkeypatch):
    """Every worker a LocalSandbox starts, in order."""
    handles = []
    original = LocalSandbox.start

    def counting(self, **kwargs):
        handle = original(self, **kwargs)
        handles.append(handle)
        return handle

    monkeypatch.setattr(LocalSandbox, "start", counting)
    yield handles
    start._close_unadopted()


def test_the_file_as_typed_and_as_click_hands_it_over_are_the_same_file(counted_starts, monkeypatch):
    """`grade mha ./my.py`: the early start reads "./my.py", click hands the grade Path("my.py")."""
    monkeypatch.chdir(ROOT)
    assert start.start_early(**wanted(submission="./reference/mha_numpy.py", sandbox="local"))
    report = grade(exercise="mha", submission=Path("reference/mha_numpy.py"), sandbox="local",
                   limits=dict(NO_LIMITS), ends_process=True)
    assert report.verdict == "passed" and len(counted_starts) == 1


def test_the_grade_adopts_the_early_worker_when_it_asks_for_exactly_that(counted_starts):
    assert start.start_early(**wanted(sandbox="local"))
    assert len(counted_starts) == 1
    report = grade(exercise="mha", submission=REF, sandbox="local", limits=dict(NO_LIMITS), ends_process=True)
    assert report.verdict == "passed" and report.environment["worker_starts"] == 1
    assert len(counted_starts) == 1                      # no second worker: the early one graded it
    assert "prepared" not in start._EARLY


@pytest.mark.parametrize("change", [{"sandbox": "auto"}, {"limits": {"call_timeout_s": 7.0, "memory_mb": None}},
                                    {"track": "numpy"}, {"ends_process": False}],
                         ids=["another sandbox", "other limits", "a track named", "an in-process call"])
def test_a_grade_that_asks_for_something_else_closes_the_early_worker_and_starts_its_own(counted_starts, change):
    assert start.start_early(**wanted(sandbox="local"))
    early = counted_starts[0]
    args = dict(exercise="mha", submission=REF, sandbox="local", limits=dict(NO_LIMITS), ends_process=True)
    args.update(change)
    if args["sandbox"] == "auto":
        args["sandbox"] = LocalSandbox()   # a sandbox object is never the early start's
    report = grade(**args)
    assert report.verdict == "passed"
    if change == {"ends_process": False}:          # not the CLI's own grade: the early worker is still unadopted
        assert start._EARLY.get("prepared") is not None
        start._close_unadopted()
    assert early.proc.poll() is not None               # closed (killed), never graded with
    assert len(counted_starts) >= 2


def test_a_warning_of_the_early_start_is_the_grades_to_record_whatever_the_filters(counted_starts, monkeypatch):
    """Under PYTHONWARNINGS=error a warning while starting early neither raises nor prints: the grade records it
    in environment.host_warnings, as it records its own (engine.grade)."""
    import warnings

    original = start.get_exercise

    def warning_exercise(name):
        warnings.warn("an odd exercise folder", RuntimeWarning)
        return original(name)

    monkeypatch.setattr(start, "get_exercise", warning_exercise)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert start.start_early(**wanted(sandbox="local"))
    monkeypatch.setattr(start, "get_exercise", original)
    report = grade(exercise="mha", submission=REF, sandbox="local", limits=dict(NO_LIMITS), ends_process=True)
    assert len(counted_starts) == 1 and report.verdict == "passed"
    assert report.environment["host_warnings"] == ["RuntimeWarning: an odd exercise folder"]


def test_an_early_start_that_cannot_start_says_nothing_and_leaves_nothing(tmp_path, capsys):
    assert not start.start_early(**wanted(submission=str(tmp_path / "missing.py"), sandbox="local"))
    assert not start.start_early(**wanted(exercise="no_such_exercise", sandbox="local"))
    assert start._EARLY == {}
    assert capsys.readouterr() == ("", "")


def test_the_fallback_note_is_said_once_when_the_early_worker_is_adopted(tmp_path):
    """`--sandbox auto` without a Docker engine falls back to a local process with a note: the early start
    keeps it and the grade says it, once."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    done = subprocess.run([sys.executable, "-m", "harness", "mha", REF, "-q"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("mha (numpy track): PASSED")
    assert done.stderr.count("note: grading in a local process") == 1, done.stderr


def test_a_command_line_click_refuses_after_an_early_start_ends_promptly_with_usage(tmp_path):
    """The early reading accepts `--json DIR`; click refuses a directory there (exit 2): the early worker is
    closed at exit, and the process does not wait on it."""
    t = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "mha", REF, "--sandbox", "local", "--json",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--json" in done.stderr and time.monotonic() - t < 30
    assert "Traceback" not in done.stderr
