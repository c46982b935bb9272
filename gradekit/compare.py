"""Numeric comparison with diagnostics a candidate can act on (max error, first bad index), shared by the
grader's checks (harness/core/checks.py) and `grade check`, so both word a mismatch the same way."""

from __future__ import annotations

import numpy as np


def compare(actual: np.ndarray, expected: np.ndarray, tol: float) -> dict:
    """Numeric diagnostics: max abs/rel error, mismatch fraction, first bad index, NaN/Inf counts."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(a - e)
        bad = ~(diff <= tol + tol * np.abs(e))        # NaN counts as bad
        rel = diff / np.maximum(np.abs(e), 1e-12)
    finite = np.isfinite(diff)
    everywhere = bool(finite.all())                   # the usual case: no boolean-indexed copies, no NaN/Inf scan
    some = diff.size > 0 if everywhere else bool(finite.any())   # a finite entry to take the maxima over
    n_bad = int(np.count_nonzero(bad))
    first = np.unravel_index(int(np.argmax(bad)), bad.shape) if n_bad else None   # argmax: the first True, C order
    return {
        "max_abs_error": (float(diff.max()) if everywhere else float(diff[finite].max())) if some else None,
        "max_rel_error": (float(rel.max()) if everywhere else float(rel[finite].max())) if some else None,
        "mismatch_fraction": n_bad / bad.size if bad.size else 0.0,
        "first_bad_index": [int(i) for i in first] if first is not None else None,
        # a finite difference everywhere means a finite output everywhere
        "nan_count": 0 if everywhere else int(np.isnan(a).sum()),
        "inf_count": 0 if everywhere else int(np.isinf(a).sum()),
        "tolerance": tol,
        "ok": n_bad == 0,
    }


def mismatch_message(diag: dict, actual, expected, *, what: str = "output") -> str:
    """``output differs from the reference: max abs error 0.0123, 40.0% of entries outside atol=rtol=1e-10;
    first mismatch at index (0, 1, 2): got 0.5, expected 0.25`` (NaN/Inf counted first when there are any)."""
    if diag["nan_count"] or diag["inf_count"]:
        lead = f"{what} contains {diag['nan_count']} NaN and {diag['inf_count']} Inf values"
    else:
        lead = f"{what} differs from the reference"
    where = diag["first_bad_index"]
    at = ""
    if where is not None:
        got, want = distinct(float(actual[tuple(where)]), float(expected[tuple(where)]))
        at = f"; first mismatch at index {tuple(where)}: got {got}, expected {want}"
    return (f"{lead}: max abs error {fmt(diag['max_abs_error'])}, "
            f"{100 * diag['mismatch_fraction']:.1f}% of entries outside atol=rtol={diag['tolerance']:g}{at}")


def distinct(got: float, want: float) -> tuple[str, str]:
    """The two numbers with as many significant digits as it takes to tell them apart (6 to 17)."""
    for digits in (6, 9, 12, 17):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            break
    return a, b


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"
