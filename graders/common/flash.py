"""The flash_attention exercise's cases and checks: Q, K, V with heads already split, a block size and a causal
flag; compared with standard attention (the float64 oracle in flash_oracle.py), and the memory measured in the
worker held against a bound proportional to s·(d_k + block_size)."""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.core.checks import CheckFailure, assert_close, check_output, tolerance_for

from . import flash_oracle

MEMORY_FACTOR = 8   # the peak extra memory may be MEMORY_FACTOR · b·h·s·(d_k + block_size) elements of the dtype


@dataclasses.dataclass
class FlashCase:
    q: np.ndarray                      # (b, h, s_q, d_k)
    k: np.ndarray                      # (b, h, s_k, d_k)
    v: np.ndarray                      # (b, h, s_k, d_k)
    block_size: int | None = 64        # None: not passed (the function's default, 64)
    causal: bool = False

    @property
    def dtype(self):
        return self.q.dtype

    @property
    def block(self) -> int:
        return 64 if self.block_size is None else self.block_size

    @property
    def out_shape(self) -> tuple:
        return self.q.shape

    def astype(self, dtype) -> "FlashCase":
        return dataclasses.replace(self, q=self.q.astype(dtype), k=self.k.astype(dtype), v=self.v.astype(dtype))

    def arrays(self) -> dict:
        return {"Q": self.q, "K": self.k, "V": self.v}

    def values(self) -> dict:
        return {"block_size": self.block_size, "causal": self.causal}

    def describe(self) -> dict:
        b, h, s_q, d_k = self.q.shape
        return {"b": b, "h": h, "s_q": s_q, "s_k": self.k.shape[2], "d_k": d_k, "block_size": self.block,
                "causal": self.causal, "dtype": str(self.q.dtype)}


def make_case(rng, *, b=2, h=2, s=10, s_k=None, d_k=8, block_size=4, causal=False, scale=1.0) -> FlashCase:
    """A seeded float64 case; entries ~ N(0, 1) so scores q·k / sqrt(d_k) are O(1), times ``scale``²."""
    s_k = s if s_k is None else s_k
    q = rng.standard_normal((b, h, s, d_k)) * scale
    k = rng.standard_normal((b, h, s_k, d_k)) * scale
    v = rng.standard_normal((b, h, s_k, d_k))
    return FlashCase(q, k, v, block_size, causal)


def reference(case: FlashCase) -> np.ndarray:
    return flash_oracle.attention(case.q, case.k, case.v, causal=case.causal)


def run(candidate, case: FlashCase, **kw):
    return candidate.call(case.arrays(), case.values(), **kw)


def check_forward(candidate, case: FlashCase, record, *, dtype="float64", layout="C", what="output",
                  tol: float | None = None) -> np.ndarray:
    """The candidate on ``case`` cast to ``dtype``, against standard attention in float64."""
    c = case.astype(dtype)
    out = check_output(run(candidate, c, layout=layout), shape=c.out_shape, dtype=dtype, what=what)
    try:
        assert_close(out, reference(c), tol=tolerance_for(dtype) if tol is None else tol, what=what,
                     extra={"case": c.describe()})
    except CheckFailure:
        record.forward(c, out, False)
        raise
    record.forward(c, out, True)
    return out


def check_gradients(candidate, case: FlashCase, rng, record, *, dtype="float64") -> None:
    """Gradients wrt Q, K and V (torch track) against the analytic float64 gradients of standard attention."""
    c = case.astype(dtype)
    grad_out = rng.standard_normal(c.out_shape).astype(dtype)
    result = run(candidate, c, grad_output=grad_out)
    out = check_output(result, shape=c.out_shape, dtype=dtype)
    record.forward(c, out, bool(np.allclose(out, reference(c), atol=1e-4, rtol=1e-4)))
    expected = flash_oracle.attention_grads(c.q, c.k, c.v, grad_out, causal=c.causal)
    missing = sorted(set(expected) - set(result.grads))
    if missing:
        raise CheckFailure(f"no gradient reached: {', '.join(missing)} (is the graph detached, e.g. by .numpy(), "
                           f"torch.no_grad or in-place writes into a leaf?)", {"missing_gradients": missing})
    tol = 1e-8 if dtype == "float64" else 1e-4
    for name in ("Q", "K", "V"):
        got = result.grads[name]
        if got.shape != expected[name].shape:
            raise CheckFailure(f"gradient of {name} has shape {list(got.shape)}, expected {list(expected[name].shape)}")
        assert_close(got, expected[name], tol=tol, what=f"gradient of {name}", extra={"case": c.describe()})


def memory_bound(case: FlashCase) -> int:
    """Bytes the call may allocate at its peak: MEMORY_FACTOR · b·h·s_q·(d_k + block_size) · itemsize — the
    output, running statistics and a few (s_q, block) tiles; independent of s_k."""
    b, h, s_q, d_k = case.q.shape
    return MEMORY_FACTOR * b * h * s_q * (d_k + min(case.block, case.k.shape[2])) * case.q.dtype.itemsize


def check_memory(candidate, case: FlashCase, record) -> dict:
    """Peak extra memory of one call, measured in the worker, within :func:`memory_bound` — far below one
    (s_q, s_k) score matrix of the input dtype. The output is also checked (a call that skips the work fails)."""
    result = run(candidate, case, memory=True)
    out = check_output(result, shape=case.out_shape, dtype=case.dtype)
    b, h, s_q, _ = case.q.shape
    matrix = b * h * s_q * case.k.shape[2] * case.q.dtype.itemsize
    figures = {"bound_bytes": memory_bound(case), "score_matrix_bytes": matrix, "case": case.describe()}
    mem = result.memory or {}
    if "peak_bytes" not in mem:
        raise CheckFailure("the worker did not report the call's memory", figures)
    figures.update(peak_bytes=mem["peak_bytes"], method=mem.get("method", ""),
                   peak_over_bound=round(mem["peak_bytes"] / figures["bound_bytes"], 3),
                   peak_over_score_matrix=round(mem["peak_bytes"] / matrix, 4))
    record.note(**figures)
    if not mem.get("intact"):
        raise CheckFailure("the memory measurement was switched off during your call (tracemalloc stopped or the "
                           "dispatch mode popped); it cannot be assessed", figures)
    mib = lambda n: f"{n / 2 ** 20:.1f} MiB"  # noqa: E731
    text = (f"peak extra memory {mib(mem['peak_bytes'])} (bound {mib(figures['bound_bytes'])} = "
            f"{MEMORY_FACTOR}·b·h·s·(d_k + block_size)·itemsize; one (s, s) score matrix is {mib(matrix)})")
    head = flash_oracle.attention(case.q[..., :64, :], case.k, case.v, causal=case.causal)  # the first 64 queries
    ok = bool(np.isfinite(out).all()) and _close(out[..., :64, :], head)
    if mem["peak_bytes"] > figures["bound_bytes"]:
        record.signature("memory", **figures)
        raise CheckFailure(f"{text}: something of size s × s was materialised (scores, weights or a mask)", figures)
    if not ok:
        raise CheckFailure(f"{text}, but the output does not match standard attention", figures)
    figures["message"] = text
    return figures


def _close(out: np.ndarray, expected: np.ndarray) -> bool:
    """Within 1e-8, or (under the charge-once rule, harness/core/checks.py) off only by a dtype or precision that
    other tests charge."""
    try:
        assert_close(out, expected, tol=1e-8)
    except CheckFailure:
        return False
    return True
