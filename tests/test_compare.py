"""gradekit.compare: the diagnostics every numeric check words its mismatch with. Its fast path (a finite
difference everywhere: no boolean-indexed copies, no NaN/Inf scan, the first bad index from argmax) must say
exactly what the plain computation below says, NaN, Inf, empty and 0-d arrays included."""

from __future__ import annotations

import numpy as np
import pytest

from gradekit.compare import compare


def plain(actual, expected, tol: float) -> dict:
    """Every statistic computed the straightforward way, over the finite entries."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(a - e)
        bad = ~(diff <= tol + tol * np.abs(e))
        rel = diff / np.maximum(np.abs(e), 1e-12)
    finite = np.isfinite(diff)
    first = np.argwhere(bad)
    return {
        "max_abs_error": float(diff[finite].max()) if finite.any() else None,
        "max_rel_error": float(rel[finite].max()) if finite.any() else None,
        "mismatch_fraction": float(bad.mean()) if bad.size else 0.0,
        "first_bad_index": [int(i) for i in first[0]] if len(first) else None,
        "nan_count": int(np.isnan(a).sum()),
        "inf_count": int(np.isinf(a).sum()),
        "tolerance": tol,
        "ok": not bad.any(),
    }


def cases():
    rng = np.random.default_rng(7)
    for shape in [(2, 5, 8), (3, 1, 4), (0, 3), (1,), (), (4, 7), (2, 64, 64)]:
        a = rng.standard_normal(shape)
        e = a + rng.standard_normal(shape) * 1e-9
        yield f"{shape}-close", a, e
        if not a.size:
            continue
        edits = {
            "nan-out": lambda a, e: (_set(a, -1, np.nan), e),
            "inf-out": lambda a, e: (_set(a, 0, np.inf), e),
            "inf-ref": lambda a, e: (a, _set(e, 0, np.inf)),
            "nan-ref": lambda a, e: (a, _set(e, 0, np.nan)),
            "inf-both": lambda a, e: (_set(a, 0, np.inf), _set(e, 0, np.inf)),
            "all-nan": lambda a, e: (np.full(a.shape, np.nan), e),
            "off": lambda a, e: (a + 1e-3, e),
            "float32": lambda a, e: (a.astype(np.float32), e.astype(np.float32)),
            "one-wrong": lambda a, e: (_set(a, a.size // 2, a.flat[a.size // 2] + 1), e),
            "last-wrong": lambda a, e: (_set(a, -1, a.flat[-1] - 1), e),
            "overflow": lambda a, e: (_set(a, a.size // 2, 1e308), _set(e, a.size // 2, -1e308)),
        }
        for name, edit in edits.items():
            yield f"{shape}-{name}", *edit(a, e)


def _set(x, i, value):
    x = np.array(x, dtype=np.float64, copy=True)
    x.flat[i] = value
    return x


@pytest.mark.parametrize("tol", [1e-10, 1e-5])
def test_compare_says_what_the_plain_computation_says(tol):
    seen = 0
    for name, a, e in cases():
        assert compare(a, e, tol) == plain(a, e, tol), name
        seen += 1
    assert seen == 7 + 6 * 11


def test_the_first_bad_index_is_the_first_in_row_major_order():
    e = np.zeros((3, 4, 5))
    a = e.copy()
    a[2, 0, 1] = a[1, 3, 4] = a[1, 3, 0] = 1.0
    diag = compare(a, e, 1e-10)
    assert diag["first_bad_index"] == [1, 3, 0] and diag["mismatch_fraction"] == 3 / 60 and not diag["ok"]
