"""Hidden suite: grouped-query self-attention (h query heads share g key/value groups) — both tracks.

On top of the shared tests (which use g = h // 2): h = 8 with g in {1, 2, 4, 8}; g = h is MHA and g = 1 is MQA on
the same weights; the head-to-group mapping (query head i reads group i // (h // g), repeat_interleave order, not
tiling); parameter counts 2d² + 2d·g·d_k (+ 2d + 2g·d_k); FLOPs next to 4sd² + 4sd·g·d_k + 4s²d.
"""

import numpy as np
import pytest

from graders.common.oracle import softmax
from graders.common.problem import Problem
from graders.common.standard_tests import *  # noqa: F401,F403  (the tests every exercise shares)
from graders.common.sweep import *  # noqa: F401,F403  (the shape sweep and the large cases)
from graders.common.value_space import *  # noqa: F401,F403  (scores where softmax code breaks)
from graders.common.suite import (causal_mask, check_forward, check_gradients, check_param_count, expected_param_count,
                                  fit, measure_flops, reference)
from harness.core.checks import CheckFailure, assert_close, check_output

grade = pytest.mark.grade
torch_only = pytest.mark.tracks("torch")
PROBLEM = Problem("gqa")
H, GROUPS = 8, [1, 2, 4, 8]


@pytest.fixture(scope="module")
def problem():
    return PROBLEM


def mqa(case):
    """Multi-query attention written out independently: every query head shares the one key/value head."""
    c = case.astype(np.float64)
    b, s, d = c.x.shape
    d_k = d // c.h
    bq, bk, bv, bo = (0.0,) * 4 if c.bq is None else (c.bq, c.bk, c.bv, c.bo)
    q = (c.x @ c.wq + bq).reshape(b, s, c.h, d_k).transpose(0, 2, 1, 3)  # (b, h, s, d_k)
    k = (c.x @ c.wk + bk)[:, None]                                   # (b, 1, s, d_k) one shared key head
    v = (c.x @ c.wv + bv)[:, None]                                   # (b, 1, s, d_k) one shared value head
    p = softmax(q @ k.swapaxes(-1, -2) / np.sqrt(d_k))               # (b, h, s, s)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, d)             # (b, s, d)
    return ctx @ c.wo + bo                                           # (b, s, d)


# -- group counts ---------------------------------------------------------------------------------------
@grade("numeric", points=1)
@pytest.mark.parametrize("g", GROUPS, ids=[f"h8-g{g}" for g in GROUPS])
def test_group_counts(candidate, track, rng, record, g):
    """h = 8 query heads over g = 1, 2, 4, 8 key/value groups (d = 16, d_k = 2)."""
    check_forward(candidate, PROBLEM.make(track, rng, b=2, s=5, d=16, h=H, g=g), record)


@grade("numeric", points=2)
def test_all_groups_is_mha(candidate, track, rng, record):
    """g = h is ordinary multi-head attention on the same weights (compared with the MHA reference)."""
    case = fit(candidate, PROBLEM.make(track, rng, b=2, s=6, d=16, h=H, g=H, mask=causal_mask(6)))
    check_forward(candidate, case, record, expected=reference(case.replace(g=None)), what="output at g = h (MHA)")


@grade("numeric", points=2)
def test_one_group_is_mqa(candidate, track, rng, record):
    """g = 1 is multi-query attention: all h query heads share one key/value head."""
    case = PROBLEM.make(track, rng, b=2, s=6, d=16, h=H, g=1, mask=None)
    check_forward(candidate, case, record, expected=mqa(case), what="output at g = 1 (MQA)")


@grade("numeric", points=2)
@pytest.mark.parametrize("g,group", [(2, 1), (4, 1), (4, 2)], ids=["g2-group1", "g4-group1", "g4-group2"])
def test_head_to_group_mapping(candidate, track, rng, record, g, group):
    """Only one group has non-zero values and W_O = I: exactly the query heads i with i // (h // g) == group may
    produce a non-zero context (repeat_interleave order, as Llama and SDPA enable_gqa; not tiling)."""
    case = PROBLEM.make(track, rng, b=2, s=5, d=16, h=H, g=g, bias=False)
    d_k, rep = case.d // H, H // g
    wv = np.zeros_like(case.wv)
    cols = slice(group * d_k, (group + 1) * d_k)
    wv[:, cols] = case.wv[:, cols]
    case = case.replace(wv=wv, wo=np.eye(case.d))
    out = check_output(candidate.run(case), shape=case.x.shape, dtype="float64")
    norms = np.abs(out.reshape(2, 5, H, d_k)).max(axis=(0, 1, 3))     # (h,) per query head
    got = [i for i in range(H) if norms[i] > 1e-8]
    want = list(range(group * rep, (group + 1) * rep))
    record.forward(case, out, got == want)
    if got != want:
        raise CheckFailure(f"with values only in kv group {group} (g={g}, h={H}), query heads {got} read it; "
                           f"expected heads {want}: query head i must use group i // (h // g)",
                           {"heads_reading_group": got, "expected_heads": want})
    assert_close(out, reference(case), tol=1e-10, what="output")


# -- torch: gradients, structure, FLOPs -----------------------------------------------------------------
@torch_only
@grade("gradient", points=1)
@pytest.mark.parametrize("g", [1, 4], ids=["g1", "g4"])
def test_gradients_groups(candidate, track, rng, record, g):
    """Gradients of shared key/value projections accumulate over every query head that reads them."""
    check_gradients(candidate, PROBLEM.make(track, rng, b=2, s=4, d=16, h=H, g=g, mask=causal_mask(4)), rng, record)


COUNTS = [(1, True), (2, False), (4, True), (8, False)]


@torch_only
@grade("structure", points=1)
@pytest.mark.parametrize("g,bias", COUNTS, ids=[f"g{g}-{'bias' if b else 'no_bias'}" for g, b in COUNTS])
def test_parameter_count_groups(candidate, track, rng, record, g, bias):
    """Exactly 2d² + 2d·g·d_k parameters (+ 2d + 2g·d_k with bias): W_K and W_V are Linear(d, g·d_k)."""
    case = PROBLEM.make(track, rng, d=16, h=H, g=g, bias=bias)
    record.note(expected=expected_param_count(case.d, H, g, bias))
    check_param_count(candidate, case, record)


@torch_only
@grade("structure", points=0)
@pytest.mark.parametrize("g", GROUPS, ids=[f"g{g}" for g in GROUPS])
def test_flops_groups(candidate, track, rng, record, g):
    """FLOPs of one forward next to 4sd² + 4sd·g·d_k + 4s²d (per batch row). Informative: no points."""
    case = PROBLEM.make(track, rng, b=1, s=16, d=32, h=H, g=g)
    record.note(**measure_flops(candidate, case, PROBLEM.expected_flops(case)))
