"""Building blocks of the kv_cache suite: one decoding call's reference, the (out, (K, V)) output check, chained
chunks, and the analytic gradients of one call with the prefix cache held constant (host-side only).

A kv_cache case is an ordinary :class:`Case` whose ``x`` holds the new tokens and whose ``cache`` holds the (K, V)
prefix (None for prefill). Every call the suite makes is recorded with its cache input, so the diagnosis can replay
a mutant on exactly what the candidate received.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from harness.core.case import Case, random_case
from harness.core.checks import CheckFailure, assert_close, check_output, tolerance_for

from . import oracle
from . import gradients
from .suite import compare_grads, fit

PAIR = "a pair (out, (K, V))"
# long decoding: prefill 250; one-token steps across 256; a chunk to 504; steps across 512; a chunk to 1016; steps
# across 1024; a chunk to 1088; steps to 1104 (past any power-of-two buffer a candidate might hard-code)
LONG_SCHEDULE = (250, *[1] * 12, 242, *[1] * 12, 500, *[1] * 12, 60, *[1] * 16)


def make_case(track, rng, *, b=2, s=6, d=16, h=4, g=2, bias=None, scale=1.0) -> Case:
    """A float64 full-sequence case (biases on the torch track unless ``bias`` says otherwise)."""
    return random_case(rng, b=b, s=s, d=d, h=h, g=g, bias=(track == "torch") if bias is None else bias, scale=scale)


def step(case: Case) -> tuple[np.ndarray, tuple]:
    """The float64 reference of one call: (out, (K, V))."""
    c = case.astype(np.float64)
    return oracle.kv_step(c.x, c.wq, c.wk, c.wv, c.wo, c.h, c.g, c.cache, bq=c.bq, bk=c.bk, bv=c.bv, bo=c.bo)


def full_reference(case: Case) -> tuple[np.ndarray, tuple]:
    """Causal GQA over the whole sequence (the ordinary oracle) and the K, V of every token."""
    c = case.astype(np.float64)
    s = c.x.shape[1]
    out = oracle.forward(c.x, c.wq, c.wk, c.wv, c.wo, c.h, g=c.g, mask=np.triu(np.ones((s, s), bool), k=1),
                         bq=c.bq, bk=c.bk, bv=c.bv, bo=c.bo)
    return out, step(c.replace(cache=None))[1]


def kept_full_reference(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`full_reference` as (out, K, V), computed once per case and kept (harness/core/answers.py): it depends
    only on the case (after fitting to the candidate's module), never on the candidate's outputs."""
    from harness.core import answers

    def compute():
        out, (k, v) = full_reference(case)
        return out, k, v

    if not answers.keeping():   # the service's fresh seed: no answer of this grade is asked for again
        return compute()
    if _ORACLE_VERSION[0] is None:
        _ORACLE_VERSION[0] = answers.code_version(oracle.__file__, __file__)
    key = answers.digest(_ORACLE_VERSION[0], case.arrays(), ("kv-full", case.h, case.g))
    return answers.remembered_parts(key, 3, compute)


_ORACLE_VERSION: list = [None]


