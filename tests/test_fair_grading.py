"""Issue 29, fair to real code: the host-side pieces, fast (no worker). Layout recognition and its deviations, the
charge-once rule (dtype, precision) with messages that show the difference, the banned-API verdicts, key padding
on both sides, and why an all-error report failed. The end-to-end behaviour is in test_mutants.py (a mutant per new
bug id) and test_real_code.py."""

from __future__ import annotations

import numpy as np
import pytest

from graders.common.suite import side_padding_mask
from harness.core.checks import CheckFailure, assert_close, check_output, root_causes
from harness.core.exercises import get_exercise
from harness.core.report import Report
from harness.core.report import TestResult as Result  # (not "Test*": pytest would collect it)
from harness.grading.engine import _banned_api_result
from harness.reports.summary import error_reason
from harness.session.layouts import StructureError, match_layout

D, D_KV = 8, 4


def params(**shapes) -> list[dict]:
    return [{"name": n.replace("__", "."), "shape": list(s), "dtype": "float64"} for n, s in shapes.items()]


def separate(prefixes=("w_q", "w_k", "w_v", "w_o"), bias=(True, True, True, True), d_kv=D) -> list[dict]:
    out = []
    for p, dims, b in zip(prefixes, (D, d_kv, d_kv, D), bias):
        out.append({"name": f"{p}.weight", "shape": [dims, D], "dtype": "float64"})
        if b:
            out.append({"name": f"{p}.bias", "shape": [dims], "dtype": "float64"})
    return out


def test_the_contract_layouts_have_no_deviation():
    mha = get_exercise("mha")
    assert match_layout(mha, separate(), True, D, D).deviations == {}
    fused = params(qkv__weight=(3 * D, D), qkv__bias=(3 * D,), wo__weight=(D, D), wo__bias=(D,))
    lay = match_layout(mha, fused, True, D, D)
    assert lay.kind == "fused" and lay.deviations == {} and lay.names["wqkv"] == "qkv.weight"


def test_other_names_are_recognised_and_named():
    lay = match_layout(get_exercise("gqa"), separate(("W_query", "W_key", "W_value", "out_proj"), d_kv=D_KV), True,
                       D, D_KV)
    assert lay.names["wq"] == "W_query.weight" and lay.names["bo"] == "out_proj.bias"
    assert set(lay.deviations) == {"layout_renamed"} and "W_query (for w_q)" in lay.deviations["layout_renamed"]
    listed = separate(("linears.0", "linears.1", "linears.2", "linears.3"))
    assert match_layout(get_exercise("mha"), listed, True, D, D).names["wv"] == "linears.2.weight"
    gpt = params(c_attn__weight=(3 * D, D), c_attn__bias=(3 * D,), c_proj__weight=(D, D), c_proj__bias=(D,))
    assert match_layout(get_exercise("masked_mha"), gpt, True, D, D).kind == "fused"


def test_a_missing_bias_is_held_at_zero_and_an_extra_one_zeroed():
    lay = match_layout(get_exercise("kv_cache"), separate(bias=(True, True, True, False), d_kv=D_KV), True, D, D_KV)
    assert lay.absent == ("bo",) and set(lay.deviations) == {"missing_bias_o"}
    fused = params(qkv__weight=(3 * D, D), w_o__weight=(D, D), w_o__bias=(D,))
    lay = match_layout(get_exercise("mha"), fused, True, D, D)
    assert set(lay.absent) == {"bq", "bk", "bv"} and {"missing_bias_q", "missing_bias_k", "missing_bias_v"} <= set(
        lay.deviations)
    lay = match_layout(get_exercise("mha"), separate(), False, D, D)
    assert set(lay.zeroed) == {"bq", "bk", "bv", "bo"} and "extra_bias" in lay.deviations


@pytest.mark.parametrize("found", [
    separate() + params(ln__weight=(D,)),                                      # an unknown parameter
    separate(("w_q", "w_k", "w_v", "proj_x")),                                 # a part that cannot be placed
    separate(("w_q", "query", "w_v", "w_o")),                                  # two candidates for one part
])
def test_what_cannot_be_placed_for_certain_is_still_a_structure_failure(found):
    with pytest.raises(StructureError, match="unrecognised parameter layout"):
        match_layout(get_exercise("mha"), found, True, D, D)


def test_a_wrong_shape_is_still_a_structure_failure():
    found = separate()
    found[0]["shape"] = [D, D + 1]
    with pytest.raises(StructureError, match="do not match"):
        match_layout(get_exercise("mha"), found, True, D, D)


class Out:
    def __init__(self, out):
        self.out, self.info = out, {"exact_type": True}


