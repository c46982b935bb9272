"""Building blocks shared by the hidden suites: case factories, masks and the checks each test makes.

Every helper compares the candidate's plain-array outputs (from the sandbox) with the float64 oracle here, in
the trusted process, and records forward outputs for the named-bug diagnosis.
"""

from __future__ import annotations

import numpy as np

from harness.core.case import Case, random_case
from harness.core.checks import CheckFailure, assert_close, check_output, tolerance_for

from . import oracle
from .gradients import reference_grads

FLOAT_DTYPES = ("float32", "float64")


# -- cases and masks ------------------------------------------------------------------------------------
def make_case(track, rng, *, b=2, s=5, d=8, h=2, g=None, s_k=None, cross=False, bias=None, mask=None,
              scale=1.0) -> Case:
    """A float64 case; biases only on the torch track (unless ``bias`` says otherwise)."""
    return random_case(rng, b=b, s=s, d=d, h=h, g=g, s_k=s_k, cross=cross,
                       bias=(track == "torch") if bias is None else bias, mask=mask, scale=scale)


def causal_mask(s_q: int, s_k: int | None = None) -> np.ndarray:
    """(s_q, s_k) bool, True above the diagonal (future keys may not be attended)."""
    return np.triu(np.ones((s_q, s_k or s_q), dtype=bool), k=1)


def padding_mask(rng, b: int, s_k: int, *, min_keep: int = 1) -> np.ndarray:
    """(b, 1, 1, s_k) key-padding mask: each batch row masks a random-length tail of keys."""
    keep = rng.integers(min_keep, s_k + 1, size=b)
    keep[0] = max(min_keep, s_k - 2)
    return (np.arange(s_k)[None, :] >= keep[:, None])[:, None, None, :]


def side_padding_mask(rng, b: int, s_k: int, side: str) -> np.ndarray:
    """(b, 1, 1, s_k) key padding at the start of each row (``left``) or a stretch inside it (``middle``: the first
    and the last key stay visible; below three keys there is no middle, so it pads on the left). Every row keeps
    its last key visible, and the first batch row always pads."""
    mask = np.zeros((b, s_k), dtype=bool)
    middle = side == "middle" and s_k >= 3
    longest = s_k - 2 if middle else s_k - 1
    for i in range(b):
        if longest < 1:
            break
        n = longest if i == 0 else int(rng.integers(1, longest + 1))
        start = int(rng.integers(1, s_k - n)) if middle else 0
        mask[i, start:start + n] = True
    return mask[:, None, None, :]


def full_row_mask(b: int, h: int, s_q: int, s_k: int, rows=(0,)) -> np.ndarray:
    """(b, h, s_q, s_k) mask with the given query rows fully masked (and a few other scattered entries)."""
    m = np.zeros((b, h, s_q, s_k), dtype=bool)
    m[..., list(rows), :] = True
    m[..., -1, 0] = True
    return m


# -- the reference --------------------------------------------------------------------------------------
def reference(case: Case) -> np.ndarray:
    c = case.astype(np.float64)
    return oracle.forward(c.x, c.wq, c.wk, c.wv, c.wo, c.h, y=c.y, g=c.g, mask=c.mask,
                          bq=c.bq, bk=c.bk, bv=c.bv, bo=c.bo)


def out_shape(case: Case) -> tuple:
    return case.x.shape


# -- checks ---------------------------------------------------------------------------------------------
def check_forward(candidate, case: Case, record, *, dtype="float64", layout="C", mode="eval",
                  expected: np.ndarray | None = None, what="output") -> np.ndarray:
    """Run the candidate on ``case`` cast to ``dtype`` and compare with the float64 reference."""
    c = fit(candidate, case).astype(dtype)
    result = candidate.run(c, layout=layout, mode=mode)
    out = check_output(result, shape=out_shape(c), dtype=dtype, what=what)
    ref = reference(c) if expected is None else expected
    try:
        assert_close(out, ref, tol=tolerance_for(dtype), what=what, extra={"case": c.describe()})
    except CheckFailure:
        record.forward(c, out, False)
        raise
    record.forward(c, out, True)
    return out


