"""Hidden suite: multi-head cross-attention (queries from X, keys/values from a context Y) — both tracks.

On top of the shared tests: query and context lengths that differ in both directions (and s_k = 1), key-padding
masks of shape (b, 1, 1, s_k), and metamorphic probes: X may matter only through Q, Y must matter, padded context
tokens must not, and reordering the context tokens changes nothing.
"""

import numpy as np
import pytest

from graders.common.problem import Problem
from graders.common.standard_tests import *  # noqa: F401,F403  (the tests every exercise shares)
from graders.common.sweep import *  # noqa: F401,F403  (the shape sweep and the large cases)
from graders.common.value_space import *  # noqa: F401,F403  (scores where softmax code breaks)
from graders.common.suite import check_forward, check_gradients, check_invariant, padding_mask
from harness.core.checks import CheckFailure, assert_close, check_output

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")
PROBLEM = Problem("cross")
LENGTHS = [(3, 7), (7, 3), (5, 1), (1, 6)]


@pytest.fixture(scope="module")
def problem():
    return PROBLEM


def run(candidate, case):
    return check_output(candidate.run(case), shape=case.x.shape, dtype=case.x.dtype)


# -- lengths and masks ----------------------------------------------------------------------------------
@grade("numeric", points=1)
@pytest.mark.parametrize("s_q,s_k", LENGTHS, ids=[f"sq{q}-sk{k}" for q, k in LENGTHS])
def test_query_and_context_lengths(candidate, track, rng, record, s_q, s_k):
    """s_q < s_k, s_q > s_k, a single context token (s_k = 1) and a single query (s_q = 1)."""
    check_forward(candidate, PROBLEM.make(track, rng, b=2, s=s_q, s_k=s_k, d=8, h=2), record)


@grade("numeric", points=1)
@pytest.mark.parametrize("s_q,s_k", [(6, 3), (2, 8)], ids=["sq6-sk3", "sq2-sk8"])
def test_context_padding_mask(candidate, track, rng, record, s_q, s_k):
    """A (b, 1, 1, s_k) context-padding mask with s_q ≠ s_k."""
    case = PROBLEM.make(track, rng, b=3, s=s_q, s_k=s_k, d=8, h=2, mask=padding_mask(rng, 3, s_k))
    check_forward(candidate, case, record)


@grade("numeric", points=1)
def test_context_fully_padded(candidate, track, rng, record):
    """A batch row whose whole context is padding gives a zero context for every query (0, or the output bias)."""
    mask = padding_mask(rng, 2, 6)
    mask[1] = True
    case = PROBLEM.make(track, rng, b=2, s=4, s_k=6, d=8, h=2, mask=mask)
    out = check_forward(candidate, case, record)
    expect = np.zeros_like(out[1]) if case.bo is None else np.broadcast_to(case.bo, out[1].shape)
    if not np.allclose(out[1], expect, atol=1e-10):
        raise CheckFailure("queries whose whole context is masked are not a zero context")


# -- metamorphic probes ---------------------------------------------------------------------------------
@grade("numeric", points=2)
def test_queries_matter_only_through_q(candidate, track, rng):
    """With W_Q blind to some directions of X, moving X along them leaves the output unchanged: X enters only
    through Q = X W_Q (keys and values come from the context Y)."""
    case = PROBLEM.make(track, rng, b=2, s=5, s_k=4, d=8, h=2)
    u = np.linalg.qr(rng.standard_normal((case.d, 3)))[0]            # (d, 3) orthonormal directions
    wq = (np.eye(case.d) - u @ u.T) @ case.wq                        # (d, d), u.T @ wq = 0
    case = case.replace(wq=wq)
    x = case.x + rng.standard_normal((2, 5, 3)) @ u.T * 3            # (b, s_q, d) moved only along u
    check_invariant(candidate, case, case.replace(x=x), what="output after changing X where W_Q cannot see it")


@grade("numeric", points=2)
def test_output_depends_on_context(candidate, track, rng):
    """Changing the context Y (same X) must change the output: keys and values come from Y."""
    case = PROBLEM.make(track, rng, b=2, s=5, s_k=5, d=8, h=2)
    a = run(candidate, case)
    b = run(candidate, case.replace(y=rng.standard_normal(case.y.shape)))
    if np.allclose(a, b, atol=1e-3):
        raise CheckFailure("the output did not change when the context Y changed: keys and values must be "
                           "projected from Y (the second argument), not from X",
                           {"max_abs_change": float(np.abs(a - b).max())})


@grade("numeric", points=2)
def test_padded_context_ignored(candidate, track, rng):
    """Changing context tokens hidden by a (b, 1, 1, s_k) padding mask leaves every output unchanged."""
    mask = padding_mask(rng, 3, 7)
    case = PROBLEM.make(track, rng, b=3, s=4, s_k=7, d=8, h=2, mask=mask)
    pad = mask[:, 0, 0, :]                                            # (b, s_k)
    y = case.y.copy()
    y[pad] = rng.standard_normal(y[pad].shape) * 3
    check_invariant(candidate, case, case.replace(y=y), what="output after changing padded context tokens")


@grade("numeric", points=1)
def test_context_order_irrelevant(candidate, track, rng):
    """Permuting the context tokens (and the mask's key axis) leaves the output unchanged."""
    mask = padding_mask(rng, 2, 6)
    case = PROBLEM.make(track, rng, b=2, s=5, s_k=6, d=8, h=2, mask=mask)
    perm = rng.permutation(6)
    a = run(candidate, case)
    b = run(candidate, case.replace(y=case.y[:, perm], mask=mask[..., perm]))
    assert_close(b, a, tol=1e-9, what="output after permuting the context tokens", extra={"permutation": perm.tolist()})


# -- gradients ------------------------------------------------------------------------------------------
@torch_only
@grade("gradient", points=1)
@pytest.mark.parametrize("s_q,s_k", [(6, 3), (2, 8)], ids=["sq6-sk3", "sq2-sk8"])
def test_gradients_context_padding(candidate, track, rng, record, s_q, s_k):
    """Gradients for x, context and every parameter with s_q ≠ s_k under a context-padding mask."""
    case = PROBLEM.make(track, rng, b=2, s=s_q, s_k=s_k, d=8, h=2, mask=padding_mask(rng, 2, s_k))
    check_gradients(candidate, case, rng, record)