def test_a_wrong_dtype_is_charged_only_where_it_is_tested():
    ref = np.linspace(-1, 1, 12).reshape(1, 3, 4)
    out32 = ref.astype(np.float32)
    with pytest.raises(CheckFailure, match="dtype float32"):
        check_output(Out(out32), shape=ref.shape, dtype="float64")          # no rule in force: strict
    with root_causes(("dtype",)), pytest.raises(CheckFailure, match="dtype float32"):
        check_output(Out(out32), shape=ref.shape, dtype="float64")          # the test that exists for it
    with root_causes() as rc:
        got = check_output(Out(out32), shape=ref.shape, dtype="float64")
        assert_close(got, ref + 1e-8, tol=1e-10)                            # compared at float32's tolerance
    assert [c for c, _ in rc.findings] == ["dtype", "dtype"]


def test_a_lower_precision_is_charged_once_and_a_real_error_never_forgiven():
    ref = np.linspace(-1, 1, 12).reshape(1, 3, 4)
    close = ref + 3e-8
    with root_causes() as rc:
        assert_close(close, ref, tol=1e-10)
    assert rc.findings[0][0] == "precision"
    with root_causes(("precision",)), pytest.raises(CheckFailure, match="float32 precision") as info:
        assert_close(close, ref, tol=1e-10)
    assert info.value.diagnostics["lowered_precision"] is True
    with root_causes(), pytest.raises(CheckFailure):
        assert_close(ref + 1e-3, ref, tol=1e-10)
    with root_causes(), pytest.raises(CheckFailure, match="NaN"):
        assert_close(np.where(ref > 0, np.nan, ref), ref, tol=1e-10)


def test_numbers_that_differ_are_printed_so_the_difference_shows():
    ref = np.array([1.7385712345678])
    with pytest.raises(CheckFailure) as info:
        assert_close(ref + 2e-7, ref, tol=1e-10)
    got, expected = info.value.message.split("got ")[1].split(", expected ")
    assert got != expected.strip()


def test_banned_api_fails_when_called_or_not_ruled_out_and_a_dead_mention_is_a_note():
    text = "import torch.nn.functional as F\nif False:\n    F.scaled_dot_product_attention(q, k, v)\n"
    fired = _banned_api_result("torch", text, {"F.scaled_dot_product_attention"}, True)
    assert fired.status == "failed" and "tripwire fired" in fired.message
    dead = _banned_api_result("torch", text, set(), True)
    assert dead.status == "passed" and "never called" in dead.message and dead.diagnostics["interviewer_note"]
    bypass = _banned_api_result("torch", text + "torch.ops.aten.mm\n", set(), True)
    assert bypass.status == "failed" and "cannot be ruled out" in bypass.message
    untried = _banned_api_result("torch", text, set(), False)
    assert untried.status == "failed" and "cannot be ruled out" in untried.message
    clean = _banned_api_result("torch", "x = 1\n", set(), True)
    assert clean.status == "passed" and clean.message == ""


@pytest.mark.parametrize("side", ["left", "middle"])
def test_key_padding_on_both_sides(side):
    rng = np.random.default_rng(0)
    for s_k in (2, 3, 6, 17):
        mask = side_padding_mask(rng, 4, s_k, side)[:, 0, 0]               # (b, s_k)
        assert mask.shape == (4, s_k) and not mask[:, -1].any()            # the last key always visible
        assert mask[0].any()                                               # the first row always pads
        if side == "left":
            assert all(not row[np.argmin(row):].any() for row in mask)      # one stretch from the start
        elif s_k >= 3:
            assert not mask[:, 0].any()                                    # a stretch inside the row


def test_compare_says_why_a_report_whose_every_test_errored_failed():
    message = "your code raised TypeError: __init__() got an unexpected keyword argument 'bias' (in __init__)"
    report = Report(exercise="mha", track="torch", verdict="failed", score=0, max_score=3, diagnosis=[],
                    tests=[Result(id=f"t{i}", category="numeric", status="error", points=0, max_points=1,
                                  message=message) for i in range(3)],
                    environment={}, submission={}, timings={})
    assert "unexpected keyword argument 'bias'" in error_reason(report, limit=200)
    report.tests[0].status = "failed"
    assert error_reason(report) == ""


RAISES_ON_LONG_QUERIES = '''import numpy as np


def flash_attention(Q, K, V, block_size=64, causal=False):
    if Q.shape[2] > 20:
        raise ValueError("too many queries")
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if causal:
        s = np.where(np.arange(K.shape[2])[None, :] > np.arange(Q.shape[2])[:, None], -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return ((p / p.sum(axis=-1, keepdims=True)) @ V).astype(Q.dtype)
'''


@pytest.mark.slow
def test_flash_sweep_shrinks_an_exception_to_the_smallest_failing_case(tmp_path):
    from harness.grading.engine import grade

    path = tmp_path / "flash.py"
    path.write_text(RAISES_ON_LONG_QUERIES)
    report = grade(exercise="flash_attention", submission=path, track="numpy", sandbox="local")
    sweep = next(t for t in report.tests if t.id == "test_sweep")
    assert sweep.status == "error", sweep
    assert "too many queries — fails when b = 1, h = 1, s_q = 21, s_k = 1, d_k = 1" in sweep.message, sweep.message
    assert "Shrunk from sweep case" in sweep.message