def fit(candidate, case: Case) -> Case:
    """The case as the candidate's module can compute it (a bias it does not have held at zero: the reference gets
    the same deviation, which the structure tests charge; harness/session/layouts.py)."""
    return candidate.fit(case) if hasattr(candidate, "fit") else case


def check_shape(candidate, case: Case, record, dtype="float64") -> None:
    c = fit(candidate, case).astype(dtype)
    out = check_output(candidate.run(c), shape=out_shape(c), dtype=dtype)
    record.forward(c, out, lambda: bool(np.allclose(out, reference(c), atol=1e-4, rtol=1e-4)))   # asked if failing


def check_dtype(candidate, case: Case, record, dtype: str) -> None:
    c = case.astype(dtype)
    result = candidate.run(c)
    try:
        check_output(result, shape=out_shape(c), dtype=dtype)
    except CheckFailure as exc:
        if "returned_dtype" in exc.diagnostics:
            record.signature("dtype", expected=dtype, got=exc.diagnostics["returned_dtype"])
        raise


def check_not_mutated(candidate, case: Case, record) -> None:
    """No argument (input, context, weight, mask) may be modified in place."""
    check_unmutated(candidate.run(case, return_inputs=True), case.arrays(), record)


def check_unmutated(result, sent: dict, record) -> None:
    """The arguments after a ``return_inputs`` call (read back by the host where it can) equal those sent."""
    changed = []
    for name, after in result.inputs_after.items():
        before = sent.get(name)
        if before is None:
            continue
        if before.shape != after.shape or not np.array_equal(before, after, equal_nan=True):
            changed.append(name)
    if not result.inputs_after:
        raise CheckFailure("the worker did not return the arguments for the mutation check")
    reported = sorted(set(result.inputs_after) - set(result.read_back))
    if changed:
        record.signature("mutation", changed=changed)
        raise CheckFailure(f"your code modified its arguments in place: {', '.join(sorted(changed))}",
                           {"mutated": sorted(changed), "read_back_by_host": list(result.read_back),
                            "reported_by_worker": reported})
    record.note(read_back_by_host=list(result.read_back), reported_by_worker=reported)


def check_deterministic(candidate, case: Case) -> None:
    first = check_output(candidate.run(case), shape=out_shape(case), dtype=case.x.dtype)
    second = check_output(candidate.run(case), shape=out_shape(case), dtype=case.x.dtype)
    if not np.array_equal(first, second, equal_nan=True):
        diag = {"max_abs_difference": float(np.nanmax(np.abs(first - second)))}
        raise CheckFailure("two calls with identical inputs gave different outputs", diag)


def check_permutation(candidate, case: Case, rng) -> None:
    """Permuting the tokens of an unmasked self-attention input permutes the output the same way."""
    perm = rng.permutation(case.x.shape[1])
    base = check_output(candidate.run(case), shape=out_shape(case), dtype=case.x.dtype)
    permuted = check_output(candidate.run(case.replace(x=case.x[:, perm])), shape=out_shape(case),
                            dtype=case.x.dtype)
    assert_close(permuted, base[:, perm], tol=1e-9, what="output for permuted tokens",
                 extra={"permutation": perm.tolist()})


def check_invariant(candidate, case: Case, changed: Case, *, rows=None, what: str) -> None:
    """Metamorphic probe: ``changed`` differs from ``case`` only where the output must not notice."""
    a = check_output(candidate.run(case), shape=out_shape(case), dtype=case.x.dtype)
    b = check_output(candidate.run(changed), shape=out_shape(changed), dtype=changed.x.dtype)
    sel = (slice(None), slice(None) if rows is None else rows)
    assert_close(b[sel], a[sel], tol=1e-9, what=what)


def check_gradients(candidate, case: Case, rng, record, *, dtype="float64") -> None:
    """Input and parameter gradients against the analytic float64 reference."""
    c = fit(candidate, case).astype(dtype)
    grad_out = rng.standard_normal(out_shape(c)).astype(dtype)
    result = candidate.run(c, grad_output=grad_out)
    check_output(result, shape=out_shape(c), dtype=dtype)
    compare_grads(result, reference_grads(c, grad_out), dtype)


