"""Hidden suite: flash attention — attention over pre-split heads with keys processed block by block and an
online softmax, never building the (s_q, s_k) matrix — both tracks (the torch track is a function over tensors).

Numeric tests compare with standard attention in float64 (causal = top-left: query i sees keys j <= i), over
block sizes 1, ragged, = s and > s, the default block size, s_q != s_k, d_k = 1 and a seeded sweep; edge tests
check dtypes, scores in the thousands, non-contiguous inputs, no mutation, determinism; torch gradients wrt Q, K,
V against analytic float64 gradients; structure: the peak extra memory of a call at s = 4096, measured by the host
from the worker's cgroup, within 8·s·(d_k + block_size) elements + 48 MiB — far below one (s, s) score matrix.
"""

import numpy as np
import pytest

from graders.common.flash import (FlashCase, check_forward, check_gradients, check_memory, make_case, reference,
                                  run)
from graders.common import flash_shrink
from graders.common.suite import check_unmutated
from harness.core.checks import CheckFailure, assert_close, check_output
from harness.core.errors import CandidateException

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")


# -- shape ----------------------------------------------------------------------------------------------
SHAPES = [(1, 1, 1, 1, 4, 4), (2, 3, 10, 10, 8, 4), (1, 2, 7, 13, 5, 3), (2, 1, 13, 7, 16, 8), (3, 4, 5, 5, 1, 2)]


@grade("shape", points=1)
@pytest.mark.parametrize("b,h,s_q,s_k,d_k,block", SHAPES,
                         ids=[f"b{b}-h{h}-sq{q}-sk{k}-dk{d}-B{B}" for b, h, q, k, d, B in SHAPES])
def test_output_shape(candidate, rng, record, b, h, s_q, s_k, d_k, block):
    """The output is exactly (b, h, s_q, d_k), like Q (no broadcasting accepted)."""
    case = make_case(rng, b=b, h=h, s=s_q, s_k=s_k, d_k=d_k, block_size=block)
    out = check_output(run(candidate, case), shape=case.out_shape, dtype="float64")
    record.forward(case, out, lambda: bool(np.allclose(out, reference(case), atol=1e-6, rtol=1e-6)))


# -- numeric --------------------------------------------------------------------------------------------
@grade("numeric", points=3)
def test_matches_standard_attention_float64(candidate, rng, record):
    """Equals softmax(Q Kᵀ / sqrt(d_k)) V to 1e-10 (s = 37 with blocks of 8: the last block is partial)."""
    check_forward(candidate, make_case(rng, b=2, h=2, s=37, d_k=8, block_size=8), record)


@grade("numeric", points=3)
def test_matches_standard_attention_float32(candidate, rng, record):
    """float32 in, float32 out, within 1e-5 of the float64 reference (s = 40, blocks of 16)."""
    check_forward(candidate, make_case(rng, b=2, h=3, s=40, d_k=16, block_size=16), record, dtype="float32")


@grade("numeric", points=3)
def test_causal(candidate, rng, record):
    """causal=True: query i attends to keys j <= i only (s = 37, blocks of 8)."""
    check_forward(candidate, make_case(rng, b=2, h=2, s=37, d_k=8, block_size=8, causal=True), record)


@grade("numeric", points=1)
def test_causal_float32(candidate, rng, record):
    """causal=True in float32."""
    check_forward(candidate, make_case(rng, b=1, h=2, s=30, d_k=8, block_size=7, causal=True), record,
                  dtype="float32")


BLOCKS = [(1, False), (1, True), (5, True), (37, False), (37, True), (64, True), (1000, False)]


@grade("numeric", points=1)
@pytest.mark.parametrize("block,causal", BLOCKS, ids=[f"B{b}-{'causal' if c else 'full'}" for b, c in BLOCKS])
def test_block_sizes(candidate, rng, record, block, causal):
    """Any block size gives the same answer at s = 37: 1 (one key at a time), 5 (ragged), 37 (= s), 64 and 1000 (> s)."""
    check_forward(candidate, make_case(rng, b=1, h=2, s=37, d_k=4, block_size=block, causal=causal), record)


