"""Fault injection on the host side: when the grader itself fails, the run is an infrastructure error (exit 3,
InfrastructureError) or a retry that then passes; never a failed or errored test charged to the candidate.

Each injection breaks one host-side part: the hidden suite's fixtures and helpers, the pytest plugin, the
sandbox set-up, the diagnosis, the report writer; and the environment: warning filters, PYTHONSAFEPATH,
PYTHONOPTIMIZE, pytest's own variables, an unusable TMPDIR.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import graders.common.oracle
import graders.common.problem
import graders.mutants.diagnose
import harness.core.report
from harness.grading import plugin as grader_plugin
from harness.cli import main
from harness.grading.engine import grade
from harness.core.errors import InfrastructureError
from harness.sandbox import local

from .helpers import validate

ROOT = Path(__file__).resolve().parent.parent
REF_NUMPY = ROOT / "reference" / "mha_numpy.py"
REF_TORCH = ROOT / "reference" / "gqa_torch.py"
WRONG = ROOT / "examples" / "mha_wrong_scale.py"


def grade_ref(path=REF_NUMPY, exercise="mha"):
    return grade(exercise=exercise, submission=path, sandbox="local")


# -- the hidden suite and the plugin -----------------------------------------------------------------------
def test_a_suite_helper_raising_is_an_infrastructure_error(monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("oracle exploded")

    monkeypatch.setattr(graders.common.oracle, "forward", broken)
    with pytest.raises(InfrastructureError, match="oracle exploded") as info:
        grade_ref()
    assert "no test is charged" in str(info.value)


def test_a_fixture_raising_is_an_infrastructure_error(monkeypatch):
    def broken(self, *args, **kwargs):
        raise RuntimeError("fixture broke")

    monkeypatch.setattr(graders.common.problem.Problem, "make", broken)
    with pytest.raises(InfrastructureError, match="fixture broke"):
        grade_ref()


def test_a_plugin_hook_raising_is_an_infrastructure_error(monkeypatch):
    def broken(self, session, config, items):
        raise KeyError("plugin broke")

    monkeypatch.setattr(grader_plugin.GraderPlugin, "pytest_collection_modifyitems", broken)
    with pytest.raises(InfrastructureError):
        grade_ref()


def test_a_grader_bug_never_becomes_a_test_status():
    """The plugin maps only the candidate's failures to statuses; anything else is ours."""
    assert grader_plugin._status_for(TypeError("bad operand")) is None
    assert grader_plugin._status_for(InfrastructureError("sandbox gone")) is None
    assert grader_plugin._status_for(RuntimeWarning("overflow")) is None
    assert grader_plugin._status_for(AssertionError("values differ"))[0] == "failed"


# -- the sandbox set-up -------------------------------------------------------------------------------------
def _failing_first_starts(monkeypatch, fails: int) -> dict:
    """The first ``fails`` workers die before booting, as a sandbox whose set-up failed would."""
    original = local.LocalSandbox._command
    calls = {"n": 0}

    def command(root, track, entry):
        calls["n"] += 1
        if calls["n"] <= fails:
            return ["/bin/sh", "-c", "echo 'mount /tmp/grade-1-x: No such file or directory' >&2; exit 1"]
        return original(root, track, entry)

    monkeypatch.setattr(local.LocalSandbox, "_command", staticmethod(command))
    return calls


def test_a_sandbox_that_fails_once_is_retried_and_the_reference_passes(monkeypatch):
    calls = _failing_first_starts(monkeypatch, 1)
    report = grade_ref()
    assert report.verdict == "passed", [(t.id, t.message) for t in report.tests if t.status != "passed"]
    assert calls["n"] == 2 and report.environment["worker_starts"] == 2


def test_a_sandbox_that_never_starts_is_an_infrastructure_error(monkeypatch):
    calls = _failing_first_starts(monkeypatch, 99)
    with pytest.raises(InfrastructureError, match="could not start a worker") as info:
        grade_ref()
    assert "No such file or directory" in str(info.value)  # the worker's stderr says why
    assert calls["n"] == 3


