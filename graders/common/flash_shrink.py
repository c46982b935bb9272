"""Shrinking a failing flash_attention sweep case on the host, as the MHA sweep does (graders/common/shapes.py):
the candidate is called again on smaller cases cut from the failing one (fewer batches, heads, queries, keys,
features, a smaller block, no causal mask, float64) and the smallest one that still fails the same way — a wrong
output, or an exception (an exception stays an error) — is what the message names."""

from __future__ import annotations

import dataclasses
import time

from harness.core.checks import CheckFailure
from harness.core.errors import CandidateException

from .flash import FlashCase, check_forward

SHRINK_ATTEMPTS = 60
SHRINK_SECONDS = 15.0


def _cut(case: FlashCase, **size) -> FlashCase:
    b, h, s_q, d_k = size.get("b"), size.get("h"), size.get("s_q"), size.get("d_k")
    s_k = size.get("s_k")
    q = case.q[:b, :h, :s_q, :d_k]
    k = case.k[:b, :h, :s_k, :d_k]
    v = case.v[:b, :h, :s_k, :d_k]
    block = size.get("block_size", case.block_size)
    return dataclasses.replace(case, q=q, k=k, v=v, block_size=block, causal=size.get("causal", case.causal))


def _outcome(candidate, case: FlashCase, dtype: str, record) -> str | None:
    """"raised", "wrong" or None (passes)."""
    try:
        check_forward(candidate, case, record, dtype=dtype)
    except CandidateException as exc:
        if exc.phase == "import":
            raise
        return "raised"
    except CheckFailure:
        return "wrong"
    return None


def shrink(candidate, case: FlashCase, dtype: str, record, kind: str) -> tuple[FlashCase, str, int]:
    """The smallest case (and dtype) found that fails with ``kind`` ("raised" | "wrong"), and the calls spent."""
    deadline = time.monotonic() + SHRINK_SECONDS
    calls = 0
    best, best_dtype = case, dtype

    def still_fails(c: FlashCase, dt: str) -> bool:
        nonlocal calls
        if calls >= SHRINK_ATTEMPTS or time.monotonic() > deadline:
            return False
        calls += 1
        return _outcome(candidate, c, dt, record) == kind

    changed = True
    while changed and calls < SHRINK_ATTEMPTS:
        changed = False
        d = best.describe()
        for name in ("b", "h", "s_q", "s_k", "d_k", "block_size"):
            lo, hi = 0, d[name]                               # lo passes (0: not tried), hi fails
            while hi - lo > 1:
                mid = 1 if lo == 0 else (lo + hi) // 2      # the smallest value first, then bisect
                if still_fails(_cut(best, **{name: mid}), best_dtype):
                    hi = mid
                else:
                    lo = mid
            if hi != d[name]:
                best, changed = _cut(best, **{name: hi}), True
        if best.causal and still_fails(_cut(best, causal=False), best_dtype):
            best, changed = _cut(best, causal=False), True
        if best_dtype != "float64" and still_fails(best, "float64"):
            best_dtype, changed = "float64", True
    return best.astype(best_dtype), best_dtype, calls


def describe(case: FlashCase) -> str:
    return ", ".join(f"{k} = {v}" for k, v in case.describe().items())