def compare_grads(result, expected: dict, dtype) -> None:
    """The gradients the worker sent back against the reference's: every one present, shaped and close."""
    tol = 1e-8 if dtype == "float64" else 1e-4
    expected = {k: v for k, v in expected.items() if k not in getattr(result, "absent", ())}  # held at zero
    missing = sorted(set(expected) - set(result.grads))
    if missing:
        raise CheckFailure(f"no gradient reached: {', '.join(missing)} (is the graph detached?)",
                           {"missing_gradients": missing})
    for name in sorted(expected):
        got = result.grads[name]
        if got.shape != expected[name].shape:
            raise CheckFailure(f"gradient of {name} has shape {list(got.shape)}, expected {list(expected[name].shape)}")
        assert_close(got, expected[name], tol=tol, what=f"gradient of {name}")


def check_structure(candidate, case: Case, record=None) -> dict:
    """The module's parameters load into a known layout with exactly the expected count. A recognisable layout
    that deviates from the contract (other names, a missing bias) fails here, naming each deviation; the other
    tests grade the module as it is (see harness/session/layouts.py)."""
    layout = candidate.build(d=case.d, h=case.h, g=case.g, bias=case.has_bias)
    found = {"layout": layout.kind, "parameter_count": layout.count,
             "checked_by": getattr(candidate, "layout_check", None)}
    if layout.deviations:
        for bug, detail in layout.deviations.items():
            if record is not None:
                record.signature("structure", bug=bug, detail=_detail(candidate, bug, detail))
        raise CheckFailure("the parameter layout differs from the contract: " + "; ".join(layout.deviations.values())
                           + ". The other tests grade the module as it is",
                           {**found, "deviations": sorted(layout.deviations)})
    return found


def _detail(candidate, bug: str, detail: str) -> str:
    """What the diagnosis adds to a structure bug's summary: the constructor's own words for a refused bias."""
    return getattr(candidate, "bias_refused", None) or detail if bug == "constructor_without_bias" else detail


def check_bias_kwarg(candidate, case: Case, record) -> None:
    """The tests about bias=False: the constructor must accept it (else they fail, and only they)."""
    try:
        candidate.require_bias_kwarg(d=case.d, h=case.h, g=case.g)
    except AssertionError as exc:
        if getattr(exc, "diagnostics", {}).get("deviation") == "constructor_without_bias":
            record.signature("structure", bug="constructor_without_bias",
                             detail=_detail(candidate, "constructor_without_bias", str(exc)))
        raise


def expected_param_count(d: int, h: int, g: int | None, bias: bool) -> int:
    d_kv = (g or h) * (d // h)
    return 2 * d * d + 2 * d * d_kv + ((2 * d + 2 * d_kv) if bias else 0)


def check_param_count(candidate, case: Case, record=None) -> None:
    params = candidate.parameters(d=case.d, h=case.h, g=case.g, bias=case.has_bias)
    count = int(sum(int(np.prod(p["shape"])) for p in params))
    want = expected_param_count(case.d, case.h, case.g, case.has_bias)
    if count != want:
        why = ""
        try:
            deviations = candidate.build(d=case.d, h=case.h, g=case.g, bias=case.has_bias).deviations
            deviations = {k: v for k, v in deviations.items() if k != "layout_renamed"}
            why = "".join(f"; {v}" for v in deviations.values())
            for bug, detail in deviations.items():
                if record is not None:
                    record.signature("structure", bug=bug, detail=_detail(candidate, bug, detail))
        except AssertionError:
            pass
        raise CheckFailure(f"the module has {count} parameters, expected exactly {want} "
                           f"(d={case.d}, bias={case.has_bias}){why}",
                           {"parameter_count": count, "expected": want, "parameters": [p["name"] for p in params]})


def measure_flops(candidate, case: Case, expected: int) -> dict:
    result = candidate.run(case, flops=True)
    check_output(result, shape=out_shape(case), dtype=case.x.dtype)
    return {"measured_flops": result.flops, "expected_flops": expected,
            "ratio": (result.flops / expected) if result.flops else None}
