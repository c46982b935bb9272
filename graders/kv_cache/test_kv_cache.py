"""Hidden suite: KV-cache decoding with grouped-query attention (exercise kv_cache) — both tracks.

A call takes the new tokens and the (K, V) cache of the prefix (None: prefill) and returns (out, (K, V)) with the
cache extended. The core property: any split of a sequence into chunks, each call fed the cache the previous call
returned, gives — concatenated — causal GQA over the whole sequence, and the final cache holds the g groups' K, V.
"""

import numpy as np
import pytest

from graders.common.kv import (check_chunks, check_gradients, leaves, make_case, run_step, step, with_prefix)
from graders.common.suite import (check_bias_kwarg, check_not_mutated, check_param_count, check_structure,
                                  expected_param_count)
from harness.core.checks import CheckFailure, assert_close, check_output
from harness.core.errors import CandidateException

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")
SHAPES = [(1, 1, 8, 2, 1), (2, 5, 8, 2, 2), (3, 4, 16, 4, 2), (1, 6, 16, 8, 1), (2, 3, 12, 3, 3)]
CHUNKS = [(1, 1, 1, 1, 1, 1), (3, 1, 1, 1), (2, 4), (1, 3, 2), (4, 1, 1)]


# -- shape ----------------------------------------------------------------------------------------------
@grade("shape", points=1)
@pytest.mark.parametrize("b,s,d,h,g", SHAPES, ids=[f"b{b}-s{s}-d{d}-h{h}-g{g}" for b, s, d, h, g in SHAPES])
def test_prefill_shapes(candidate, track, rng, record, b, s, d, h, g):
    """Prefill (cache=None): out is (b, s, d) and K, V are (b, g, s, d_k)."""
    run_step(candidate, make_case(track, rng, b=b, s=s, d=d, h=h, g=g), record, check_values=False)


@grade("shape", points=1)
@pytest.mark.parametrize("t0,s_new", [(4, 1), (3, 2)], ids=["prefix4-new1", "prefix3-new2"])
def test_step_shapes(candidate, track, rng, record, t0, s_new):
    """With a prefix of t0 tokens: out is (b, s_new, d) and K, V grow to (b, g, t0 + s_new, d_k)."""
    case = with_prefix(make_case(track, rng, b=2, s=t0 + s_new, d=16, h=4, g=2), t0)
    run_step(candidate, case, record, check_values=False)


# -- numeric --------------------------------------------------------------------------------------------
@grade("numeric", points=3)
def test_prefill_float64(candidate, track, rng, record):
    """Prefill equals causal GQA over the prompt (1e-10), and the cache holds its K and V."""
    run_step(candidate, make_case(track, rng, b=2, s=6, d=16, h=4, g=2), record)


@grade("numeric", points=2)
def test_prefill_float32(candidate, track, rng, record):
    """Prefill in float32 (1e-5)."""
    run_step(candidate, make_case(track, rng, b=3, s=5, d=12, h=6, g=3).astype("float32"), record)


@grade("numeric", points=3)
def test_one_token_decoding(candidate, track, rng, record):
    """Prefill 3 tokens, then 5 one-token steps, each fed the cache the previous call returned."""
    check_chunks(candidate, make_case(track, rng, b=2, s=8, d=16, h=4, g=2), (3, 1, 1, 1, 1, 1), record)


@grade("numeric", points=2)
@pytest.mark.parametrize("sizes", CHUNKS, ids=["-".join(map(str, c)) for c in CHUNKS])
def test_chunked_sequence(candidate, track, rng, record, sizes):
    """Uneven chunks (prefill of one token included) concatenate to causal GQA over the whole sequence."""
    check_chunks(candidate, make_case(track, rng, b=2, s=sum(sizes), d=16, h=4, g=2), sizes, record)


@grade("numeric", points=2)
@pytest.mark.parametrize("t0,s_new", [(5, 1), (4, 3)], ids=["prefix5-new1", "prefix4-new3"])
def test_step_on_given_prefix(candidate, track, rng, record, t0, s_new):
    """Given the reference cache of a prefix, new tokens attend to the whole prefix and causally among
    themselves: new token i sits at position t0 + i (the mask is not anchored at position 0)."""
    run_step(candidate, with_prefix(make_case(track, rng, b=2, s=t0 + s_new, d=16, h=4, g=2), t0), record)


