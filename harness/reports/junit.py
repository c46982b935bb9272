"""JUnit XML for CI: one <testsuite> per submission, one <testcase> per test.

A failed test is a <failure>, a test that errored, timed out, ran out of memory or flooded its output is an
<error> (type = the status), a skipped one <skipped>. Their text is the message followed by the named-bug
diagnosis. A submission that could not be graded at all gets one <testcase name="grading"> with an <error>.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from harness.core.report import Report, batch_error, write_atomic

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(text) -> str:
    return _XML_BAD.sub("", str(text))


def diagnosis_text(report: Report) -> str:
    lines = []
    for d in report.diagnosis:
        lines.append(f"diagnosis: {d.bug}: {d.summary}")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return "\n".join(lines)


def testsuite(report: Report, name: str) -> ET.Element:
    tests = report.tests
    diag = diagnosis_text(report)
    suite = ET.Element("testsuite", name=_x(name))
    props = ET.SubElement(suite, "properties")
    for key, value in (("exercise", report.exercise), ("track", report.track), ("verdict", report.verdict),
                       ("score", report.score), ("max_score", report.max_score),
                       ("sha256", report.submission.get("sha256")),
                       ("diagnosis", ",".join(d.bug for d in report.diagnosis))):
        ET.SubElement(props, "property", name=key, value=_x("" if value is None else value))
    failures = errors = skipped = 0
    total_time = 0.0
    for t in tests:
        case = ET.SubElement(suite, "testcase", name=_x(t.id),
                             classname=_x(f"{report.exercise}.{report.track}.{t.category}"),
                             time=f"{float(t.duration_s):.4f}")
        total_time += float(t.duration_s)
        status = t.status
        if status == "passed":
            continue
        text = "\n".join(s for s in (t.message, diag) if s)
        if status == "skipped":
            skipped += 1
            ET.SubElement(case, "skipped", message=_x(t.message[:500]))
        elif status == "failed":
            failures += 1
            el = ET.SubElement(case, "failure", message=_x(t.message[:500]), type="failed")
            el.text = _x(text)
        else:
            errors += 1
            el = ET.SubElement(case, "error", message=_x(t.message[:500]), type=status)
            el.text = _x(text)
    n = len(tests)
    if not tests:  # the engine could not grade it: one error case says why
        err = batch_error(report) or {}
        case = ET.SubElement(suite, "testcase", name="grading", classname=_x(f"{report.exercise}.grading"),
                             time=f"{float(report.timings.get('total_s', 0.0)):.4f}")
        el = ET.SubElement(case, "error", message=_x(err.get("message", "not graded")[:500]),
                           type=_x(err.get("kind", "error")))
        el.text = _x(err.get("message", "not graded"))
        n, errors = 1, errors + 1
    suite.set("tests", str(n))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{float(report.timings.get('total_s', total_time)):.3f}")
    return suite


def to_xml(named_reports: list[tuple[str, Report]], name: str = "grade batch") -> str:
    root = ET.Element("testsuites", name=_x(name))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for label, report in named_reports:
        suite = testsuite(report, label)
        root.append(suite)
        for k in totals:
            totals[k] += int(suite.get(k))
        total_time += float(suite.get("time"))
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: str | os.PathLike, named_reports: list[tuple[str, Report]]) -> None:
    write_atomic(Path(path), to_xml(named_reports))
