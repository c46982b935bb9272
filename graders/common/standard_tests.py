"""The tests every exercise shares. A suite imports them (``from graders.common.standard_tests import *``) and
defines a ``problem`` fixture; pytest resolves that fixture in the importing suite's module.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.checks import CheckFailure, check_output

from .suite import (check_bias_kwarg, check_deterministic, check_dtype, check_forward, check_gradients,
                    check_not_mutated, check_param_count, check_shape, check_structure, expected_param_count, fit,
                    full_row_mask, measure_flops, padding_mask, side_padding_mask)

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")
SHAPES = [(1, 1, 8, 2), (2, 5, 8, 1), (2, 4, 8, 8), (3, 7, 12, 3), (1, 6, 16, 4)]


# -- shape ----------------------------------------------------------------------------------------------
@grade("shape", points=1)
@pytest.mark.parametrize("b,s,d,h", SHAPES, ids=[f"b{b}-s{s}-d{d}-h{h}" for b, s, d, h in SHAPES])
def test_output_shape(candidate, problem, track, rng, record, b, s, d, h):
    """Output has exactly the input's (b, s, d) shape, including b=1, s=1, h=1 and h=d."""
    check_shape(candidate, problem.make(track, rng, b=b, s=s, d=d, h=h), record)


# -- numeric --------------------------------------------------------------------------------------------
@grade("numeric", points=3)
def test_matches_reference_float64(candidate, problem, track, rng, record):
    """Matches the float64 reference to 1e-10 on a seeded random case."""
    check_forward(candidate, problem.make(track, rng, b=2, s=6, d=16, h=4), record, dtype="float64")


@grade("numeric", points=3)
def test_matches_reference_float32(candidate, problem, track, rng, record):
    """Matches the reference to 1e-5 in float32."""
    check_forward(candidate, problem.make(track, rng, b=3, s=5, d=12, h=3), record, dtype="float32")


@grade("numeric", points=1)
def test_matches_reference_single_head(candidate, problem, track, rng, record):
    """h = 1: one head spanning all of d."""
    check_forward(candidate, problem.make(track, rng, b=2, s=4, d=6, h=1), record)


@grade("numeric", points=1)
def test_matches_reference_head_per_feature(candidate, problem, track, rng, record):
    """h = d: every head has d_k = 1."""
    check_forward(candidate, problem.make(track, rng, b=1, s=5, d=4, h=4), record)


@grade("numeric", points=1)
def test_matches_reference_single_token(candidate, problem, track, rng, record):
    """b = 1, s = 1."""
    check_forward(candidate, problem.make(track, rng, b=1, s=1, d=8, h=2, s_k=None), record)


@grade("numeric", points=2)
def test_causal_mask(candidate, problem, track, rng, record):
    """A (s_q, s_k) causal mask: True above the diagonal may not be attended (h=4 heads).

    Runs for every exercise (GQA with g=2 key/value groups); only the first line is shown in reports."""
    case = problem.make(track, rng, b=2, s=6, d=8, h=4)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    check_forward(candidate, case.replace(mask=np.triu(np.ones((6, s_k), dtype=bool), k=1)), record)


@grade("numeric", points=2)
def test_key_padding_mask(candidate, problem, track, rng, record):
    """A (b, 1, 1, s_k) key-padding mask."""
    case = problem.make(track, rng, b=3, s=5, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    check_forward(candidate, case.replace(mask=padding_mask(rng, 3, s_k)), record)


@grade("numeric", points=1)
@pytest.mark.parametrize("side", ["left", "middle"])
def test_key_padding_mask_sides(candidate, problem, track, rng, record, side):
    """Key padding on the left (as in left-padded decoding batches) and a padded stretch in the middle: a model
    that ignores the mask but is causal cannot pass these by never looking right."""
    case = problem.make(track, rng, b=3, s=6, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    check_forward(candidate, case.replace(mask=side_padding_mask(rng, 3, s_k, side)), record)


@grade("numeric", points=1)
def test_per_query_mask(candidate, problem, track, rng, record):
    """A (b, 1, s_q, s_k) mask that differs per batch row and query."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    mask = rng.random((2, 1, 5, s_k)) < 0.3
    mask[..., 0] = False
    check_forward(candidate, case.replace(mask=mask), record)


@grade("numeric", points=1)
def test_per_head_mask(candidate, problem, track, rng, record):
    """A (b, h, s_q, s_k) mask that differs per head."""
    case = problem.make(track, rng, b=2, s=4, d=8, h=4)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    mask = rng.random((2, 4, 4, s_k)) < 0.35
    mask[..., -1] = False
    check_forward(candidate, case.replace(mask=mask), record)


@grade("numeric", points=2)
def test_fully_masked_row_is_zero(candidate, problem, track, rng, record):
    """A query row whose keys are all masked gives a zero context (output 0, or the output bias): no NaN."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    case = fit(candidate, case.replace(mask=full_row_mask(2, 2, 5, s_k, rows=(0, 3))))
    out = check_forward(candidate, case, record)
    row = out[:, [0, 3]]
    expect = np.zeros_like(row) if case.bo is None else np.broadcast_to(case.bo, row.shape)
    if not np.allclose(row, expect, atol=1e-10):
        raise CheckFailure("fully-masked query rows are not a zero context", {"rows": [0, 3]})


# -- edge -----------------------------------------------------------------------------------------------
@grade("edge", points=1)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_preserved(candidate, problem, track, rng, record, dtype):
    """The output dtype equals the input dtype."""
    check_dtype(candidate, problem.make(track, rng), record, dtype)


@grade("edge", points=1)
@pytest.mark.parametrize("layout", ["F", "strided"])
def test_non_contiguous_inputs(candidate, problem, track, rng, record, layout):
    """Fortran-ordered / strided arrays (NumPy); transposed / strided views (torch: catches .view after .transpose)."""
    layout = "transposed" if (track == "torch" and layout == "F") else layout
    check_forward(candidate, problem.make(track, rng, b=2, s=5, d=8, h=2), record, layout=layout)


@grade("edge", points=2, visibility="hidden")
def test_large_magnitude_inputs(candidate, problem, track, rng, record):
    """Scores in the thousands: softmax must subtract the row max (no overflow, no NaN)."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2, scale=40.0)
    check_forward(candidate, case, record)


@grade("edge", points=1)
def test_inputs_not_mutated(candidate, problem, track, rng, record):
    """No argument (input, weight, mask) is modified in place."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    check_not_mutated(candidate, case.replace(mask=padding_mask(rng, 2, s_k) | (case.mask if case.mask is not None
                                                                               else False)), record)