def test_a_sandbox_start_raising_is_an_infrastructure_error(monkeypatch):
    def broken(self, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(local.LocalSandbox, "start", broken)
    with pytest.raises(InfrastructureError, match="No space left"):
        grade_ref()


def test_a_worker_that_hangs_before_booting_is_an_infrastructure_error(monkeypatch):
    monkeypatch.setattr(local.LocalSandbox, "_command", staticmethod(lambda root, track, entry: ["/bin/sleep", "30"]))
    with pytest.raises(InfrastructureError, match="boot"):
        grade(exercise="mha", submission=REF_NUMPY, sandbox="local", limits={"startup_timeout_s": 0.5})


def test_the_candidate_failing_at_import_is_still_the_candidates(tmp_path):
    """The control: the boot frame separates our start-up from the candidate's; an import error is a report."""
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('my bug')\n")
    report = grade(exercise="mha", submission=path, sandbox="local")
    assert report.verdict == "error" and report.environment["worker_starts"] == 1
    assert all(t.status == "error" for t in report.tests)
    assert "my bug" in report.tests[0].message


# -- after the suite: diagnosis, report writer --------------------------------------------------------------
def test_the_diagnosis_raising_is_an_infrastructure_error(monkeypatch):
    def broken(*args, **kwargs):
        raise IndexError("diagnosis broke")

    monkeypatch.setattr(graders.mutants.diagnose, "diagnose", broken)
    with pytest.raises(InfrastructureError, match="diagnosis broke"):
        grade(exercise="mha", submission=WRONG, sandbox="local")


def test_the_report_writer_failing_is_exit_3(monkeypatch, tmp_path):
    def full_disk(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(harness.core.report, "write_atomic", full_disk)
    result = CliRunner().invoke(main, ["mha", str(REF_NUMPY), "--sandbox", "local", "--json",
                                       str(tmp_path / "r.json")])
    assert result.exit_code == 3, result.output
    assert "grade: error: could not write the report" in result.output


def test_an_unexpected_exception_in_the_cli_is_exit_3_not_1(monkeypatch):
    import harness.grading.engine

    def broken(**kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(harness.grading.engine, "_grade", broken)
    result = CliRunner().invoke(main, ["mha", str(REF_NUMPY), "--sandbox", "local"])
    assert result.exit_code == 3
    assert "grade: error: internal grader error: ZeroDivisionError: boom" in result.output


# -- the environment ----------------------------------------------------------------------------------------
def run_cli(*args, env_extra: dict, cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONWARNINGS"))}
    env.update(env_extra)
    grade_exe = Path(sys.executable).with_name("grade")
    return subprocess.run([str(grade_exe), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd or ROOT)


ODD_ENVIRONMENTS = {
    "warnings-as-errors": {"PYTHONWARNINGS": "error"},
    "safe-path+optimize": {"PYTHONSAFEPATH": "1", "PYTHONOPTIMIZE": "2", "PYTHONDONTWRITEBYTECODE": "1"},
    "pytest-variables": {"PYTEST_ADDOPTS": "-x --no-such-option -p no:python", "PYTEST_PLUGINS": "no_such_plugin",
                         "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "0"},
    "unusable-tmpdir+c-locale": {"TMPDIR": "/nonexistent/tmp", "LC_ALL": "C", "LANG": "C"},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ODD_ENVIRONMENTS))
def test_an_odd_environment_changes_no_verdict(name, tmp_path):
    env = ODD_ENVIRONMENTS[name]
    out = tmp_path / "r.json"
    ok = run_cli("mha", REF_NUMPY, "--sandbox", "local", "--json", out, env_extra=env, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = validate(json.loads(out.read_text()))
    assert report["score"] == report["max_score"]
    torch_ok = run_cli("gqa", REF_TORCH, "--sandbox", "local", "-q", env_extra=env, cwd=tmp_path)
    assert torch_ok.returncode == 0, torch_ok.stdout + torch_ok.stderr
    wrong = run_cli("mha", WRONG, "--sandbox", "local", env_extra=env, cwd=tmp_path)  # checks still bite
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "scale_sqrt_d" in wrong.stdout


def test_a_host_warning_is_recorded_not_raised(monkeypatch):
    import warnings

    original = graders.common.oracle.forward

    def noisy(*args, **kwargs):
        warnings.warn("the oracle is noisy", RuntimeWarning)
        return original(*args, **kwargs)

    monkeypatch.setattr(graders.common.oracle, "forward", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as PYTHONWARNINGS=error would set it
        report = grade_ref()
    assert report.verdict == "passed"
    assert report.environment["host_warnings"] == ["RuntimeWarning: the oracle is noisy"]
    validate(report)


def test_the_fault_injection_script_exits_3_through_the_console_script(tmp_path):
    """End to end: a suite helper that raises, injected with sitecustomize into the real `grade` process."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(textwrap.dedent("""
        import graders.common.oracle as oracle
        def broken(*args, **kwargs):
            raise ValueError("injected oracle fault")
        oracle.forward = broken
    """))
    done = run_cli("mha", REF_NUMPY, "--sandbox", "local", env_extra={"PYTHONPATH": str(inject)}, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.startswith("grade: error: the hidden suite for 'mha' failed on the grader's side")
    assert "injected oracle fault" in done.stderr and "FAIL" not in done.stdout


def test_a_host_fault_in_batch_is_exit_3_and_marked_infrastructure(tmp_path):
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "import graders.common.oracle as oracle\n"
        "def broken(*args, **kwargs):\n    raise ValueError('injected oracle fault')\n"
        "oracle.forward = broken\n")
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a.py", "b.py"):
        (subs / name).write_text(REF_NUMPY.read_text())
    done = run_cli("batch", subs, "--exercise", "mha", "--out", tmp_path / "out", "--jobs", "2",
                   env_extra={"PYTHONPATH": str(inject), "GRADER_SANDBOX": "local"}, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    reports = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("*.json") if p.name != "summary.json"]
    assert len(reports) == 2
    for report in reports:
        validate(report)
        assert report["environment"]["batch"]["error"]["kind"] == "infrastructure"
        assert "injected oracle fault" in report["environment"]["batch"]["error"]["message"]
        assert not any(t["status"] == "failed" for t in report["tests"])