@grade("numeric", points=1)
@pytest.mark.parametrize("g", [1, 2, 4, 8], ids=[f"h8-g{g}" for g in (1, 2, 4, 8)])
def test_group_counts(candidate, track, rng, record, g):
    """h = 8 query heads over g = 1, 2, 4, 8 groups (MQA to MHA): prefill 3 then 2 one-token steps."""
    check_chunks(candidate, make_case(track, rng, b=2, s=5, d=16, h=8, g=g), (3, 1, 1), record)


@grade("numeric", points=2)
@pytest.mark.parametrize("g", [2, 4], ids=["g2", "g4"])
def test_head_to_group_mapping(candidate, track, rng, record, g):
    """Query head i reads group i // (h // g) of the cached keys and values (repeat_interleave order)."""
    run_step(candidate, with_prefix(make_case(track, rng, b=2, s=6, d=16, h=8, g=g), 4), record)


@grade("numeric", points=3)
def test_random_chunkings(candidate, track, rng, record):
    """Seeded random shapes (b ≤ 3, s ≤ 12, h ≤ 8, every g dividing h, float32/float64) each cut into random
    chunks: the concatenated outputs and the final cache match the reference."""
    for _ in range(6):
        h = int(rng.choice([1, 2, 4, 8]))
        g = int(rng.choice([x for x in (1, 2, 4, 8) if h % x == 0]))
        d = h * int(rng.choice([1, 2, 4]))
        s = int(rng.integers(1, 13))
        cuts = sorted(rng.choice(np.arange(1, s), size=min(s - 1, int(rng.integers(0, 4))), replace=False)) if s > 1 \
            else []
        sizes = tuple(int(n) for n in np.diff([0, *cuts, s]))
        dtype = str(rng.choice(["float32", "float64"]))
        case = make_case(track, rng, b=int(rng.integers(1, 4)), s=s, d=d, h=h, g=g, bias=track == "torch" and bool(rng.integers(0, 2)))
        check_chunks(candidate, case, sizes, record, dtype=dtype)


@torch_only
@grade("numeric", points=2)
def test_without_bias(candidate, track, rng, record):
    """bias=False builds bias-free projections and still matches the reference over a prefill and two steps."""
    case = make_case(track, rng, b=2, s=5, d=8, h=2, g=1, bias=False)
    check_bias_kwarg(candidate, case, record)
    check_chunks(candidate, case, (3, 1, 1), record)


# -- edge -----------------------------------------------------------------------------------------------
@grade("edge", points=1)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_preserved(candidate, track, rng, record, dtype):
    """The output and both cache tensors keep the input dtype, in prefill and in a step."""
    case = with_prefix(make_case(track, rng, b=2, s=5, d=8, h=2, g=1), 3, dtype)
    for c in (case.replace(x=case.x, cache=None), case):
        result = candidate.run(c)
        for leaf, what in zip(leaves(result), ("output", "cached K", "cached V")):
            info = leaf.info or {}
            got = str(leaf.out.dtype) if leaf.out is not None else info.get("dtype") or info.get("unsendable_dtype")
            if got is not None and got != dtype:
                record.signature("dtype", expected=dtype, got=got)
                raise CheckFailure(f"{what} has dtype {got}, expected {dtype} (the input dtype)",
                                   {"returned_dtype": got, "expected_dtype": dtype})
        run_step(candidate, c, record, check_values=False)  # the values are the numeric tests' to judge


@grade("edge", points=1)
def test_prefill_single_token(candidate, track, rng, record):
    """A prompt of one token (b = 1), then one decoding step."""
    check_chunks(candidate, make_case(track, rng, b=1, s=2, d=8, h=2, g=1), (1, 1), record)


@grade("edge", points=1)
@pytest.mark.parametrize("cache_b", [3, 1], ids=["cache-b3", "cache-b1"])
def test_cache_of_another_batch_size(candidate, track, rng, record, cache_b):
    """x has b = 2 rows but the cache another batch size: raising an error is right, returning outputs is not
    (the same call with a cache of the right batch size must work)."""
    other = with_prefix(make_case(track, rng, b=cache_b, s=4, d=8, h=2, g=1), 3)
    case = with_prefix(make_case(track, rng, b=2, s=4, d=8, h=2, g=1), 3)
    run_step(candidate, case, record)
    case = case.replace(cache=other.cache)
    try:
        result = candidate.run(case)
    except CandidateException:
        return  # rejected, in the candidate's own words
    got = [list(leaf.out.shape) for leaf in leaves(result) if leaf.out is not None]
    raise CheckFailure(f"a cache of batch size {cache_b} with x of batch size 2 was accepted (returned shapes {got}); "
                       "a cache that does not belong to this batch must be rejected with an error",
                       {"cache_batch": cache_b, "x_batch": 2, "returned_shapes": got})