def cache_shape(case: Case, *, heads=None) -> tuple:
    b, s, d = case.x.shape
    prefix = 0 if case.cache is None else case.cache[0].shape[2]
    return (b, heads or case.g, prefix + s, d // case.h)


def flatten(out, cache) -> np.ndarray:
    """What a kv observation records: the output and (when it came back as arrays) the cache, flattened."""
    parts = [out] + ([] if cache is None else list(cache))
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def leaves(result) -> tuple:
    """(out, K, V) as the worker sent them, or a CheckFailure naming what came back instead of the pair."""
    tree = result.tree
    if not (isinstance(tree, list) and len(tree) == 2 and type(tree[0]) is int and isinstance(tree[1], list)
            and len(tree[1]) == 2 and all(type(i) is int for i in tree[1])):
        got = (result.info or {}).get("type", "nothing")
        shape = "" if tree is None else f" with structure {_render(tree)}"
        raise CheckFailure(f"your code returned {got}{shape}; expected {PAIR}: the output and the new cache",
                           {"returned_type": got, "returned_structure": _render(tree)})
    idx = [tree[0], *tree[1]]
    return tuple(SimpleNamespace(info=result.leaves[i][0], out=result.leaves[i][1]) for i in idx)


def _render(tree) -> str:
    if tree is None:
        return "none"
    if isinstance(tree, list):
        return "(" + ", ".join(_render(t) for t in tree) + ")"
    return "value"


def run_step(candidate, case: Case, record, *, check_values=True, what="") -> tuple:
    """Run one call; check structure, shapes and dtypes of (out, (K, V)), record it, compare with the reference.
    Returns (out, (K, V)) as the candidate produced them (the next call's cache when chaining)."""
    case = fit(candidate, case)
    dtype = str(case.x.dtype)
    result = candidate.run(case)
    out_leaf, k_leaf, v_leaf = leaves(result)
    out = check_output(out_leaf, shape=case.x.shape, dtype=dtype, what=f"output{what}")
    cache = None
    if all(isinstance(leaf.out, np.ndarray) for leaf in (k_leaf, v_leaf)) and k_leaf.info.get("exact_type"):
        cache = (k_leaf.out, v_leaf.out)
    tol = tolerance_for(dtype)

    def right(ref=None) -> bool:
        """This call against a step of the oracle on the cache the candidate was given (the diagnosis's view)."""
        ref_out, (ref_k, ref_v) = ref or step(case)
        return cache is not None and cache[0].shape == ref_k.shape and cache[1].shape == ref_v.shape and all(
            np.allclose(a, e, atol=tol, rtol=tol) for a, e in ((out, ref_out), (cache[0], ref_k), (cache[1], ref_v)))

    # checked against the whole sequence's reference (check_chunks, the value-space test), this call's own step is
    # computed only if the diagnosis or the plots ask (a failing grade): a passing grade computes 68 steps, not 209
    ref = step(case) if check_values else None
    record.forward(case, flatten(out, cache), right(ref) if check_values else right, kv=True,
                   parts="out+cache" if cache is not None else "out")
    want = cache_shape(case)
    if cache is not None and cache[0].shape == (want[0], case.h, *want[2:]) and case.h != case.g:
        raise CheckFailure(f"the cache holds {case.h} heads (K, V of shape {list(cache[0].shape)}), expected the "
                           f"{case.g} key/value groups {list(want)}: store K and V before repeating them for the "
                           f"query heads (the cache is h/g = {case.h // case.g}× too large)",
                           {"returned_shape": list(cache[0].shape), "expected_shape": list(want)})
    k = check_output(k_leaf, shape=want, dtype=dtype, what=f"cached K{what}")
    v = check_output(v_leaf, shape=want, dtype=dtype, what=f"cached V{what}")
    if check_values:
        extra = {"case": case.describe()}
        ref_out, (ref_k, ref_v) = ref
        assert_close(out, ref_out, tol=tol, what=f"output{what}", extra=extra)
        assert_close(k, ref_k, tol=tol, what=f"cached K{what}", extra=extra)
        assert_close(v, ref_v, tol=tol, what=f"cached V{what}", extra=extra)
    return out, (k, v)


def check_chunks(candidate, case: Case, sizes, record, *, dtype="float64") -> None:
    """Feed the sequence in chunks of ``sizes`` (the first call a prefill), each call getting the cache the
    previous one returned; the outputs, concatenated, must be causal GQA over the whole sequence and the final
    cache the K, V of every token."""
    c = fit(candidate, case).astype(dtype)
    assert sum(sizes) == c.x.shape[1]
    full_out, full_k, full_v = kept_full_reference(c)
    tol = tolerance_for(dtype)
    cache, start = None, 0
    for i, n in enumerate(sizes):
        part = c.replace(x=c.x[:, start:start + n], cache=cache)
        where = f" of call {i + 1} (tokens {start}..{start + n - 1}, prefix {start}; chunks {list(sizes)})"
        out, cache = run_step(candidate, part, record, check_values=False, what=where)
        assert_close(out, full_out[:, start:start + n], tol=tol, what=f"output{where}",
                     extra={"chunks": list(sizes), "call": i + 1})
        start += n
    assert_close(cache[0], full_k, tol=tol, what="final cached K", extra={"chunks": list(sizes)})
    assert_close(cache[1], full_v, tol=tol, what="final cached V", extra={"chunks": list(sizes)})


def with_prefix(case: Case, t0: int, dtype="float64") -> Case:
    """The case's last tokens as new input, with the reference cache of its first ``t0`` tokens."""
    c = case.astype(dtype)
    if t0 == 0:
        return c.replace(cache=None)
    _, prefix = step(c.replace(x=c.x[:, :t0], cache=None))
    return c.replace(x=c.x[:, t0:], cache=tuple(p.astype(dtype) for p in prefix))


def reference_grads(case: Case, grad_out: np.ndarray) -> dict[str, np.ndarray]:
    """d(sum(out * grad_out)) of one call with respect to x (the new tokens), every weight and every bias; the
    prefix cache is an input, not a function of the parameters. New token i sees keys 0 .. t0 + i."""
    t0 = 0 if case.cache is None else case.cache[0].shape[2]
    s = case.x.shape[1]
    causal = np.arange(t0 + s)[None, :] > t0 + np.arange(s)[:, None]   # (s, t0 + s) True = hidden
    return gradients.reference_grads(case.replace(mask=causal), grad_out)


def check_gradients(candidate, case: Case, rng, record, *, dtype="float64") -> None:
    """Gradients of one call (x and every parameter; the cache is constant) against the analytic reference."""
    c = fit(candidate, case).astype(dtype)
    grad_out = rng.standard_normal(c.x.shape).astype(dtype)
    result = candidate.run(c, grad_output=grad_out)
    out_leaf, _, _ = leaves(result)
    check_output(out_leaf, shape=c.x.shape, dtype=dtype)
    compare_grads(result, reference_grads(c, grad_out), dtype)