@grade("numeric", points=1)
def test_default_block_size(candidate, rng, record):
    """block_size not passed: the default (64) over s = 150 keys, causal."""
    case = make_case(rng, b=1, h=2, s=150, d_k=8, causal=True)
    check_forward(candidate, FlashCase(case.q, case.k, case.v, None, True), record)


LENGTHS = [(9, 23, False), (9, 23, True), (23, 9, False), (23, 9, True)]


@grade("numeric", points=2)
@pytest.mark.parametrize("s_q,s_k,causal", LENGTHS,
                         ids=[f"sq{q}-sk{k}-{'causal' if c else 'full'}" for q, k, c in LENGTHS])
def test_query_and_key_lengths_differ(candidate, rng, record, s_q, s_k, causal):
    """s_q != s_k; causal is top-left aligned (query i sees keys 0..i, as SDPA's is_causal=True)."""
    check_forward(candidate, make_case(rng, b=2, h=2, s=s_q, s_k=s_k, d_k=8, block_size=4, causal=causal), record)


@grade("numeric", points=1)
def test_head_dim_one(candidate, rng, record):
    """d_k = 1."""
    check_forward(candidate, make_case(rng, b=2, h=3, s=11, d_k=1, block_size=3, causal=True), record)


@grade("numeric", points=1)
def test_single_token(candidate, rng, record):
    """s_q = s_k = 1."""
    check_forward(candidate, make_case(rng, b=2, h=2, s=1, d_k=8, block_size=4, causal=True), record)


@grade("numeric", points=2)
def test_large_case(candidate, rng, record):
    """s = 512, blocks of 64, causal."""
    check_forward(candidate, make_case(rng, b=1, h=2, s=512, d_k=32, block_size=64, causal=True), record)


@grade("numeric", points=3)
def test_sweep(candidate, rng, record, grade_seed):
    """16 seeded random cases: b 1-3, h 1-4, s_q and s_k 1-70, d_k 1-32, block 1-80, causal or not, float32/64."""
    for i in range(16):
        s_q = int(rng.integers(1, 71))
        s_k = s_q if rng.random() < 0.5 else int(rng.integers(1, 71))
        case = make_case(rng, b=int(rng.integers(1, 4)), h=int(rng.integers(1, 5)), s=s_q, s_k=s_k,
                         d_k=int(rng.choice([1, 2, 3, 4, 8, 16, 32])), block_size=int(rng.integers(1, 81)),
                         causal=bool(rng.random() < 0.5))
        dtype = "float32" if rng.random() < 0.5 else "float64"
        try:
            check_forward(candidate, case, record, dtype=dtype)
        except (CheckFailure, CandidateException) as exc:
            if isinstance(exc, CandidateException) and exc.phase == "import":
                raise
            kind = "wrong" if isinstance(exc, CheckFailure) else "raised"
            small, _, calls = flash_shrink.shrink(candidate, case, dtype, record, kind)
            where = f"sweep case {i + 1}/16 ({flash_shrink.describe(case.astype(dtype))}; seed {grade_seed})"
            smallest = flash_shrink.describe(small)
            if kind == "raised":  # an exception stays an error, its message naming the case
                raise CandidateException(exc.exc_type, f"{exc.exc_message} — fails when {smallest}. Shrunk from "
                                         f"{where}", exc.traceback, exc.phase) from None
            raise CheckFailure(f"fails when {smallest}: {exc.message}. Shrunk from {where}",
                               {**exc.diagnostics, "smallest_failing_case": small.describe(),
                                "shrink_calls": calls}) from None


