import os
import shutil
import subprocess

import pytest

from harness.core.exercises import all_exercises

IN_CI = os.environ.get("CI") == "true"


def docker_ready() -> tuple[bool, str]:
    try:
        from harness.sandbox.docker import DockerSandbox
    except ImportError as exc:  # pragma: no cover
        return False, f"docker backend missing: {exc}"
    if not shutil.which("docker"):
        return False, "no docker client on PATH"
    try:
        DockerSandbox().check()
    except Exception as exc:  # SandboxUnavailable carries the fix hint
        return False, str(exc)
    return True, ""


# -- bytecode ---------------------------------------------------------------------------------------------------
def pytest_configure(config):
    """Byte-compiles the checkout once per run (in the controller, before any xdist worker starts) when this
    interpreter writes no bytecode itself (PYTHONDONTWRITEBYTECODE, as on the CI machines): every server, CLI run and
    grading process the tests start would otherwise compile the grader's modules from source again (~0.1 s of CPU
    each), as an installed wheel's are compiled at install time. A no-op when nothing changed."""
    import sys

    if not sys.dont_write_bytecode or hasattr(config, "workerinput"):
        return
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for name in ("harness", "graders", "reference", "gradekit", "tests", "examples"):
        if (root / name).is_dir():
            compileall.compile_dir(root / name, quiet=2, workers=1)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Lets pytest keep the test modules it rewrites for its assertion messages (``__pycache__/*-pytest-*.pyc``)
    where this interpreter writes no bytecode: pytest reads those files either way but writes them only when
    bytecode may be written, so each xdist worker rewrote every test module again, every run (~4.6 s of CPU each
    on this machine). Only for the collection: the grader's own modules are compiled above."""
    import sys

    if not sys.dont_write_bytecode:
        return (yield)
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = True


# -- the matrix group ---------------------------------------------------------------------------------------
# `python -m pytest` runs everything but the `matrix` group (pyproject's addopts: -m "not matrix"); CI runs that
# group too, as a second invocation (.ci/run: python -m pytest -m matrix). The group: the gVisor (runsc) half of
# every cross-runtime parametrisation and the red-team corpus through warm docker workers (found here, by their
# parameters, so no test file has to say it), and whatever a file marks @pytest.mark.matrix (soak, load).
# A handful of runsc cases stay in the default run, each for something only gVisor does (README "Tests").
RUNSC_IN_DEFAULT_RUN = {
    "tests/test_docker_sandbox.py::test_the_runtime_in_effect_is_the_one_asked_for[runsc]",
    "tests/test_docker_sandbox.py::test_no_network[runsc]",
    "tests/test_docker_sandbox.py::test_fork_loop_hits_pids_limit[runsc]",       # gVisor's threads in the pids cgroup
    "tests/test_docker_sandbox.py::test_huge_allocation_is_a_memory_fault[runsc]",  # the address-space limit
    "tests/test_docker_grading.py::test_references_grade_identically[runsc-mha-torch]",  # torch under gVisor
}


def in_matrix(item) -> bool:
    """Whether a collected test belongs to the matrix group (see above)."""
    if item.get_closest_marker("matrix"):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    values = [v for v in params.values() if isinstance(v, str)]
    runsc = any(v == "runsc" or v.startswith("docker-runsc") for v in values)
    return (runsc and item.nodeid not in RUNSC_IN_DEFAULT_RUN) or "docker-warm" in values


@pytest.hookimpl(tryfirst=True)  # before -m selects: the marks must be on the items by then
def pytest_collection_modifyitems(config, items):
    """Marks the matrix group; puts the heaviest files first (tests/parallel.py: the order xdist hands out work);
    docker tests skip outside CI when no engine/image is ready (in CI, CI=true, they never skip)."""
    from tests.parallel import run_order

    for item in items:
        if in_matrix(item) and not item.get_closest_marker("matrix"):
            item.add_marker(pytest.mark.matrix)
    items.sort(key=lambda item: run_order(item.nodeid))  # stable: a file's tests keep their order
    if not any(item.get_closest_marker("docker") for item in items):
        return
    ok, why = docker_ready()
    if ok or IN_CI:
        return
    skip = pytest.mark.skip(reason=f"Docker sandbox not ready here ({why}); run .ci/docker-setup.sh. "
                                   "These tests never skip when CI=true.")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


# -- spreading the suite over the xdist workers (README "Tests") ----------------------------------------------
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, refined (tests/parallel.py): the independent gradings of a few large files go test by test
    to whichever worker is free, and the heaviest files are sent first."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.parallel import SpreadFileScheduling

    return SpreadFileScheduling(config, log)


@pytest.fixture(scope="session")
def local_warm_pool():
    """One local warm pool per pytest process (a zygote per track, forking a fresh worker per submission): for
    the files that grade hundreds of submissions whose subject is the grading, not the worker's start (the
    mutant catalogue). Cold starts are the subject of tests/test_local_sandbox.py, tests/test_redteam.py and
    the CLI tests; tests/test_warm.py shows a warm worker grades like a cold one."""
    from harness.session.warm import WarmPool

    with WarmPool("local", size=1) as pool:
        yield pool
    assert pool.owned() == {"pids": [], "containers": []}


@pytest.fixture(scope="session")
def _kept_suites_closed():
    from harness.grading import kept_suites

    yield kept_suites
    kept_suites.close_all()


@pytest.fixture
def kept_suites(monkeypatch, _kept_suites_closed):
    """Grade as a long-lived grading process does (harness/grading/kept_suites.py: each hidden suite configured
    and collected once, run again per submission), for the files that grade hundreds of submissions in this
    process (the mutant catalogue). On for the test only (another file's test on this worker runs pytest.main);
    the kept sessions stay for the next such test and are finished at the end. tests/test_kept_suites.py shows
    that a kept suite grades exactly as a fresh pytest.main."""
    monkeypatch.setattr(_kept_suites_closed, "_enabled", True)
    return _kept_suites_closed


@pytest.fixture(scope="session")
def exercises():
    return all_exercises()


@pytest.fixture
def grade_cli(tmp_path):
    """Run the installed `grade` console script; returns CompletedProcess."""

    def run(*args, timeout=300):
        return subprocess.run(["grade", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                              cwd=tmp_path)

    return run


@pytest.fixture
def redis_url():
    """A clean database of the test Redis (GRADER_TEST_REDIS_URL, `bash .ci/redis-setup.sh` prints one) for this
    test, flushed before and after; skipped with the reason when there is none, never in CI. Each xdist worker
    has a database of its own (``redis_db``), so tests running in parallel never flush each other's."""
    import redis

    from tests.parallel import redis_db
    from tests.service.cluster import redis_url_or_skip

    base = redis_url_or_skip().rsplit("/", 1)[0]
    url = f"{base}/{redis_db()}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()
