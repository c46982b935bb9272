"""The pytest plugin that runs a hidden suite in-process against the sandboxed candidate and builds results.

Suites are ordinary pytest files. They use the fixtures below (``candidate``, ``rng``, ``record``, ``track``,
``exercise``) and one marker per test: ``@pytest.mark.grade(category, points=1, visibility="visible")``;
``@pytest.mark.tracks("torch")`` limits a test to some tracks (others never see it).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import zlib
from typing import Callable

import numpy as np
import pytest

from harness.core.case import Case
from harness.core.checks import CheckFailure, root_causes
from harness.core.errors import CandidateException, GraderError, WorkerFault
from harness.core.exercises import Exercise
from harness.core.report import CATEGORIES, TestResult
from harness.core.text import clean_text
from harness.session.candidate import Candidate, StructureError


@dataclasses.dataclass
class Observation:
    """A forward output the candidate produced for a case, kept for diagnosis (host-side only). ``verdict``: whether
    the output is right, or a function that tells, asked once and only when something reads :attr:`passed` (the
    diagnosis and the report's plots, which look only when a test failed): a check whose own assertion rests on
    another reference need not pay for this one in a grade that passes."""

    test_id: str
    case: object
    out: np.ndarray
    verdict: bool | Callable[[], bool]
    kind: str = "forward"
    info: dict = dataclasses.field(default_factory=dict)

    @property
    def passed(self) -> bool:
        if callable(self.verdict):
            self.verdict = bool(self.verdict())
        return self.verdict

    @functools.cached_property
    def case_digest(self) -> str:
        """A digest of the case's arrays (what the candidate was given), computed once: the diagnosis keys every
        mutant's answer for this case by it, and asks for one per named mistake it tries."""
        from harness.core import answers

        return answers.digest("case", self.case.arrays())


class Recorder:
    def __init__(self, plugin: GraderPlugin, test_id: str):
        self.plugin, self.test_id = plugin, test_id

    def forward(self, case: Case, out: np.ndarray | None, passed: bool | Callable[[], bool], **info) -> None:
        if out is not None:
            self.plugin.observations.append(Observation(self.test_id, case, out, passed, "forward", info))

    def note(self, **info) -> None:
        """Extra diagnostics for this test's report entry (e.g. measured FLOPs), whatever its outcome."""
        self.plugin.notes.setdefault(self.test_id, {}).update(info)

    def signature(self, kind: str, **info) -> None:
        """A non-numeric finding a diagnosis can use (e.g. kind='dtype', 'mutation')."""
        self.plugin.observations.append(Observation(self.test_id, None, None, False, kind, info))


def _status_for(exc: BaseException) -> tuple[str, str, dict] | None:
    """The test status an exception stands for, or None when it is the grader's own fault (an infrastructure
    error, a fixture or suite helper raising, a warning turned into an error): never charged to the candidate."""
    if isinstance(exc, WorkerFault):
        return exc.status, exc.message, dict(exc.diagnostics)
    if isinstance(exc, CandidateException) and exc.exc_type == "MissingEntryPoint":
        # not an exception of the candidate's code: the file loads but lacks the function or class to call
        return "error", f"missing entry point: {exc.exc_message}", {"exception": exc.exc_type, "phase": exc.phase}
    if isinstance(exc, CandidateException):
        where = {"import": "while importing your file", "init": "in __init__", "load": "while loading weights",
                 "forward": "in forward", "call": "in your function", "output": "while converting your output"}
        diag = {"exception": exc.exc_type, "phase": exc.phase}
        if exc.traceback:
            diag["traceback"] = exc.traceback
        return "error", f"your code raised {exc} ({where.get(exc.phase, exc.phase)})", diag
    if isinstance(exc, (CheckFailure, StructureError)):
        return "failed", exc.message, dict(exc.diagnostics)
    if isinstance(exc, AssertionError) and not isinstance(exc, GraderError):
        return "failed", str(exc).split("\nassert")[0], {}
    return None


_RUNNING = threading.local()   # .plugin: the GraderPlugin whose tests this thread is running


def _running() -> "GraderPlugin":
    plugin = getattr(_RUNNING, "plugin", None)
    if plugin is None:
        raise RuntimeError("a grading fixture was asked for outside a grading run")
    return plugin


# The tests that exist for a root cause (charged by it); every other test forgives it (harness/core/checks.py).
CHARGED_IN = {"dtype": ("test_dtype_preserved",),
              "precision": ("test_matches_reference_float64", "test_prefill_float64",
                            "test_matches_standard_attention_float64")}


def charged_causes(item: pytest.Item) -> tuple[str, ...]:
    """The root causes ``item`` exists for: by its name (CHARGED_IN) or a ``charges(*causes)`` marker."""
    base = item.name.split("[", 1)[0]
    marker = item.get_closest_marker("charges")
    return tuple(c for c, tests in CHARGED_IN.items() if base in tests) + (tuple(marker.args) if marker else ())


_KEYWORDS = pytest.StashKey[dict]()


def _keywords(item: pytest.Item) -> dict:
    """The keywords a TestReport carries, listed once per item: a kept suite (harness/grading/kept_suites.py) runs
    the same items every grade, and each of a test's three reports walked the item's node chain again."""
    keywords = item.stash.get(_KEYWORDS, None)
    if keywords is None:
        keywords = item.stash[_KEYWORDS] = {k: 1 for k in item.keywords}
    return keywords


# The plugin's fixtures' values, from the running plugin and the test being set up: what each fixture below returns.
_VALUES: dict[str, Callable] = {
    "candidate": lambda plugin, item: plugin._candidate,
    "track": lambda plugin, item: plugin._track,
    "exercise": lambda plugin, item: plugin._exercise,
    "grade_seed": lambda plugin, item: plugin.seed,
    "rng": lambda plugin, item: np.random.default_rng([plugin.seed, zlib.crc32(item.name.encode())]),
    "record": lambda plugin, item: Recorder(plugin, plugin._test_id(item)),
}
_HANDED = pytest.StashKey[tuple]()


def _handed_over(item: pytest.Item) -> tuple[str, ...]:
    """The plugin's fixtures that ``item`` asks for and no other fixture of its closure does (found once per item):
    :meth:`GraderPlugin.pytest_runtest_setup` hands their values to the test itself, as pytest would, without
    pytest's lookup of each fixture for each test (~5 ms of a warm grade's ~85 ms of CPU). A fixture that a suite's
    own fixture asks for, or that a suite overrides with its own of that name, is left to pytest."""
    handed = item.stash.get(_HANDED, None)
    if handed is None:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        ours = {n for n in item.fixturenames if n in _VALUES and defs.get(n)
                and getattr(defs[n][-1].func, "__module__", None) == __name__}
        asked = {a for n in item.fixturenames if n not in ours for d in defs.get(n, ())[-1:] for a in d.argnames}
        handed = item.stash[_HANDED] = tuple(n for n in item.fixturenames if n in ours and n not in asked)
    return handed


class GraderPlugin:
    def __init__(self, *, candidate: Candidate, exercise: Exercise, track: str, seed: int):
        self._candidate, self._exercise, self._track, self.seed = candidate, exercise, track, seed
        self.results: dict[str, TestResult] = {}
        self.order: list[str] = []
        self.observations: list[Observation] = []
        self.collection_errors: list[str] = []
        self.notes: dict[str, dict] = {}
        self.infra_faults: list[str] = []  # the grader's own failures; any one makes the run an infrastructure error
        self._item: pytest.Item | None = None

    def rebind(self, *, candidate: Candidate, exercise: Exercise, seed: int) -> None:
        """Point this plugin, kept with a collected session (harness/grading/kept_suites.py), at the next
        submission: its candidate and seed, and nothing recorded of the one before. ``order`` (the collected
        tests) and ``collection_errors`` stay: they belong to the collection."""
        self._candidate, self._exercise, self.seed = candidate, exercise, seed
        self.results, self.observations, self.notes, self.infra_faults = {}, [], {}, []

    # -- fixtures ---------------------------------------------------------------------------------
    # None of them asks for pytest's ``request``: pytest makes a new FixtureDef for ``request`` (and inspects a
    # lambda's signature) every time a fixture that asks for it is looked up, for every test, cached session
    # fixtures included: ~300 a grade, ~2 ms of the host's time. The session fixtures are static methods that find
    # the running plugin through this thread (:func:`_running`; pytest 9.2 deprecates session-scoped fixtures
    # defined as instance methods); the per-test ones read the test being set up (``pytest_runtest_setup``).
    @pytest.fixture(scope="session")
    @staticmethod
    def candidate() -> Candidate:
        return _VALUES["candidate"](_running(), None)

    @pytest.fixture(scope="session")
    @staticmethod
    def track() -> str:
        return _VALUES["track"](_running(), None)

    @pytest.fixture(scope="session")
    @staticmethod
    def exercise() -> Exercise:
        return _VALUES["exercise"](_running(), None)

    @pytest.fixture(scope="session")
    @staticmethod
    def grade_seed():
        """The run's seed (``grade --seed N``), for messages that tell a candidate how to replay a case."""
        return _VALUES["grade_seed"](_running(), None)

    @pytest.fixture
    def rng(self) -> np.random.Generator:
        return _VALUES["rng"](self, self._item)

    @pytest.fixture
    def record(self) -> Recorder:
        return _VALUES["record"](self, self._item)

    # -- hooks ------------------------------------------------------------------------------------
    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "grade(category, points=1, visibility='visible'): grading metadata")
        config.addinivalue_line("markers", "tracks(*names): tracks this test applies to")
        config.addinivalue_line("markers", "charges(*causes): root causes this test exists for (dtype, precision)")

    @pytest.hookimpl(tryfirst=True)
    def pytest_pycollect_makeitem(self, collector, name: str, obj: object) -> list | None:
        """A test function marked for other tracks only (``tracks``) is not made into items at all: on the NumPy
        track that is about half of a suite's items (the torch-only tests and their parameters), which pytest
        would build and the hook below would drop. Marks on a class or module are left to that hook."""
        marks = getattr(obj, "pytestmark", None) if callable(obj) else None
        if marks and name.startswith("test"):
            tracks = [m for m in marks if getattr(m, "name", None) == "tracks"]
            if tracks and self._track not in tracks[0].args:
                return []
        return None

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        keep, drop = [], []
        for item in items:
            marker = item.get_closest_marker("tracks")
            (keep if marker is None or self._track in marker.args else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
        self.order = [self._test_id(i) for i in keep]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(clean_text(str(report.longrepr), 2000))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        """The session fixtures find this plugin through the thread that runs the tests (:func:`_running`)."""
        saved = getattr(_RUNNING, "plugin", None)
        _RUNNING.plugin = self
        try:
            yield
        finally:
            _RUNNING.plugin = saved

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._item = item   # the test whose fixtures are being set up (rng, record)
        for name in _handed_over(item):   # before pytest's own setup, which fills only what is still missing
            item.funcargs[name] = _VALUES[name](self, item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Each test runs under the charge-once rule (harness/core/checks.py RootCauses): what it forgave is noted
        on the test and handed to the diagnosis as a signature."""
        test_id = self._test_id(item)
        with root_causes(charged_causes(item)) as rc:
            yield
        forgiven = {}
        for cause, info in rc.findings:
            self.observations.append(Observation(test_id, None, None, not info.get("charged"), cause, dict(info)))
            if not info.get("charged"):
                forgiven.setdefault(cause, info)
        if forgiven:
            self.notes.setdefault(test_id, {})["not_charged_here"] = {
                cause: "charged in " + ", ".join(sorted({t for t in self.order if t.split("[")[0] in CHARGED_IN[cause]})
                                                  or CHARGED_IN[cause]) for cause in sorted(forgiven)}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
        """Build the report ourselves: pytest's own would render a source-annotated traceback for every
        failure (tens of ms each), which the grading report never shows."""
        from _pytest.outcomes import Skipped
        from _pytest.reports import TestReport

        excinfo = call.excinfo
        if excinfo is None:
            outcome, longrepr = "passed", None
        elif isinstance(excinfo.value, Skipped):
            outcome, longrepr = "skipped", (str(item.path), 0, clean_text(str(excinfo.value), 200))
        else:
            outcome, longrepr = "failed", clean_text(f"{excinfo.typename}: {excinfo.value}", 500)
        report = TestReport(item.nodeid, item.location, _keywords(item), outcome, longrepr,
                            call.when, duration=call.duration, start=call.start, stop=call.stop)
        if outcome == "failed" and _status_for(excinfo.value) is None:
            self._infra_fault(item, call.when, excinfo.value)
        elif call.when == "call" or (call.when == "setup" and outcome != "passed"):
            self.results[self._test_id(item)] = self._result(item, call, report)
        return report

    def _infra_fault(self, item, when: str, exc: BaseException) -> None:
        """Not the candidate's doing: remember it and stop the session (the run ends as an infrastructure error,
        with no test charged to the candidate)."""
        where = f"{self._test_id(item)} ({when})" if when != "call" else self._test_id(item)
        self.infra_faults.append(clean_text(f"{where}: {type(exc).__name__}: {exc}", 500))
        item.session.shouldstop = "infrastructure fault"

    # -- helpers ----------------------------------------------------------------------------------
    @staticmethod
    def _test_id(item: pytest.Item) -> str:
        return item.name

    def _result(self, item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> TestResult:
        marker = item.get_closest_marker("grade")
        meta = dict(marker.kwargs) if marker else {}
        if marker and marker.args:
            meta.setdefault("category", marker.args[0])
        category = meta.get("category", "numeric")
        assert category in CATEGORIES, f"unknown category {category!r} on {item.nodeid}"
        max_points = float(meta.get("points", 1))
        doc = (getattr(item.function, "__doc__", None) or "").strip().splitlines()
        if report.skipped:  # e.g. not assessable on this host: the suite says why
            status, diagnostics = "skipped", {}
            message = clean_text(str(call.excinfo.value.msg), 500) if call.excinfo is not None else ""
        elif call.excinfo is None:
            status, message, diagnostics = "passed", "", {}
        else:
            status, message, diagnostics = _status_for(call.excinfo.value)  # not None: see makereport
        diagnostics = {**self.notes.get(self._test_id(item), {}), **diagnostics}
        return TestResult(
            id=self._test_id(item), category=category, status=status,
            points=max_points if status == "passed" else 0.0, max_points=max_points,
            visibility=meta.get("visibility", "visible"), message=clean_text(message, 1500),
            diagnostics=_clean_diagnostics(diagnostics), duration_s=round(float(call.duration), 4),
            description=clean_text(doc[0] if doc else "", 300))

    def ordered_results(self) -> list[TestResult]:
        return [self.results[t] for t in self.order if t in self.results]


def _clean_diagnostics(diag: dict) -> dict:
    out = {}
    for key, value in list(diag.items())[:40]:
        key = clean_text(str(key), 60)
        if isinstance(value, str):
            value = clean_text(value, 2000, keep_newlines=key == "traceback")
        elif isinstance(value, (list, tuple)):
            value = [v if isinstance(v, (int, float, bool, type(None))) else clean_text(str(v), 200)
                     for v in list(value)[:50]]
        elif isinstance(value, dict):
            value = _clean_diagnostics(value)
        elif isinstance(value, float) and not np.isfinite(value):
            value = str(value)
        elif not isinstance(value, (int, float, bool, type(None))):
            value = clean_text(str(value), 200)
        out[key] = value
    return out
