"""Value-space cases beside the shape sweep: the same shapes as everywhere, but scores chosen where softmax code
breaks — every score of a row far below zero (a running max started at 0 underflows to 0/0), every score huge
and positive (no max subtracted: overflow), exact ties between keys, all keys equal (uniform weights), and a
single key. Both dtypes: float64 with scores around ±1000, float32 around ±200 (each beyond ``exp``'s range for its
dtype), compared with the float64 oracle (float32 to 1e-3: scores that large carry float32's rounding).

Zero queries (s_q = 0) are not a case: the contract promises sequences of at least one token (a torch
``x.view(b, -1, h, d_k)`` cannot even be formed on an empty batch of tokens), so such a call would test something
the exercise never asked for.

How the scores are placed: the tokens get one constant feature (x[..., 0] = 1) that the query projection maps to
``sign·α·u`` and the key projection to ``u`` (per head, |u|² = d_k), the other key features are shrunk by 1/α, so
every score of every row is ``sign·T`` up to O(1) differences between keys, whatever the mask. Flash cases place
Q and K directly the same way.
"""

from __future__ import annotations

import numpy as np

from harness.core.case import Case
from harness.core.checks import CheckFailure, assert_close, check_output, tolerance_for

KINDS = ("far_below_zero", "huge_positive", "ties", "equal_keys", "single_key")
OFFSET = {"float64": 1000.0, "float32": 200.0}   # |score| of the far/huge rows: exp(-T) underflows, exp(T) overflows
TOL = {"float64": 1e-9, "float32": 1e-3}


def value_tol(kind: str, dtype: str) -> float:
    return TOL[dtype] if kind in ("far_below_zero", "huge_positive") else tolerance_for(dtype)


def place_scores(case: Case, kind: str, dtype: str, rng) -> Case:
    """``case`` (any Case-based exercise) with its projections set so that ``kind`` holds in every row."""
    d = case.d
    g = case.g or case.h
    d_k = d // case.h
    sign = -1.0 if kind == "far_below_zero" else 1.0
    alpha = OFFSET[dtype] / np.sqrt(d_k) if kind in ("far_below_zero", "huge_positive") else 1.0
    u = rng.choice([-1.0, 1.0], size=(g, d_k))                                       # (g, d_k) per key group

    def const_feature(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        a = a.copy()
        a[..., 0] = 1.0
        return a

    x, y = const_feature(case.x), const_feature(case.y)
    wq, wk = case.wq.copy(), case.wk.copy()
    if kind in ("far_below_zero", "huge_positive"):
        wq[0] = sign * alpha * np.repeat(u, case.h // g, axis=0).reshape(-1)         # (d,) each head's query: ±α·u
        wk[0] = u.reshape(-1)                                                        # (g·d_k,) each group's key: u
        wk[1:] /= alpha                                                              # keys differ by O(1/α)
    elif kind == "equal_keys":
        wk[1:] = 0.0                                                                 # every key is exactly u
        wk[0] = u.reshape(-1)
    elif kind == "ties":                                                             # tokens repeated: equal keys
        src = x if y is None else y
        half = max(1, src.shape[1] // 2)
        src[:, half:] = src[:, :src.shape[1] - half]
    changes = {"x": x, "wq": wq, "wk": wk}
    if y is not None:
        changes["y"] = y
    for name in ("bq", "bk"):  # biases would move the scores off their place
        if getattr(case, name) is not None:
            changes[name] = np.zeros_like(getattr(case, name))
    return case.replace(**changes)


def value_case(problem, track, rng, kind: str, dtype: str) -> Case:
    s = 1 if kind == "single_key" and not problem.cross else 6
    case = problem.make(track, rng, b=2, s=s, d=16, h=4, **({"s_k": 1} if problem.cross and kind == "single_key"
                                                             else {}))
    return place_scores(case, kind, dtype, rng)


def check_value_case(candidate, case: Case, kind: str, dtype: str, record, reference) -> None:
    from .suite import fit

    c = fit(candidate, case).astype(dtype)
    out = check_output(candidate.run(c), shape=c.x.shape, dtype=dtype, what=f"output ({kind}, {dtype})")
    expected = reference(c)
    try:
        assert_close(out, expected, tol=value_tol(kind, dtype), what=f"output ({kind.replace('_', ' ')}, {dtype})",
                     extra={"case": c.describe(), "value_case": kind})
    except CheckFailure:
        record.forward(c, out, False, value_case=kind)
        raise
    record.forward(c, out, True, value_case=kind)


# -- flash_attention: Q, K placed directly ---------------------------------------------------------------------
def flash_value_case(rng, kind: str, dtype: str, *, causal: bool):
    from .flash import FlashCase

    b, h, s_q, d_k = 2, 2, 20, 8
    s_k = 1 if kind == "single_key" else 20
    u = rng.choice([-1.0, 1.0], size=(b, h, 1, d_k))                                 # (b, h, 1, d_k)
    q = rng.standard_normal((b, h, s_q, d_k))
    k = rng.standard_normal((b, h, s_k, d_k))
    v = rng.standard_normal((b, h, s_k, d_k))
    if kind in ("far_below_zero", "huge_positive"):
        alpha = OFFSET[dtype] / np.sqrt(d_k)
        sign = -1.0 if kind == "far_below_zero" else 1.0
        q = sign * alpha * u + 0.5 * q                                               # (b, h, s_q, d_k)
        k = u + k / alpha                                                            # (b, h, s_k, d_k)
    elif kind == "equal_keys":
        k = np.broadcast_to(u, k.shape).copy()
    elif kind == "ties":
        k[:, :, s_k // 2:] = k[:, :, :s_k - s_k // 2]
    return FlashCase(q, k, v, 4, causal)
