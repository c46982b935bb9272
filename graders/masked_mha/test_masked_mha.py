"""Hidden suite: masked multi-head self-attention (the mask is required) — both tracks.

On top of the shared tests: causal masks at several sizes and broadcast shapes, causal combined with left and
right key padding, fully-masked rows and sequences, and metamorphic probes (future tokens and padded keys must not
matter; adding a constant to every score of a row must not matter).
"""

import numpy as np
import pytest

from graders.common.problem import Problem
from graders.common.standard_tests import *  # noqa: F401,F403  (the tests every exercise shares)
from graders.common.sweep import *  # noqa: F401,F403  (the shape sweep and the large cases)
from graders.common.value_space import *  # noqa: F401,F403  (scores where softmax code breaks)
from graders.common.suite import causal_mask, check_forward, check_gradients, check_invariant, fit, reference
from harness.core.checks import CheckFailure, assert_close, check_output

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")
PROBLEM = Problem("masked")


@pytest.fixture(scope="module")
def problem():
    return PROBLEM


def left_padded_causal(pads, s):
    """(b, 1, s, s): causal, and batch row i has ``pads[i]`` padding tokens at the start (so its first rows
    have no key left at all — they must come out as a zero context)."""
    pad = np.arange(s)[None, :] < np.asarray(pads)[:, None]          # (b, s) True = padding key
    return causal_mask(s)[None, None] | pad[:, None, None, :]


def right_padded_causal(keeps, s):
    """(b, 1, s, s): causal, and batch row i keeps only its first ``keeps[i]`` keys."""
    pad = np.arange(s)[None, :] >= np.asarray(keeps)[:, None]        # (b, s)
    return causal_mask(s)[None, None] | pad[:, None, None, :]


def zero_rows(case, out, rows_of_batch):
    """Every listed (batch, query) row must be a zero context: 0 after W_O, or the output bias."""
    expect = 0.0 if case.bo is None else case.bo
    bad = [(i, r) for i, rows in rows_of_batch.items() for r in rows
           if not np.allclose(out[i, r], expect, atol=1e-10)]
    if bad:
        raise CheckFailure(f"fully-masked query rows are not a zero context (batch, row): {bad[:5]}",
                           {"rows": [list(p) for p in bad[:10]]})


def run(candidate, case):
    return check_output(candidate.run(case), shape=case.x.shape, dtype=case.x.dtype)


# -- causal ---------------------------------------------------------------------------------------------
CAUSAL = [(1, 1, 8, 2), (2, 7, 8, 2), (3, 9, 12, 3), (2, 6, 16, 8)]


@grade("numeric", points=1)
@pytest.mark.parametrize("b,s,d,h", CAUSAL, ids=[f"b{b}-s{s}-d{d}-h{h}" for b, s, d, h in CAUSAL])
def test_causal_sizes(candidate, track, rng, record, b, s, d, h):
    """An (s, s) causal mask at several sizes, including s = 1 and d_k = 2."""
    check_forward(candidate, PROBLEM.make(track, rng, b=b, s=s, d=d, h=h, mask=causal_mask(s)), record)


@grade("numeric", points=1)
@pytest.mark.parametrize("shape", ["1,1,s,s", "b,1,s,s", "b,h,s,s"])
def test_causal_broadcast_shapes(candidate, track, rng, record, shape):
    """The same causal mask given as (1, 1, s, s), (b, 1, s, s) or (b, h, s, s) broadcasts to (b, h, s, s)."""
    b, s, h = 2, 6, 2
    full = {"1,1,s,s": (1, 1, s, s), "b,1,s,s": (b, 1, s, s), "b,h,s,s": (b, h, s, s)}[shape]
    mask = np.broadcast_to(causal_mask(s), full).copy()
    check_forward(candidate, PROBLEM.make(track, rng, b=b, s=s, d=8, h=h, mask=mask), record)


@grade("numeric", points=1)
def test_mask_with_nothing_masked(candidate, track, rng, record):
    """An all-False mask is plain (unmasked) self-attention."""
    case = fit(candidate, PROBLEM.make(track, rng, b=2, s=5, d=8, h=2, mask=np.zeros((5, 5), dtype=bool)))
    check_forward(candidate, case, record, expected=reference(case.replace(mask=None)))


# -- combined masks and fully-masked rows ---------------------------------------------------------------
@grade("numeric", points=2)
def test_causal_with_right_padding(candidate, track, rng, record):
    """Causal OR key padding at the end, as a (b, 1, s, s) mask."""
    case = PROBLEM.make(track, rng, b=3, s=7, d=8, h=2, mask=right_padded_causal([7, 4, 1], 7))
    check_forward(candidate, case, record)


