"""Meta-tests for the shape sweep (graders/common/sweep.py).

Every shape-branching mutant in tests/shape_mutants/ (an implementation that is right except in one regime: equal
lengths, long sequences, large batches, many heads, d_k = 1, odd lengths, one mask form) must fail the sweep or a
large case, with a message naming the smallest failing shape the shrinker found. The fast tests below check the
drawing (coverage, budget, reproducibility) and the shrinker against an in-process fake candidate.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from graders.common import shapes as sweep
from graders.common.problem import Problem
from graders.common.suite import reference
from harness.session.candidate import Result
from harness.grading.engine import grade

from .helpers import validate

MUTANTS_DIR = Path(__file__).resolve().parent / "shape_mutants"
EXERCISES = ("cross_attention", "masked_mha", "mha", "gqa")
PROBLEMS = {"mha": Problem("self"), "masked_mha": Problem("masked"), "cross_attention": Problem("cross"),
            "gqa": Problem("gqa")}

# What the shrunk message must name (a regular expression), per mutant: the regime the mutant gets wrong.
EXPECTED = {
    "cross_attention_numpy_equal_lengths.py": r"fails when s_q == s_k == 1,",
    "cross_attention_torch_equal_lengths.py": r"fails when s_q == s_k == \d+,",
    "cross_attention_torch_odd_context.py": r"fails when s_q = \d+, s_k = \d*[13579],",
    "gqa_numpy_many_heads.py": r"h = (9|1[0-6]), g = ([2-9]|1[0-5]),",
    "gqa_numpy_odd_lengths.py": r"fails when s = \d*[13579],",
    "gqa_torch_many_heads.py": r"h = 9,",
    "masked_mha_numpy_large_batch.py": r"b = 5,",
    "masked_mha_numpy_per_head_mask.py": r"a per-head \(b, h, s_q, s_k\) mask",
    "masked_mha_torch_large_batch.py": r"b = 5,",
    "mha_numpy_dk1.py": r"d_k = 1 ",
    "mha_numpy_long_sequences.py": r"fails when s = 101,",
    "mha_torch_dk1.py": r"d_k = 1 .*mask",
    "mha_torch_key_padding.py": r"a key-padding \(b, 1, 1, s_k\) mask",
    "mha_torch_long_sequences.py": r"fails when s = 257,",
}


def _split_name(path: Path) -> tuple[str, str]:
    exercise = next(e for e in EXERCISES if path.name.startswith(e + "_"))
    track = path.name[len(exercise) + 1:].split("_", 1)[0]
    assert track in ("numpy", "torch"), path.name
    return exercise, track


MUTANTS = sorted(MUTANTS_DIR.glob("*.py"))


def test_shape_mutant_catalog_is_complete():
    """At least a dozen, both tracks and all four exercises represented, each with an expected regime."""
    assert len(MUTANTS) >= 12
    pairs = {_split_name(p) for p in MUTANTS}
    assert {e for e, _ in pairs} == set(EXERCISES)
    assert {t for _, t in pairs} == {"numpy", "torch"}
    assert {p.name for p in MUTANTS} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("path", MUTANTS, ids=[p.stem for p in MUTANTS])
def test_shape_mutant_fails_with_a_shrunk_shape(path, local_warm_pool, kept_suites):
    exercise, track = _split_name(path)
    # warm local workers and kept suites (tests/conftest.py): the sweep is the subject, not the worker's start
    report = grade(exercise=exercise, submission=path, track=track, sandbox=local_warm_pool)
    validate(report)
    assert report.verdict == "failed"
    sweep_tests = [t for t in report.tests if t.id == "test_shape_sweep" or t.id.startswith("test_large_case")]
    failing = [t for t in sweep_tests if t.status == "failed"]
    assert failing, f"{path.name}: neither the sweep nor a large case failed"
    for t in failing:
        assert t.visibility == "visible" and t.category == "numeric"
        assert t.message.startswith("fails when ") and "(seed 0)" in t.message, t.message
        assert f"grade {exercise} YOUR_FILE --seed 0" in t.message, t.message
        smallest = t.diagnostics["smallest_failing_case"]
        original = t.diagnostics["original_failing_case"]
        assert all(smallest[k] <= original[k] for k in ("b", "s_q", "s_k", "h", "d_k")), (smallest, original)
    assert any(re.search(EXPECTED[path.name], t.message) for t in failing), (
        f"{path.name}: no message names the expected regime {EXPECTED[path.name]!r}:\n"
        + "\n".join(t.message for t in failing))
    assert report.diagnosis == [], "a shape-branching mutant is not a catalogued bug"


# -- the sweep's drawing and shrinking, without a worker ------------------------------------------------
@pytest.mark.parametrize("exercise", EXERCISES)
@pytest.mark.parametrize("track", ["numpy", "torch"])
def test_draw_covers_the_space_within_budget(exercise, track):
    problem = PROBLEMS[exercise]
    shapes = sweep.draw(problem, track, np.random.default_rng(0))
    assert shapes == sweep.draw(problem, track, np.random.default_rng(0)), "the sweep is not reproducible"
    assert len(shapes) == sweep.SWEEP_CASES
    assert all(sweep.fits(s, problem.cross) for s in shapes)
    assert {s.mask for s in shapes} == set(sweep.mask_forms(problem))
    assert {s.dtype for s in shapes} == {"float32", "float64"}
    assert {s.bias for s in shapes} == ({True, False} if track == "torch" else {False})
    assert max(s.b for s in shapes) == 8 and min(s.b for s in shapes) == 1
    assert max(s.s_q for s in shapes) == 128 and min(s.s_q for s in shapes) == 1
    assert max(s.h for s in shapes) == 16 and min(s.h for s in shapes) == 1
    assert {1, 64} <= {s.d_k for s in shapes} <= set(sweep.D_KS)
    if problem.cross:
        assert sum(s.s_q == s.s_k for s in shapes) >= 4 and any(s.s_q != s.s_k for s in shapes)
        assert max(s.s_k for s in shapes) == 128
    if exercise == "gqa":
        assert all(s.h % s.g == 0 for s in shapes) and {s.g for s in shapes} > {1}
        assert any(1 < s.g < s.h for s in shapes)
    for s in shapes[:3]:
        case = sweep.build(problem, s)
        assert case.x.shape == (s.b, s.s_q, s.d) and str(case.x.dtype) == s.dtype
        assert (case.y is not None) == problem.cross


class FakeCandidate:
    """Runs the reference in-process, except where ``wrong(case)`` says to perturb the output."""

    def __init__(self, wrong):
        self.wrong, self.calls = wrong, 0

    def run(self, case, **_):
        self.calls += 1
        out = reference(case).astype(case.x.dtype)
        if self.wrong(case):
            out = out + 1.0
        return Result(out, {"exact_type": True, "type": "numpy.ndarray"}, {}, {})


class NullRecord:
    def forward(self, *a, **k):
        pass


def test_shrink_keeps_equal_lengths_and_finds_the_threshold():
    problem = PROBLEMS["cross_attention"]
    fake = FakeCandidate(lambda c: c.x.shape[1] == c.y.shape[1] and c.x.shape[1] >= 3 and c.x.shape[0] >= 2)
    start = sweep.Shape(7, 90, 90, 6, 8, None, "head", False, "float32", 5)
    failure = sweep.attempt(fake, problem, start, NullRecord())
    assert failure is not None
    best, _, calls = sweep.shrink(fake, problem, start, failure, NullRecord())
    assert (best.b, best.s_q, best.s_k, best.h, best.d_k, best.mask, best.dtype) == (2, 3, 3, 1, 1, "none", "float64")
    assert calls <= 40
    assert sweep.describe(best, problem, "numpy").startswith("s_q == s_k == 3, b = 2, h = 1")


def test_sampled_rows_still_catch_nan_anywhere():
    """Long cases compare a sample of query rows; a NaN in an unsampled row still fails."""
    problem = PROBLEMS["mha"]
    sh = sweep.Shape(1, 300, 300, 2, 4, None, "none", False, "float64", 1)
    rows = sweep.checked_rows(sh)
    assert rows is not None and len(rows) == 64 and rows[0] == 0 and rows[-1] == 299
    unsampled = next(i for i in range(300) if i not in set(rows.tolist()))

    class NanRow(FakeCandidate):
        def run(self, case, **_):
            result = super().run(case)
            result.out[0, unsampled, 0] = np.nan
            return result

    failure = sweep.attempt(NanRow(lambda c: False), problem, sh, NullRecord())
    assert failure is not None and "NaN" in failure.message


def test_an_exception_in_one_regime_is_an_error_naming_the_shrunk_shape(tmp_path):
    """Default-deny: a sweep case that raises fails the sweep; the error (status "error", as everywhere) says where."""
    ref = (Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py").read_text()
    path = tmp_path / "raises_for_b7.py"
    path.write_text(ref.replace("    b, s, d = X.shape\n",
                                "    b, s, d = X.shape\n    if b == 7:\n        raise ValueError('no batches of 7')\n"))
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="local")
    validate(report)
    sweep_result = next(t for t in report.tests if t.id == "test_shape_sweep")
    assert sweep_result.status == "error", sweep_result
    assert "no batches of 7 — fails when s = 1, b = 7, h = 1" in sweep_result.message
    assert "(seed 0)" in sweep_result.message and "(in your function)" in sweep_result.message
    assert [t.id for t in report.tests if t.status != "passed"] == ["test_shape_sweep"]
