"""End-to-end grading under the Docker backend: same statuses as local, and hostile runs get the right status
with no grader container left behind."""

import os
from pathlib import Path

import pytest

from graders.mutants.build import write_mutant
from harness.core.exercises import all_exercises
from harness.sandbox.image import leftover_containers
from harness.grading.engine import grade

from .helpers import statuses, validate, write

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parent.parent
# Every reference under docker is the cross-runtime sweep: the matrix group (CI) grades them all; the default run
# grades one of each track (the container runs the local worker and the same suites: issue 24), beside the
# mutants and flash_attention's memory below.
REFERENCES_IN_DEFAULT_RUN = {("mha", "numpy"), ("mha", "torch"), ("attention_cost", "python")}
REFERENCES = [pytest.param(name, track, id=f"{name}-{track}",
                           marks=() if (name, track) in REFERENCES_IN_DEFAULT_RUN else pytest.mark.matrix)
              for name, ex in all_exercises().items() for track in ex.track_names]
FAST = {"call_timeout_s": 3.0, "max_restarts": 1}


@pytest.fixture(autouse=True, params=["runc", "runsc"])
def docker_runtime(request, monkeypatch):
    """Every test under both runtimes, chosen as a user would: GRADER_DOCKER_RUNTIME (the CLI test: --runtime)."""
    monkeypatch.setenv("GRADER_DOCKER_RUNTIME", request.param)
    return request.param


@pytest.fixture(autouse=True)
def no_container_left():
    yield
    mine = [n for n in leftover_containers() if n.startswith(f"grader-{os.getpid()}-")]
    assert mine == [], f"a grader container survived the run: {mine}"


_local_reports: dict = {}


def both(path, track, exercise="mha", limits=None):
    key = (str(path), Path(path).read_text(), track, exercise, repr(limits))
    if key not in _local_reports:  # the local half does not depend on the docker runtime: grade it once
        _local_reports[key] = grade(exercise=exercise, submission=path, track=track, sandbox="local", limits=limits)
    local = _local_reports[key]
    docker = grade(exercise=exercise, submission=path, track=track, sandbox="docker", limits=limits)
    assert docker.environment["sandbox"] == "docker"
    assert docker.environment["docker_runtime"] == os.environ["GRADER_DOCKER_RUNTIME"]
    validate(local), validate(docker)
    return local, docker


@pytest.mark.parametrize("exercise,track", REFERENCES)
def test_references_grade_identically(exercise, track):
    local, docker = both(ROOT / "reference" / f"{exercise}_{track}.py", track, exercise)
    assert statuses(local) == statuses(docker)
    assert docker.verdict == "passed" and docker.score == docker.max_score


@pytest.mark.parametrize("exercise,track,bug", [("mha", "numpy", "softmax_wrong_axis"),
                                                ("mha", "torch", "mask_after_softmax"),
                                                ("attention_cost", "python", "cost_gqa_kv_with_h")])
def test_a_failing_mutant_grades_identically(tmp_path, exercise, track, bug):
    local, docker = both(write_mutant(tmp_path, exercise, track, {bug}), track, exercise)
    assert statuses(local) == statuses(docker)
    assert docker.verdict == "failed"
    assert [d.bug for d in docker.diagnosis] == [d.bug for d in local.diagnosis] == [bug]


# torch: in the matrix group; tests/test_host_facts.py measures torch files' peaks in the container by default
@pytest.mark.parametrize("track", ["numpy", pytest.param("torch", marks=pytest.mark.matrix)])
def test_flash_attention_memory_is_measured_inside_the_container(tmp_path, track):
    """The worker measures the call's peak memory in the container too: the full (s, s) matrix fails the memory
    tests and is named, with the same verdicts as the local sandbox."""
    local, docker = both(write_mutant(tmp_path, "flash_attention", track, {"flash_full_scores"}), track,
                         "flash_attention")
    assert statuses(local) == statuses(docker)
    failing = {t.id: t for t in docker.tests if t.status != "passed"}
    assert sorted(failing) == ["test_memory_stays_linear_in_s[causal]", "test_memory_stays_linear_in_s[full]"]
    for t in failing.values():
        fig = t.diagnostics
        assert fig["score_matrix_bytes"] > fig["bound_bytes"]
        # the call's own rise, or (gVisor keeping a first call's pages when the over-bound figure is measured again,
        # graders/common/flash.py REMEASURE) that with what the worker held before it: as tests/test_host_facts.py
        assert fig["peak_bytes"] + fig.get("held_bytes", 0) >= 0.9 * fig["score_matrix_bytes"], fig
    assert [d.bug for d in docker.diagnosis] == ["flash_full_scores"]


HOSTILE = {
    "timeout": "def mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n        pass\n",
    "memory": "import numpy as np\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n"
              "    return np.ones((50_000_000_000,))\n",
    "error": "import os\n\ndef mha(X, Wq, Wk, Wv, Wo, h, mask=None):\n    while True:\n        os.fork()\n",
}


# in the matrix group (CI): by default the red team grades its hang, memory bomb and fork bomb under docker
# (tests/test_redteam.py, SANDBOX_CASES) and tests/test_docker_sandbox.py runs a fork loop into the pids limit
@pytest.mark.matrix
@pytest.mark.parametrize("expected", sorted(HOSTILE))
def test_hostile_submission_gets_its_status(tmp_path, expected):
    path = write(tmp_path, "hostile.py", HOSTILE[expected])
    # a hang is a hang at 1 s; gVisor forks a process of NumPy's size slowly: on a loaded CI machine, the fork
    # bomb's forks up to the pids limit once took over 3 s (a timeout, not fork's EAGAIN)
    limits = {**FAST, "call_timeout_s": {"timeout": 1.0, "error": 20.0}.get(expected, FAST["call_timeout_s"])}
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="docker", limits=limits)
    validate(report)
    assert report.environment["docker_runtime"] == os.environ["GRADER_DOCKER_RUNTIME"]
    first = report.tests[0]
    assert first.status == expected, (first.status, first.message, first.diagnostics)
    assert report.score == 0
    if expected == "error":
        # fork() fails with EAGAIN once the container's --pids-limit is reached
        assert "Resource temporarily unavailable" in first.message or first.diagnostics.get("exit_code") is not None


def test_grade_cli_with_docker(grade_cli, docker_runtime, monkeypatch, tmp_path):
    monkeypatch.delenv("GRADER_DOCKER_RUNTIME")  # the flag alone chooses
    result = grade_cli("mha", ROOT / "reference" / "mha_numpy.py", "--sandbox", "docker", "--runtime", docker_runtime,
                       "--json", tmp_path / "r.json")
    assert result.returncode == 0, result.stderr
    label = "[docker sandbox (gVisor)," if docker_runtime == "runsc" else "[docker sandbox,"
    assert label in result.stdout, result.stdout
    assert os.environ.get("CI") != "true" or "note:" not in result.stderr
    report = validate((tmp_path / "r.json").read_text())
    assert report["environment"]["docker_runtime"] == docker_runtime