@grade("edge", points=1, visibility="hidden")
def test_deterministic(candidate, problem, track, rng):
    """Two calls with the same inputs give bit-identical outputs."""
    check_deterministic(candidate, problem.make(track, rng))


@grade("edge", points=1, visibility="hidden")
def test_permutation_equivariance(candidate, problem, track, rng):
    """Permuting the query tokens (with the mask) permutes the output rows the same way."""
    case = problem.make(track, rng, b=2, s=6, d=8, h=2)
    perm = rng.permutation(6)
    base = check_output(candidate.run(case), shape=case.x.shape, dtype="float64")
    moved = check_output(candidate.run(problem.permute(case, perm)), shape=case.x.shape, dtype="float64")
    from harness.core.checks import assert_close

    assert_close(moved, base[:, perm], tol=1e-9, what="output for permuted tokens",
                 extra={"permutation": perm.tolist()})


@torch_only
@grade("edge", points=1)
def test_eval_matches_train(candidate, problem, track, rng):
    """train() and eval() give the same output (no dropout or other mode-dependent behaviour)."""
    case = problem.make(track, rng)
    a = check_output(candidate.run(case, mode="eval"), shape=case.x.shape, dtype="float64")
    b = check_output(candidate.run(case, mode="train"), shape=case.x.shape, dtype="float64")
    from harness.core.checks import assert_close

    assert_close(b, a, tol=1e-12, what="train-mode output")


@torch_only
@grade("numeric", points=2)
def test_without_bias(candidate, problem, track, rng, record):
    """bias=False builds bias-free projections and still matches the reference."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2, bias=False)
    check_bias_kwarg(candidate, case, record)
    check_forward(candidate, case, record)


# -- gradient -------------------------------------------------------------------------------------------
@torch_only
@grade("gradient", points=3)
def test_gradients(candidate, problem, track, rng, record):
    """Input and parameter gradients match float64 autograd of the reference (h=4 heads).

    Runs for every exercise (GQA with g=2 key/value groups); only the first line is shown in reports."""
    check_gradients(candidate, problem.make(track, rng, b=2, s=5, d=8, h=4), rng, record)


@torch_only
@grade("gradient", points=2)
def test_gradients_through_fully_masked_rows(candidate, problem, track, rng, record):
    """Gradients stay finite (and correct) when some query rows are fully masked."""
    case = problem.make(track, rng, b=2, s=5, d=8, h=2)
    s_k = case.x.shape[1] if case.y is None else case.y.shape[1]
    check_gradients(candidate, case.replace(mask=full_row_mask(2, 2, 5, s_k, rows=(1,))), rng, record)


@torch_only
@grade("gradient", points=1)
def test_gradients_float32(candidate, problem, track, rng, record):
    """float32 gradients (module.to(float32)) agree with the reference to 1e-4."""
    check_gradients(candidate, problem.make(track, rng, b=2, s=4, d=8, h=2), rng, record, dtype="float32")


# -- structure ------------------------------------------------------------------------------------------
@torch_only
@grade("structure", points=1)
def test_parameter_layout(candidate, problem, track, rng, record):
    """Parameters are separate w_q/w_k/w_v/w_o Linears or a fused qkv Linear plus w_o/wo."""
    record.note(**check_structure(candidate, problem.make(track, rng, d=8, h=2), record))


@torch_only
@grade("structure", points=1)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_parameter_count(candidate, problem, track, rng, record, bias):
    """Exactly the number of parameters this exercise's layout needs, with and without bias.

    E.g. 4d² + 4d with bias for MHA; the count expected is in the test's diagnostics."""
    case = problem.make(track, rng, d=8, h=2, bias=bias)
    record.note(expected=expected_param_count(case.d, case.h, case.g, bias))
    if not bias:
        check_bias_kwarg(candidate, case, record)
    check_param_count(candidate, case, record)


@torch_only
@grade("structure", points=0)
def test_flops(candidate, problem, track, rng, record):
    """FLOPs of one forward (FlopCounterMode) next to the textbook count. Informative: no points."""
    case = problem.make(track, rng, b=1, s=16, d=32, h=4)
    record.note(**measure_flops(candidate, case, problem.expected_flops(case)))