# -- edge -----------------------------------------------------------------------------------------------
@grade("edge", points=1)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_preserved(candidate, rng, record, dtype):
    """The output dtype equals the input dtype."""
    case = make_case(rng, b=1, h=2, s=9, d_k=4, block_size=4).astype(dtype)
    try:
        check_output(run(candidate, case), shape=case.out_shape, dtype=dtype)
    except CheckFailure as exc:
        if "returned_dtype" in exc.diagnostics:
            record.signature("dtype", expected=dtype, got=exc.diagnostics["returned_dtype"])
        raise


@grade("edge", points=2, visibility="hidden")
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_large_magnitude_scores(candidate, rng, record, causal):
    """Scores in the thousands stay finite and correct: the running max is subtracted before exp."""
    check_forward(candidate, make_case(rng, b=1, h=2, s=20, d_k=8, block_size=4, causal=causal, scale=40.0), record)


@grade("edge", points=1)
def test_large_magnitude_scores_float32(candidate, rng, record):
    """Scores in the thousands in float32: no overflow, no NaN (checked to 1e-3)."""
    check_forward(candidate, make_case(rng, b=1, h=2, s=20, d_k=8, block_size=4, scale=40.0), record,
                  dtype="float32", tol=1e-3)


@grade("edge", points=1)
@pytest.mark.parametrize("layout", ["F", "strided"])
def test_non_contiguous_inputs(candidate, track, rng, record, layout):
    """Fortran-ordered / strided arrays (NumPy); transposed / strided views (torch: catches .view on them)."""
    layout = "transposed" if (track == "torch" and layout == "F") else layout
    check_forward(candidate, make_case(rng, b=2, h=2, s=11, d_k=4, block_size=4, causal=True), record, layout=layout)


@grade("edge", points=1)
def test_inputs_not_mutated(candidate, rng, record):
    """Q, K and V are not modified in place."""
    case = make_case(rng, b=1, h=2, s=9, d_k=4, block_size=4, causal=True)
    check_unmutated(run(candidate, case, return_inputs=True), case.arrays(), record)


@grade("edge", points=1)
def test_deterministic(candidate, rng, record):
    """Two calls with identical inputs give identical outputs."""
    case = make_case(rng, b=1, h=2, s=13, d_k=4, block_size=4)
    first = check_output(run(candidate, case), shape=case.out_shape, dtype="float64")
    second = check_output(run(candidate, case), shape=case.out_shape, dtype="float64")
    if not np.array_equal(first, second, equal_nan=True):
        raise CheckFailure("two calls with identical inputs gave different outputs")
    assert_close(first, reference(case), tol=1e-10, what="output (determinism is credited only for a correct one)")


# -- gradient (torch) -----------------------------------------------------------------------------------
GRADS = [(13, 13, False, "float64"), (13, 13, True, "float64"), (11, 6, True, "float64"), (12, 12, True, "float32")]


@torch_only
@grade("gradient", points=2)
@pytest.mark.parametrize("s_q,s_k,causal,dtype", GRADS,
                         ids=[f"sq{q}-sk{k}-{'causal' if c else 'full'}-{d}" for q, k, c, d in GRADS])
def test_gradients(candidate, rng, record, s_q, s_k, causal, dtype):
    """Gradients wrt Q, K and V flow through the blocks and match standard attention's (analytic, float64)."""
    check_gradients(candidate, make_case(rng, b=2, h=2, s=s_q, s_k=s_k, d_k=4, block_size=4, causal=causal), rng,
                    record, dtype=dtype)


# -- structure: memory ----------------------------------------------------------------------------------
@grade("structure", points=3)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_memory_stays_linear_in_s(candidate, track, rng, record, causal):
    """At s = 4096 (d_k = 16, blocks of 64, float64) the call's peak extra memory, measured by the host, stays
    within 8·s·(d_k + block_size) elements + 48 MiB (68 MiB), far below one (s, s) score matrix (128 MiB); torch:
    under no_grad."""
    case = make_case(rng, b=1, h=1, s=4096, d_k=16, block_size=64, causal=causal)
    check_memory(candidate, case, record)