@grade("numeric", points=2)
def test_causal_with_left_padding(candidate, track, rng, record):
    """Causal OR left padding: the first rows of a left-padded sequence see no key at all and must be zero."""
    case = PROBLEM.make(track, rng, b=3, s=6, d=8, h=2, mask=left_padded_causal([0, 2, 4], 6))
    out = check_forward(candidate, case, record)
    zero_rows(case, out, {1: [0, 1], 2: [0, 1, 2, 3]})


@grade("numeric", points=1)
def test_whole_sequence_masked(candidate, track, rng, record):
    """A batch row whose every key is masked gives a zero context for all its queries (no NaN)."""
    mask = np.broadcast_to(causal_mask(5), (2, 1, 5, 5)).copy()
    mask[1] = True
    case = PROBLEM.make(track, rng, b=2, s=5, d=8, h=2, mask=mask)
    out = check_forward(candidate, case, record)
    zero_rows(case, out, {1: range(5)})


@grade("numeric", points=1)
def test_fully_masked_rows_float32(candidate, track, rng, record):
    """Fully-masked rows in float32 are still a zero context (no NaN, no mean of V)."""
    case = PROBLEM.make(track, rng, b=2, s=6, d=8, h=2, mask=left_padded_causal([3, 1], 6))
    out = check_forward(candidate, case, record, dtype="float32")
    expect = 0.0 if case.bo is None else case.bo.astype(np.float32)
    if not np.allclose(out[0, :3], expect, atol=1e-6) or not np.allclose(out[1, :1], expect, atol=1e-6):
        raise CheckFailure("fully-masked query rows are not a zero context in float32")


# -- metamorphic probes ---------------------------------------------------------------------------------
@grade("numeric", points=2)
@pytest.mark.parametrize("cut", [1, 4])
def test_causal_ignores_future_tokens(candidate, track, rng, cut):
    """Under a causal mask, replacing tokens cut.. leaves the outputs of tokens 0..cut-1 unchanged."""
    case = PROBLEM.make(track, rng, b=2, s=7, d=8, h=2, mask=causal_mask(7))
    x = case.x.copy()
    x[:, cut:] = rng.standard_normal(x[:, cut:].shape) * 3
    check_invariant(candidate, case, case.replace(x=x), rows=slice(0, cut),
                    what=f"outputs of tokens before {cut} after changing later tokens")


@grade("numeric", points=2)
def test_padded_keys_ignored(candidate, track, rng):
    """With a (b, 1, 1, s) key-padding mask, changing the padded tokens leaves every real token's output unchanged."""
    keep = [5, 3]
    pad = np.arange(7)[None, :] >= np.asarray(keep)[:, None]         # (b, s)
    case = PROBLEM.make(track, rng, b=2, s=7, d=8, h=2, mask=pad[:, None, None, :])
    x = case.x.copy()
    x[pad] = rng.standard_normal(x[pad].shape) * 3
    a, b = run(candidate, case), run(candidate, case.replace(x=x))
    for i, k in enumerate(keep):
        assert_close(b[i, :k], a[i, :k], tol=1e-9, what=f"batch {i}: real tokens' outputs after changing padded keys")


@grade("numeric", points=2)
def test_score_shift_invariance(candidate, track, rng, record):
    """Adding a large constant (±1000s) to every score of a row changes nothing: softmax(s + c) = softmax(s).

    The inputs carry a constant feature x[..., 0] = 1, so a large row 0 of W_K adds the same vector u to every key
    and q·u to every score in row q. Without subtracting the row max, exp overflows (or underflows) to NaN."""
    case = fit(candidate, PROBLEM.make(track, rng, b=2, s=6, d=8, h=2, mask=right_padded_causal([6, 4], 6)))
    x = case.x.copy()
    x[..., 0] = 1.0
    case = case.replace(x=x)
    wk = case.wk.copy()
    wk[0] += 1000.0 * rng.standard_normal(wk.shape[1])
    shifted = case.replace(wk=wk)
    out = check_forward(candidate, shifted, record)
    assert_close(out, reference(case), tol=1e-8, what="output after shifting every score of a row")


# -- gradients ------------------------------------------------------------------------------------------
@torch_only
@grade("gradient", points=2)
def test_gradients_causal_left_padding(candidate, track, rng, record):
    """Gradients under causal OR left padding (some rows fully masked) are finite and match the reference."""
    case = PROBLEM.make(track, rng, b=2, s=5, d=8, h=2, mask=left_padded_causal([2, 0], 5))
    check_gradients(candidate, case, rng, record)
