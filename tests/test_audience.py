"""The audience filter is typed (issue 24 #2): a Report in, a Report out, and a candidate's view never carries a
hidden test's message, inputs, description or plots, nor the seed; ``redacted`` marks what was withheld and
is in the JSON of a candidate's view only."""

from __future__ import annotations

import copy
import json

import pytest

from harness.core.audience import HIDDEN_NOTE, for_audience
from harness.core.errors import UsageError
from harness.core.report import Diagnosis, Report, validate_report
from harness.core.report import TestResult as Result  # (not "Test*": pytest would collect it)

SECRET = "SECRET-INPUT-0.123"


def _report() -> Report:
    sha = "ab" * 32
    return Report(
        exercise="mha", track="numpy", verdict="failed", score=3.0, max_score=6.0,
        tests=[Result(id="shape/basic", category="shape", status="passed", points=1, max_points=1),
               Result(id="numeric/visible", category="numeric", status="failed", points=0, max_points=2,
                      message="off by 0.5 (seed 41); `grade mha x.py --seed 41` replays it.",
                      diagnostics={"max_abs_err": 0.5, "seed": 41, "nested": {"case_seed": 3, "b": 2}},
                      description="a visible case"),
               Result(id="numeric/hidden-fail", category="numeric", status="failed", points=0, max_points=2,
                      visibility="hidden", message=f"wrong at {SECRET}", diagnostics={"inputs": SECRET},
                      description=f"the hidden case {SECRET}"),
               Result(id="edge/hidden-pass", category="edge", status="passed", points=1, max_points=1,
                      visibility="hidden", message=f"fine {SECRET}", description=f"also {SECRET}")],
        diagnosis=[Diagnosis(bug="scale_sqrt_d", summary="scaled by sqrt(d)", hint="d_k, not d",
                             evidence={"explained_wrong_outputs": 2, "where": SECRET})],
        environment={"sandbox": "local", "python": "3.11", "numpy": "2", "harness": "x", "seed": 41,
                     "collection_errors": [SECRET]},
        submission={"sha256": sha, "size": 10, "path": "x.py"}, timings={"total_s": 1.0},
        extra={"artifacts": {"file": "x.npz", "sha256": sha, "items": [
            {"test_id": "numeric/visible", "key": "t0", "h": 2, "fields": ["out"]},
            {"test_id": "numeric/hidden-fail", "key": "t1", "h": 2, "fields": ["out"]}]}})


def test_the_filter_takes_and_gives_a_report_and_leaves_its_input_alone():
    report = _report()
    before = copy.deepcopy(report.to_dict())
    for audience in ("interviewer", "candidate"):
        out = for_audience(report, audience)
        assert isinstance(out, Report) and out is not report
        assert all(isinstance(t, Result) for t in out.tests)
    assert report.to_dict() == before                          # a copy: the stored report is never cut
    full = for_audience(report, "interviewer")
    assert full.to_dict() == before and validate_report(full.to_dict())
    assert not any(t.redacted for t in full.tests) and "redacted" not in json.dumps(full.to_dict())
    with pytest.raises(UsageError):
        for_audience(report, "everyone")


def test_a_candidate_view_never_carries_hidden_fields_or_the_seed():
    view = for_audience(_report(), "candidate")
    hidden = [t for t in view.tests if t.visibility == "hidden"]
    assert hidden and all(t.redacted and t.diagnostics == {} and t.description == "" for t in hidden)
    assert [t.message for t in hidden] == [HIDDEN_NOTE, ""]   # a failing hidden test says it is hidden
    visible = {t.id: t for t in view.tests if t.visibility == "visible"}
    assert not any(t.redacted for t in visible.values())
    assert visible["numeric/visible"].message == "off by 0.5 (seed withheld);"
    assert visible["numeric/visible"].diagnostics == {"max_abs_err": 0.5, "nested": {"b": 2}}
    assert view.diagnosis[0].evidence == {} and view.diagnosis[0].hint == "d_k, not d"
    assert "seed" not in view.environment and "collection_errors" not in view.environment
    assert [i["test_id"] for i in view.sidecar["items"]] == ["numeric/visible"]   # no plot of a hidden test
    text = json.dumps(view.to_dict())
    assert SECRET not in text and "41" not in text
    # the JSON marks what was withheld on the hidden tests only, and reads back as the same typed view
    marked = [t["id"] for t in view.to_dict()["tests"] if t.get("redacted")]
    assert marked == ["numeric/hidden-fail", "edge/hidden-pass"]
    again = Report.from_dict(json.loads(text))
    assert again == view and again.to_dict() == view.to_dict()


def test_the_summary_feedback_is_a_typed_cut_of_the_candidate_view():
    from harness.service.rounds import SUMMARY_NOTE, summary_report

    view = summary_report(_report())
    assert isinstance(view, Report) and view.feedback == "summary"
    assert all(t.message == "" and t.diagnostics == {} and t.description == "" for t in view.tests)
    assert view.sidecar["items"] == [] and view.environment["note"] == SUMMARY_NOTE
    data = view.to_dict()
    assert list(data)[-2:] == ["artifacts", "feedback"] and SECRET not in json.dumps(data)
    assert Report.from_dict(data).to_dict() == data


def test_to_dict_gives_what_dataclasses_asdict_gave_and_a_copy_of_every_container():
    """The report's tests and diagnoses are turned into dicts without asdict's deep copy of every leaf (it was
    most of a report's cost): the same JSON, key order included, and still a copy the caller may change."""
    import collections
    import dataclasses

    import numpy as np

    pair = collections.namedtuple("pair", "a b")

    @dataclasses.dataclass
    class Inner:
        n: int
        items: list

    diagnostics = {"list": [1, (2, [3])], "nested": {"x": np.float64(0.5), "none": None}, "pair": pair(1, [2]),
                   "inner": Inner(1, [{"k": 2}]), "array": np.arange(3), "text": "t"}
    report = _report()
    report.tests[1].diagnostics = diagnostics
    report.tests[2].redacted = True
    for test in report.tests:
        expected = dataclasses.asdict(test)
        if not test.redacted:
            del expected["redacted"]
        got = test.to_dict()
        assert list(got) == list(expected)
        assert json.dumps(got, default=str) == json.dumps(expected, default=str)
    for d in report.diagnosis:
        assert json.dumps(d.to_dict()) == json.dumps(dataclasses.asdict(d))
    got = report.tests[1].to_dict()["diagnostics"]
    assert isinstance(got["pair"], pair) and got["inner"] == {"n": 1, "items": [{"k": 2}]}
    got["list"][1][1].append(4)
    got["nested"]["x"] = 0
    got["inner"]["items"][0]["k"] = 9
    assert diagnostics["list"] == [1, (2, [3])] and diagnostics["nested"]["x"] == 0.5
    assert diagnostics["inner"].items == [{"k": 2}]


def test_compact_json_is_the_same_report():
    """``to_json(indent=None)`` (the C encoder: what the grading process sends the service) holds the same values
    as the indented JSON a file gets, NumPy scalars and arrays included."""
    import numpy as np

    report = _report()
    report.tests[1].diagnostics = {"f64": np.float64(0.1), "f32": np.float32(0.25), "i": np.int64(3),
                                   "b": np.bool_(True), "a": np.arange(3.0), "t": (1, "x"), "u": "é\u2028"}
    compact, indented = report.to_json(indent=None), report.to_json()
    assert "\n" not in compact and "\n  " in indented
    assert json.loads(compact) == json.loads(indented)