@grade("edge", points=1)
def test_inputs_not_mutated(candidate, track, rng, record):
    """Neither the input cache (K, V) nor X or the weights are modified: a new cache is returned."""
    check_not_mutated(candidate, with_prefix(make_case(track, rng, b=2, s=5, d=8, h=2, g=1), 3), record)


@grade("edge", points=2, visibility="hidden")
def test_large_magnitude_inputs(candidate, track, rng, record):
    """Scores in the thousands: softmax must subtract the row max (no overflow, no NaN) in prefill and decoding."""
    check_chunks(candidate, make_case(track, rng, b=2, s=5, d=8, h=2, g=1, scale=40.0), (3, 1, 1), record)


@grade("edge", points=1, visibility="hidden")
def test_deterministic(candidate, track, rng, record):
    """Two calls with the same inputs give bit-identical outputs and caches."""
    case = with_prefix(make_case(track, rng, b=2, s=5, d=8, h=2, g=1), 3)
    first = [leaf.out for leaf in leaves(candidate.run(case))]
    second = [leaf.out for leaf in leaves(candidate.run(case))]
    if any(a is None or b is None or a.shape != b.shape or not np.array_equal(a, b, equal_nan=True)
           for a, b in zip(first, second)):
        raise CheckFailure("two calls with identical inputs gave different outputs or caches")


@torch_only
@grade("edge", points=1)
def test_eval_matches_train(candidate, track, rng):
    """train() and eval() give the same output (no dropout or other mode-dependent behaviour)."""
    case = with_prefix(make_case(track, rng, b=2, s=5, d=8, h=2, g=1), 3)
    a = check_output(leaves(candidate.run(case, mode="eval"))[0], shape=case.x.shape, dtype="float64")
    b = check_output(leaves(candidate.run(case, mode="train"))[0], shape=case.x.shape, dtype="float64")
    assert_close(b, a, tol=1e-12, what="train-mode output")


# -- gradient -------------------------------------------------------------------------------------------
@torch_only
@grade("gradient", points=2)
@pytest.mark.parametrize("t0", [0, 3], ids=["prefill", "prefix3"])
def test_gradients(candidate, track, rng, record, t0):
    """Gradients of one call (prefill, or two new tokens after a cached prefix) reach x and every parameter and
    match the analytic float64 reference; the cache is an input, constant."""
    check_gradients(candidate, with_prefix(make_case(track, rng, b=2, s=t0 + 2, d=16, h=4, g=2), t0), rng, record)


@torch_only
@grade("gradient", points=1)
def test_gradients_float32(candidate, track, rng, record):
    """float32 gradients of a decoding step agree with the reference to 1e-4."""
    case = with_prefix(make_case(track, rng, b=2, s=5, d=8, h=2, g=1), 4, "float32")
    check_gradients(candidate, case, rng, record, dtype="float32")


# -- structure ------------------------------------------------------------------------------------------
@grade("structure", points=2)
@pytest.mark.parametrize("g", [1, 2], ids=["g1", "g2"])
def test_cache_holds_groups(candidate, track, rng, record, g):
    """The cache stores the g key/value groups, not h repeated heads: g/h of an MHA cache (h = 4)."""
    case = make_case(track, rng, b=2, s=4, d=16, h=4, g=g)
    _, (k, _) = run_step(candidate, case, record, check_values=False)
    record.note(cache_values_per_token=2 * k.shape[1] * k.shape[3], mha_values_per_token=2 * case.d)
    assert_close(k, step(case)[1][0], tol=1e-10, what="cached K")


@torch_only
@grade("structure", points=1)
def test_parameter_layout(candidate, track, rng, record):
    """Parameters are separate w_q/w_k/w_v/w_o Linears (as in gqa)."""
    record.note(**check_structure(candidate, make_case(track, rng, d=8, h=2, g=1), record))


COUNTS = [(1, True), (2, False), (4, True)]


@torch_only
@grade("structure", points=1)
@pytest.mark.parametrize("g,bias", COUNTS, ids=[f"g{g}-{'bias' if b else 'no_bias'}" for g, b in COUNTS])
def test_parameter_count(candidate, track, rng, record, g, bias):
    """Exactly 2d² + 2d·g·d_k parameters (+ 2d + 2g·d_k with bias)."""
    case = make_case(track, rng, d=16, h=4, g=g, bias=bias)
    record.note(expected=expected_param_count(case.d, 4, g, bias))
    if not bias:
        check_bias_kwarg(candidate, case, record)
    check_param_count(candidate, case, record)
