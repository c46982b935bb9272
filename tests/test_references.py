"""Every reference solution scores full marks on its exercise's hidden suite, in each of its tracks.

NumPy and python references are graded as the CLI grades (a cold worker, a fresh pytest.main); torch ones through
the local warm pool with kept suites, as `grade serve` grades (the reference is the subject, not a cold torch
import per exercise: tests/test_cli.py grades the torch reference cold, tests/test_warm.py and
tests/test_kept_suites.py show the warm and kept paths grade as the cold ones)."""

import pytest

from harness.grading.engine import grade
from harness.core.exercises import REFERENCE_DIR, all_exercises

CASES = [(name, track) for name, ex in all_exercises().items() for track in ex.track_names]


@pytest.mark.parametrize("exercise,track", CASES, ids=[f"{ex}-{track}" for ex, track in CASES])
def test_reference_scores_full_marks(exercise, track, request):
    sandbox = "local"
    if track == "torch":
        request.getfixturevalue("kept_suites")
        sandbox = request.getfixturevalue("local_warm_pool")
    report = grade(exercise=exercise, submission=REFERENCE_DIR / f"{exercise}_{track}.py", track=track,
                   sandbox=sandbox)
    failed = [(t.id, t.message) for t in report.tests if t.status != "passed"]
    assert report.verdict == "passed", failed
    assert failed == []
    assert report.score == report.max_score > 0
