"""Every reference solution scores full marks on its exercise's hidden suite, in each of its tracks."""

import pytest

from harness.grading.engine import grade
from harness.core.exercises import REFERENCE_DIR, all_exercises

CASES = [(name, track) for name, ex in all_exercises().items() for track in ex.track_names]


@pytest.mark.parametrize("exercise,track", CASES, ids=[f"{ex}-{track}" for ex, track in CASES])
def test_reference_scores_full_marks(exercise, track):
    report = grade(exercise=exercise, submission=REFERENCE_DIR / f"{exercise}_{track}.py", track=track,
                   sandbox="local")
    failed = [(t.id, t.message) for t in report.tests if t.status != "passed"]
    assert report.verdict == "passed", failed
    assert failed == []
    assert report.score == report.max_score > 0
