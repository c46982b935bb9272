"""A grading process collects each hidden suite once and runs it again for every submission
(harness/grading/kept_suites.py): every test still runs, fixtures of every scope are set up and torn down per
grade, a run that ends abnormally is not kept, and the reports are those of a fresh pytest.main."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from harness.grading import kept_suites

ROOT = Path(__file__).resolve().parent.parent
SUITE = '''
import pytest

EVENTS = []

@pytest.fixture(scope="session")
def whole():
    EVENTS.append("session up")
    yield
    EVENTS.append("session down")

@pytest.fixture(scope="module")
def part(whole):
    EVENTS.append("module up")
    yield
    EVENTS.append("module down")

def test_one(part):
    EVENTS.append("one")

def test_two(part, request):
    EVENTS.append("two")
    assert not request.config.kept_test.fail_two, "told to fail"

def test_three(part):
    EVENTS.append("three")
'''


class Plugin:
    def __init__(self):
        self.collection_errors, self.infra_faults = [], []
        self.collections = 0
        self.fail_two = self.stop_at_two = False

    def pytest_configure(self, config):
        config.kept_test = self

    def pytest_sessionstart(self, session):
        self.session = session

    def pytest_collection_finish(self, session):
        self.collections += 1

    def pytest_runtest_logreport(self, report):   # what GraderPlugin does on an infrastructure fault
        if self.stop_at_two and report.when == "call" and report.nodeid.endswith("test_two"):
            self.infra_faults.append("fault")
            self.session.shouldstop = "infrastructure fault"


@pytest.fixture
def suite(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")   # as the engine runs a suite
    folder = tmp_path / f"suite_{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "test_kept.py").write_text(SUITE)
    (folder / "suite.ini").write_text("[pytest]\n")
    yield folder
    kept_suites.close_all()
    for name in [m for m in sys.modules if m.endswith("test_kept")]:
        del sys.modules[name]


def _args(folder: Path) -> list[str]:
    return [str(folder), "-p", "no:cacheprovider", "-p", "no:terminal", "--import-mode=importlib",
            "--rootdir", str(folder), "-c", str(folder / "suite.ini"), "-o", "python_files=test_*.py"]


def _maker():
    """(the plugins made so far, the factory kept_suites.run calls for a new session)"""
    made = []

    def make():
        made.append(Plugin())
        return made[-1]
    return made, make


def _events(folder: Path) -> list:
    return next(m for name, m in sys.modules.items() if name.endswith("test_kept")).EVENTS


def test_a_suite_is_collected_once_and_every_scope_is_set_up_and_torn_down_each_run(suite):
    made, make = _maker()
    key = ("suite", "x", "numpy")
    for fail in (False, True, False):
        code, plugin = kept_suites.run(key, _args(suite), make, lambda p, f=fail: setattr(p, "fail_two", f))
        assert code == (pytest.ExitCode.TESTS_FAILED if fail else pytest.ExitCode.OK)
    assert len(made) == 1 and made[0].collections == 1            # configured and collected once
    one_run = ["session up", "module up", "one", "two", "three", "module down", "session down"]
    assert _events(suite) == one_run * 3                           # every test, every scope, every run
    assert key in kept_suites._kept


def test_a_run_that_ends_abnormally_is_torn_down_and_not_kept(suite):
    made, make = _maker()
    key = ("suite", "x", "torch")
    kept_suites.run(key, _args(suite), make, lambda p: None)
    code, _ = kept_suites.run(key, _args(suite), make, lambda p: setattr(p, "stop_at_two", True))
    assert code == pytest.ExitCode.INTERRUPTED
    assert key not in kept_suites._kept                            # dropped: the next grade collects afresh
    stopped = _events(suite)[7:]
    assert stopped == ["session up", "module up", "one", "two", "module down", "session down"]  # all torn down
    kept_suites.run(key, _args(suite), make, lambda p: None)
    assert len(made) == 2 and key in kept_suites._kept


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("timings", "duration_s", "path")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def test_kept_suites_grade_exactly_as_a_fresh_pytest_main():
    """The reference, a wrong file, the reference again (one suite kept across three submissions): the reports of
    a fresh pytest.main each time, byte for byte once the timings are out."""
    from harness.grading.process import grade_task

    files = [ROOT / "reference" / "mha_numpy.py", ROOT / "examples" / "mha_wrong_scale.py"]

    def grades(files):
        out = []
        for f in files:
            answer = grade_task({"exercise": "mha", "path": str(f), "track": "numpy", "sandbox": "local",
                                 "seed": 3, "label": "s.py"})
            assert answer["kind"] == "report", answer
            out.append(json.dumps(_strip(answer), sort_keys=True))
        return out

    fresh = grades(files)
    kept_suites.keep()
    try:
        kept = grades(files + files[:1])
        assert len(kept_suites._kept) == 1
    finally:
        kept_suites.keep(False)
    assert [json.loads(k)["report"]["verdict"] for k in kept] == ["passed", "failed", "passed"]
    assert kept == fresh + fresh[:1]


def test_the_grading_fixtures_ask_pytest_for_nothing():
    """issue 27: pytest makes a new FixtureDef for ``request`` (inspecting a lambda's signature) every time a
    fixture that asks for it is looked up: for every test, cached session fixtures included (297 a mha grade, ~2 ms
    of the host's). The plugin's fixtures take nothing (harness/grading/plugin.py); only the suites' parameters
    still cost pytest one each (66 a mha grade)."""
    from harness.grading.process import grade_task

    kept_suites.keep()
    try:
        answer = grade_task({"exercise": "mha", "path": str(ROOT / "reference" / "mha_numpy.py"), "track": "numpy",
                             "sandbox": "local", "seed": 3, "label": "s.py"})
        assert answer["kind"] == "report" and answer["report"]["verdict"] == "passed", answer
        (suite,) = kept_suites._kept.values()
        item = suite.session.items[0]
        for name in ("candidate", "track", "exercise", "grade_seed", "rng", "record"):
            (fixture,) = suite.session._fixturemanager.getfixturedefs(name, item)
            assert fixture.argnames == (), (name, fixture.argnames)
    finally:
        kept_suites.keep(False)


def test_a_tests_keywords_are_listed_once_for_all_its_reports():
    """issue 27: every report of a test (setup, call, teardown, every grade of a kept suite) carries the item's
    keywords; they are listed from its node chain once and kept on the item."""
    from harness.grading.plugin import _keywords

    class Keywords:
        walks = 0

        def __iter__(self):
            Keywords.walks += 1
            return iter(("test_x", "grade", "suite"))

    item = type("Item", (), {})()
    item.stash, item.keywords = pytest.Stash(), Keywords()
    assert _keywords(item) == {"test_x": 1, "grade": 1, "suite": 1}
    assert [_keywords(item) for _ in range(5)][-1] is _keywords(item)
    assert Keywords.walks == 1


def test_a_test_for_other_tracks_only_is_never_made_into_items():
    """issue 27: a test function marked ``tracks("torch")`` is dropped when pytest would make its items (about
    half of a suite's items on the NumPy track, with their parameters), not built and deselected after; marks on a
    class or module are still honoured by the collection's last hook."""
    from harness.grading.plugin import GraderPlugin

    plugin = object.__new__(GraderPlugin)
    plugin._track = "numpy"

    @pytest.mark.tracks("torch")
    @pytest.mark.parametrize("layout", ["fused", "separate"])
    def test_torch_layout(layout):
        pass

    @pytest.mark.tracks("numpy", "torch")
    def test_both():
        pass

    def test_plain():
        pass

    assert plugin.pytest_pycollect_makeitem(None, "test_torch_layout", test_torch_layout) == []
    assert plugin.pytest_pycollect_makeitem(None, "test_both", test_both) is None
    assert plugin.pytest_pycollect_makeitem(None, "test_plain", test_plain) is None
    assert plugin.pytest_pycollect_makeitem(None, "helper", test_torch_layout) is None  # not a test: pytest decides
    plugin._track = "torch"
    assert plugin.pytest_pycollect_makeitem(None, "test_torch_layout", test_torch_layout) is None


def test_the_plugins_fixtures_are_handed_to_each_test_without_pytests_lookup(monkeypatch):
    """issue 27: the plugin hands its fixtures' values to each test before pytest's setup, which then looks up only
    the suite's own (``problem``): pytest's lookup of six fixtures per test was ~5 ms of a warm grade's ~85 ms of
    CPU. The report is the same either way (the tests below check a fixture a suite's own fixture asks for)."""
    import _pytest.fixtures

    from harness.grading.process import grade_task

    looked_up = []
    execute = _pytest.fixtures.FixtureDef.execute
    monkeypatch.setattr(_pytest.fixtures.FixtureDef, "execute",
                        lambda self, request: looked_up.append(self.argname) or execute(self, request))
    for kept in (True, False):   # a grading process's kept suite, and a fresh pytest.main (the CLI's)
        kept_suites.keep(kept)
        try:
            for seed in (3, 4):
                answer = grade_task({"exercise": "mha", "path": str(ROOT / "reference" / "mha_numpy.py"),
                                     "track": "numpy", "sandbox": "local", "seed": seed, "label": "s.py"})
                assert answer["kind"] == "report" and answer["report"]["verdict"] == "passed", answer
        finally:
            kept_suites.keep(False)
    assert "problem" in looked_up   # the suite's own fixture: still pytest's
    assert not {"candidate", "track", "exercise", "grade_seed", "rng", "record"} & set(looked_up), looked_up


class _Def:
    def __init__(self, module: str, argnames: tuple = ()):
        self.func = type("F", (), {"__module__": module})()
        self.argnames = argnames


def _item(names: dict):
    item = type("Item", (), {})()
    item.stash, item.fixturenames = pytest.Stash(), list(names)
    item._fixtureinfo = type("Info", (), {"name2fixturedefs": {n: (d,) for n, d in names.items()}})()
    return item


def test_a_fixture_a_suites_fixture_asks_for_or_overrides_is_left_to_pytest():
    """The hand-over (harness/grading/plugin.py _handed_over) takes only what no other fixture of the test's
    closure asks for, so a suite fixture that asks for ``rng`` gets the same generator as its test; a suite's own
    ``record`` (the closest definition) is its own."""
    from harness.grading.plugin import _handed_over

    ours = "harness.grading.plugin"
    item = _item({"candidate": _Def(ours), "rng": _Def(ours), "record": _Def("graders.x.test_x"),
                  "noisy": _Def("graders.x.test_x", ("rng", "exercise")), "exercise": _Def(ours),
                  "track": _Def(ours)})
    assert _handed_over(item) == ("candidate", "track")
    assert _handed_over(item) is _handed_over(item)   # found once per item
