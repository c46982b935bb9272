"""Meta-tests that keep the suites fair: correct answers written in any reasonable style get full marks, a
`.view` on a non-contiguous input fails only the non-contiguous tests, and an untouched stub scores zero.

Correct variants live in tests/variants/<exercise>/<track>_<style>.py (the folder names the exercise, the
filename prefix the track). Files listed in BUGGY are deliberately wrong and have their own tests below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.grading.engine import grade
from harness.core.exercises import all_exercises
from harness.core.report import load_schema

VARIANTS_DIR = Path(__file__).resolve().parent / "variants"
BUGGY = {"mha/torch_view_after_transpose.py"}
EXERCISES = ("mha", "masked_mha", "cross_attention", "gqa", "kv_cache", "flash_attention", "attention_cost")
TRACKS = {ex: all_exercises()[ex].track_names for ex in EXERCISES}  # each exercise's own tracks (exercise.json)


def _variant_files() -> list[Path]:
    return sorted(p for p in VARIANTS_DIR.glob("*/*.py") if not p.name.startswith("_"))


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


CORRECT = [p for p in _variant_files() if _key(p) not in BUGGY]


def _track_of(path: Path) -> str:
    track = path.stem.split("_", 1)[0]
    tracks = TRACKS[path.parent.name]
    assert track in tracks, f"{_key(path)}: filename must start with one of {', '.join(t + '_' for t in tracks)}"
    return track


def _failures(report) -> str:
    return "\n".join(f"  {t.id} [{t.category}] {t.status}: {t.message}" for t in report.tests if t.status != "passed")


def _validate(report) -> None:
    import jsonschema

    jsonschema.validate(report.to_dict(), load_schema())


def test_variant_catalog_is_complete():
    """At least three correct styles per exercise and track."""
    assert set(EXERCISES) == set(all_exercises())
    counts = {(ex, tr): 0 for ex in EXERCISES for tr in TRACKS[ex]}
    for p in CORRECT:
        counts[(p.parent.name, _track_of(p))] += 1
    short = {f"{ex}/{tr}": n for (ex, tr), n in counts.items() if n < 3}
    assert not short, f"fewer than three correct variants: {short}"
    for key in BUGGY:
        assert (VARIANTS_DIR / key).is_file(), key


@pytest.mark.slow
@pytest.mark.parametrize("path", CORRECT, ids=[_key(p) for p in CORRECT])
def test_correct_variant_scores_full_marks(path, local_warm_pool, kept_suites):
    # warm local workers and kept suites (tests/conftest.py): the grading is the subject, not the worker's start
    report = grade(exercise=path.parent.name, submission=path, track=_track_of(path), sandbox=local_warm_pool)
    for t in report.tests:  # flash_attention: the memory measured by the host, printed (issue 22)
        if t.id.startswith("test_memory_stays_linear_in_s") and "peak_bytes" in t.diagnostics:
            print(f"{_key(path)} {t.id}: host peak {t.diagnostics['peak_bytes'] / 2 ** 20:.1f} MiB (bound "
                  f"{t.diagnostics['bound_bytes'] / 2 ** 20:.1f} MiB; worker's own figure "
                  f"{t.diagnostics.get('worker_peak_bytes', 0) / 2 ** 20:.1f} MiB)")
    assert report.verdict == "passed" and report.score == report.max_score, (
        f"{_key(path)}: verdict {report.verdict}, score {report.score}/{report.max_score}; failing tests:\n"
        + _failures(report))
    assert report.max_score > 0


@pytest.mark.slow
def test_view_on_non_contiguous_input_fails_only_the_non_contiguous_tests():
    path = VARIANTS_DIR / "mha" / "torch_view_after_transpose.py"
    report = grade(exercise="mha", submission=path, track="torch", sandbox="local")
    failing = [t.id for t in report.tests if t.status != "passed"]
    assert report.verdict == "failed", f"verdict {report.verdict}\n" + _failures(report)
    assert failing, "the .view bug was not caught by any test"
    assert all(t.startswith("test_non_contiguous_inputs") for t in failing), (
        "tests other than the non-contiguous ones failed:\n" + _failures(report))
    assert report.score == report.max_score - sum(t.max_points for t in report.tests if t.id in failing)


STUBS = [(ex, tr) for ex in EXERCISES for tr in TRACKS[ex]]


@pytest.mark.slow
@pytest.mark.parametrize("exercise,track", STUBS, ids=[f"{e}-{t}" for e, t in STUBS])
def test_stub_scores_zero(exercise, track, local_warm_pool, kept_suites):
    stub = all_exercises()[exercise].stub_path(track)
    assert stub.is_file(), f"missing stub {stub}"
    # warm (a cold torch worker's start is not the subject: tests/test_references.py grades cold)
    report = grade(exercise=exercise, submission=stub, track=track, sandbox=local_warm_pool)
    _validate(report)
    passed = [t.id for t in report.tests if t.status == "passed"]
    assert report.tests, "the stub's report lists no tests"
    assert not passed, f"the stub passed tests it cannot have earned: {passed}"
    assert report.score == 0, f"the stub scored {report.score}/{report.max_score}"
    assert report.verdict in ("failed", "error")
    assert report.max_score > 0
