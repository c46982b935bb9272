"""The mha suite itself: hand-written wrong submissions fail exactly the tests that should catch them."""

from pathlib import Path

import pytest

from harness.grading.engine import grade

from .helpers import statuses, validate

REF = (Path(__file__).resolve().parent.parent / "reference" / "mha_numpy.py").read_text()
NUMERIC_WITH_HEADS = {"test_matches_reference_float64", "test_matches_reference_float32",
                      "test_matches_reference_head_per_feature", "test_causal_mask", "test_key_padding_mask"}


def run_variant(tmp_path, source):
    path = tmp_path / "candidate.py"
    path.write_text(source)
    report = grade(exercise="mha", submission=path, track="numpy", sandbox="local")
    validate(report)
    return report, {k for k, v in statuses(report).items() if v != "passed"}


def test_wrong_scale_fails_multi_head_numerics_but_not_single_head(tmp_path):
    report, failed = run_variant(tmp_path, REF.replace("np.sqrt(d_k)", "np.sqrt(d)"))
    assert NUMERIC_WITH_HEADS <= failed
    assert "test_matches_reference_single_head" not in failed  # with h = 1, d_k = d
    assert not any(t.startswith("test_output_shape") for t in failed)
    assert report.diagnosis[0].bug == "scale_sqrt_d"


def test_missing_transpose_fails_numerics_not_shapes(tmp_path):
    source = REF.replace("context = context.transpose(0, 2, 1, 3).reshape(b, s, d)",
                         "context = context.reshape(b, s, d)")
    assert source != REF
    report, failed = run_variant(tmp_path, source)
    assert NUMERIC_WITH_HEADS <= failed
    assert not any(t.startswith("test_output_shape") for t in failed)
    assert "test_matches_reference_single_head" not in failed
    assert report.diagnosis[0].bug == "merge_without_transpose"


def test_wrong_dtype_fails_the_dtype_tests(tmp_path):
    source = REF.replace("return (context @ Wo).astype(X.dtype, copy=False)", "return (context @ Wo).astype(np.float64)")
    assert source != REF
    report, failed = run_variant(tmp_path, source)
    # charged once (issue 29): the float32 numeric test, the sweep and the large case compare its values, and pass
    assert failed == {"test_dtype_preserved[float32]"}
    forgiven = next(t for t in report.tests if t.id == "test_matches_reference_float32")
    assert forgiven.diagnostics["not_charged_here"] == {"dtype": "charged in test_dtype_preserved[float32], "
                                                                 "test_dtype_preserved[float64]"}
    message = next(t.message for t in report.tests if t.id == "test_dtype_preserved[float32]")
    assert "dtype float64, expected float32" in message
    assert [d.bug for d in report.diagnosis] == ["dtype_promoted"]


@pytest.mark.parametrize("returned,needle", [
    ("X", None),
    ("(context @ Wo)[:1]", "shape"),
    ("(context @ Wo).mean(axis=0)", "shape"),
    ("float((context @ Wo).sum())", "float"),
    ("(context @ Wo).tolist()", "list"),
    ("np.full_like(X, np.nan)", "NaN"),
])
def test_default_deny_outputs(tmp_path, returned, needle):
    source = REF.replace("return (context @ Wo).astype(X.dtype, copy=False)", f"return {returned}")
    report, failed = run_variant(tmp_path, source)
    assert "test_matches_reference_float64" in failed and report.verdict == "failed"
    if needle:
        message = next(t.message for t in report.tests if t.id == "test_matches_reference_float64")
        assert needle in message


def test_numeric_diagnostics_are_reported(tmp_path):
    report, _ = run_variant(tmp_path, REF.replace("np.sqrt(d_k)", "np.sqrt(d)"))
    diag = next(t.diagnostics for t in report.tests if t.id == "test_matches_reference_float64")
    for key in ("max_abs_error", "max_rel_error", "mismatch_fraction", "first_bad_index", "nan_count", "inf_count"):
        assert key in diag
    assert diag["mismatch_fraction"] > 0.5 and diag["nan_count"] == 0


def test_tests_carry_points_and_visibility(tmp_path):
    report, _ = run_variant(tmp_path, REF)
    assert report.verdict == "passed"
    assert all(t.max_points >= 0 and t.visibility in ("visible", "hidden") for t in report.tests)
    assert {t.id for t in report.tests if t.visibility == "hidden"} == {
        "test_large_magnitude_inputs", "test_deterministic", "test_permutation_equivariance"}
    assert {t.category for t in report.tests} == {"shape", "numeric", "edge"}
