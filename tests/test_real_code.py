"""The "real code" suite (issue 29): attention other people wrote — tutorials, model code — kept verbatim with its
licence under tests/real_code/<name>/ (source.py, LICENSE, SOURCE), behind thin glue a candidate would write
(prelude.py before it, adapter.py after it: names, argument order, dropout off). What a fair interviewer would say
about each file was written down before the grader ran (tests/real_code/expectations.json); these tests check
that the grader says it: the verdict, the score range, the bugs it names and does not name, the tests that must
pass or fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.grading.engine import grade

ROOT = Path(__file__).resolve().parent / "real_code"
EXPECT = {k: v for k, v in json.loads((ROOT / "expectations.json").read_text()).items() if not k.startswith("_")}
PERMISSIVE = ("MIT License", "Apache License", "BSD")


def submission(name: str, tmp_path: Path) -> Path:
    """prelude (glue) + the verbatim source + adapter (glue), as one file: what a candidate would hand in."""
    folder = ROOT / name
    parts = [folder / "prelude.py", folder / "source.py", folder / "adapter.py"]
    path = tmp_path / f"{name}.py"
    path.write_text("\n\n".join(p.read_text() for p in parts if p.is_file()))
    return path


def test_every_file_has_a_permissive_licence_a_source_and_a_prediction():
    folders = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("_"))
    assert folders == sorted(EXPECT), "every real-code folder needs a prediction and every prediction a folder"
    for name in folders:
        licence = (ROOT / name / "LICENSE").read_text()
        assert any(word in licence for word in PERMISSIVE), f"{name}: not a permissive licence"
        source = (ROOT / name / "SOURCE").read_text()
        assert "https://github.com/" in source and "commit" in source, f"{name}: SOURCE must say where it is from"
        assert (ROOT / name / "source.py").is_file() and (ROOT / name / "adapter.py").is_file()


def _matches(test_id: str, patterns) -> bool:
    return any(test_id == p or test_id.startswith(p.rstrip("]")) for p in patterns)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_the_grader_says_what_a_fair_interviewer_would(name, tmp_path, local_warm_pool):
    want = EXPECT[name]
    # warm local workers (tests/conftest.py): what the grader says is the subject, not the worker's start
    report = grade(exercise=want["exercise"], submission=submission(name, tmp_path), track=want["track"],
                   sandbox=local_warm_pool)
    statuses = {t.id: t.status for t in report.tests}
    failing = sorted(t for t, s in statuses.items() if s != "passed")
    bugs = {d.bug for d in report.diagnosis}
    summary = (f"{name}: {report.verdict} {report.score}/{report.max_score}, diagnosis {sorted(bugs)}, failing "
               f"{failing}")
    assert report.verdict == want["verdict"], summary
    low, high = want["score_fraction"]
    assert low <= report.score / report.max_score <= high, summary
    assert set(want.get("diagnosis_includes", ())) <= bugs, summary
    assert not set(want.get("diagnosis_excludes", ())) & bugs, summary
    for test_id in want.get("must_pass", ()):
        assert statuses.get(test_id) == "passed", f"{test_id} should pass; {summary}"
    for test_id in want.get("must_fail", ()):
        assert statuses.get(test_id) not in (None, "passed"), f"{test_id} should fail; {summary}"
    if "failing_only" in want:
        extra = [t for t in failing if not _matches(t, want["failing_only"])]
        assert not extra, f"unexpected failures {extra}; {summary}"
    if want.get("banned_api_called"):
        banned = next(t for t in report.tests if t.id == "test_no_builtin_attention")
        assert banned.status == "failed" and "tripwire fired" in banned.message, banned
    if want.get("banned_api_note"):
        banned = next(t for t in report.tests if t.id == "test_no_builtin_attention")
        assert banned.status == "passed" and "never called" in banned.message, banned
        assert banned.diagnostics["static_scan"] and not banned.diagnostics["runtime_tripwire"]
