"""Named-bug diagnosis: which catalogued mistake explains the candidate's failures (host-side only).

A numeric bug explains a submission when, on every recorded forward output of the candidate, the oracle with
that bug reproduces the candidate's output within tolerance — failing cases *and* passing ones (a bug that
would have broken a case the candidate got right is not the explanation). If no single bug explains
everything, pairs are tried, so a candidate with two mistakes gets both named. Nothing fits -> no diagnosis.
Signature bugs (dtype, in-place mutation) come from the tests that caught them.
"""

from __future__ import annotations

import collections
import itertools
import threading

import numpy as np

from harness.core.checks import TOLERANCE
from harness.core.report import Diagnosis

from ..common import flash, flash_oracle, oracle
from .catalog import applicable

MATCH_TOL = {"float32": 2e-4, "float64": 1e-7}


def _flash_mutant_output(obs, bugs):
    c = obs.case.astype(np.float64)
    try:
        with np.errstate(all="ignore"):
            return flash_oracle.flash_forward(c.q, c.k, c.v, c.block, c.causal,
                                              bugs=bugs - {"dtype_promoted", "input_mutated"})
    except (ValueError, IndexError):
        return None


def _mutant_output(obs, bugs):
    c = obs.case.astype(np.float64)
    mask = None if c.mask is None else np.array(c.mask)
    try:
        with np.errstate(all="ignore"):
            return oracle.forward(c.x, c.wq, c.wk, c.wv, c.wo, c.h, y=c.y, g=c.g, mask=mask, bq=c.bq, bk=c.bk,
                                  bv=c.bv, bo=c.bo, bugs=bugs - {"dtype_promoted", "input_mutated"})
    except (ValueError, IndexError):  # the mutant cannot even run on this case (e.g. a broadcast error)
        return None


def _kv_mutant_output(obs, bugs):
    """kv_cache: the mutant's call on exactly the new tokens and cache the candidate got, flattened as recorded."""
    from ..common.kv import flatten

    c = obs.case.astype(np.float64)
    cache = None if c.cache is None else tuple(np.array(a) for a in c.cache)
    try:
        with np.errstate(all="ignore"):
            out, new = oracle.kv_step(c.x, c.wq, c.wk, c.wv, c.wo, c.h, c.g, cache, bq=c.bq, bk=c.bk, bv=c.bv,
                                      bo=c.bo, bugs=bugs - {"dtype_promoted", "input_mutated"})
    except (ValueError, IndexError):
        return None
    return flatten(out, new if obs.info.get("parts") == "out+cache" else None)


def _oracle_for(obs):
    """The one place that tells which oracle an observation is explained by, and the dtype it was run in:
    ``(mutant_output(obs, bugs), dtype)``. flash_attention's cases, a kv_cache call, or a forward of the rest."""
    if isinstance(obs.case, flash.FlashCase):
        return _flash_mutant_output, obs.case.dtype
    return (_kv_mutant_output if obs.info.get("kv") else _mutant_output), obs.case.x.dtype


def _matches(out, expected, dtype, loose=False, tol=None) -> tuple[bool, float]:
    if expected is None or out.shape != expected.shape:
        return False, float("inf")
    if tol is None:
        tol = MATCH_TOL["float32"] if loose else MATCH_TOL.get(str(dtype), 2e-4)
    a, e = np.asarray(out, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(a - e)
        if np.isfinite(diff).all():   # both finite everywhere (the usual case): np.isclose's own test, in one pass
            return bool((diff <= tol + tol * np.abs(e)).all()), float(diff.max()) if diff.size else 0.0
    return _matches_anywhere(a, e, tol)


def _matches_anywhere(a, e, tol) -> tuple[bool, float]:
    """:func:`_matches` for float64 arrays of one shape holding NaN or inf anywhere (or too far apart to subtract):
    NaN where the other has NaN, inf where the other has the same inf, the deviation over the finite entries."""
    if not np.array_equal(np.isnan(a), np.isnan(e)):
        return False, float("inf")
    with np.errstate(all="ignore"):
        ok = np.isclose(a, e, atol=tol, rtol=tol, equal_nan=True).all()
        finite = np.isfinite(a) & np.isfinite(e)
        dev = float(np.abs(a - e)[finite].max()) if finite.any() else 0.0
    return bool(ok), dev


MEMO_BYTES = 64 << 20  # the mutants' outputs kept in this process (a grading process's later grades reuse them)
_memo: collections.OrderedDict = collections.OrderedDict()
_memo_size = [0]
_memo_lock = threading.Lock()


def _mutant_answer(obs, bugs: frozenset):
    """The mutant's output for ``obs``'s case, computed once per process: it depends only on the case (what the
    candidate was given), the bugs and the oracle, never on the candidate's output (read-only; None: the mutant
    cannot run on the case)."""
    mutant_output, _ = _oracle_for(obs)
    case = obs.case
    # the case's arrays are hashed once per observation (Observation.case_digest), not once per mutant tried
    key = (obs.case_digest, mutant_output.__name__, tuple(sorted(bugs)), obs.info.get("parts"),
           getattr(case, "h", None), getattr(case, "g", None), getattr(case, "block", None),
           getattr(case, "causal", None))
    with _memo_lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
    out = mutant_output(obs, bugs)
    if out is not None:
        out.setflags(write=False)
    with _memo_lock:
        _memo[key] = out
        _memo_size[0] += 0 if out is None else out.nbytes
        while _memo_size[0] > MEMO_BYTES and _memo:
            _, old = _memo.popitem(last=False)
            _memo_size[0] -= 0 if old is None else old.nbytes
    return out


def _matches_mutant(obs, bugs: frozenset, loose=False, tol=None) -> tuple[bool, float]:
    """Whether ``obs``'s output is what the mutant with ``bugs`` computes (and by how much it deviates)."""
    _, dtype = _oracle_for(obs)
    return _matches(obs.out, _mutant_answer(obs, bugs), dtype, loose, tol)


def _explains(bugs: frozenset, observations, failed_tests: set, loose=False) -> dict | None:
    """``loose``: a precision_lowered submission's outputs are matched at float32's tolerance."""
    worst, tests, wrong = 0.0, set(), 0
    for obs in observations:
        ok, dev = _matches_mutant(obs, bugs, loose)
        if not ok:
            return None
        worst = max(worst, dev)
        if not obs.passed:
            wrong += 1
            if obs.test_id in failed_tests:
                tests.add(obs.test_id)
    return {"explained_wrong_outputs": wrong, "outputs_checked": len(observations),
            "failing_tests_explained": sorted(tests)[:12], "max_abs_deviation_from_mutant": worst}


def _lowered(observations, explained: frozenset = frozenset()) -> dict | None:
    """Evidence that part of the computation ran in a lower precision than the input (the charge-once rule's
    findings, harness/core/checks.py), or None. ``explained``: tests whose float32-sized error a named numeric
    mistake already accounts for (see _explained_precision)."""
    hits = [o for o in observations if (o.kind == "precision" and o.test_id not in explained)
            or (o.kind == "dtype" and o.info.get("expected") == "float64" and o.info.get("got") == "float32")]
    if not hits:
        return None
    errors = [o.info["max_abs_error"] for o in hits if isinstance(o.info.get("max_abs_error"), float)]
    out = {"tests": sorted({o.test_id for o in hits})[:12]}
    if errors:
        out["max_abs_error_in_float64"] = max(errors)
    if any(o.kind == "dtype" for o in hits):
        out["returned_dtype"] = "float32"
    return out


def _explained_precision(bug_ids: frozenset, observations, forwards) -> frozenset:
    """The tests of precision findings that the named numeric mistake explains: each of the test's float64 outputs
    is the mutant's to the float64 tests' own tolerance. A wrong scale on saturated scores, say, errs by 5e-9 -- inside
    float32's tolerance, so the check saw "a lower precision", but float64 arithmetic with that one mistake
    reproduces it exactly, which a float32 softmax cannot."""
    tests = {o.test_id for o in observations if o.kind == "precision"}
    explained = set()
    for test in tests:
        outs = [o for o in forwards if o.test_id == test and np.dtype(_oracle_for(o)[1]) == np.float64]
        if outs and all(_matches_mutant(o, bug_ids, tol=TOLERANCE["float64"])[0] for o in outs):
            explained.add(test)
    return frozenset(explained)


def diagnose(exercise: str, track: str, observations, results) -> list[Diagnosis]:
    bugs = applicable(exercise, track)
    found: list[Diagnosis] = []
    forwards = [o for o in observations if o.kind == "forward" and o.out is not None]
    lowered = _lowered(observations)
    failing = [o for o in forwards if not o.passed]
    if lowered:  # outputs wrong only by the lower precision are that mistake's, not another one's
        failing = [o for o in failing if not _matches_mutant(o, frozenset(), loose=True)[0]]
    failed_tests = {r.id for r in results if r.status != "passed"}
    numeric = [b for b in bugs if b.detector == "numeric"]
    if failing:
        singles = [(b, ev) for b in numeric
                   if (ev := _explains(frozenset({b.id}), forwards, failed_tests, lowered))]
        named = frozenset()
        for bug, evidence in singles:
            found.append(Diagnosis(bug.id, bug.summary, bug.hint, evidence))
            named = named or frozenset({bug.id})
        if not singles:
            for a, b in itertools.combinations(numeric, 2):
                evidence = _explains(frozenset({a.id, b.id}), forwards, failed_tests, lowered)
                if evidence:
                    for bug, other in ((a, b), (b, a)):
                        found.append(Diagnosis(bug.id, bug.summary, bug.hint, dict(evidence, together_with=other.id)))
                    named = frozenset({a.id, b.id})
                    break
        if lowered and named:
            lowered = _lowered(observations, _explained_precision(named, observations, forwards))
    by_kind = {}
    for o in observations:
        by_kind.setdefault(o.kind, []).append(o)
    for bug in bugs:
        if bug.detector == "dtype":
            hits = [o for o in by_kind.get("dtype", []) if o.info.get("expected") == "float32"
                    and o.info.get("got") == "float64"]
            if hits:
                found.append(Diagnosis(bug.id, bug.summary, bug.hint,
                                       {"tests": sorted({o.test_id for o in hits}), "expected": "float32",
                                        "got": "float64"}))
        elif bug.detector == "precision" and lowered:
            found.append(Diagnosis(bug.id, bug.summary, bug.hint, lowered))
        elif bug.detector == "structure":
            hits = [o for o in by_kind.get("structure", []) if o.info.get("bug") == bug.id]
            if hits:
                detail = hits[0].info.get("detail") or ""
                found.append(Diagnosis(bug.id, f"{bug.summary}: {detail}" if detail else bug.summary, bug.hint,
                                       {"tests": sorted({o.test_id for o in hits})}))
        elif bug.detector == "memory":
            hits = by_kind.get("memory", [])
            if hits:
                worst = max(hits, key=lambda o: o.info.get("peak_bytes", 0)).info
                found.append(Diagnosis(bug.id, bug.summary, bug.hint, {
                    "tests": sorted({o.test_id for o in hits}),
                    **{k: worst[k] for k in ("peak_bytes", "bound_bytes", "score_matrix_bytes") if k in worst}}))
        elif bug.detector == "mutation":
            hits = by_kind.get("mutation", [])
            if hits:
                changed = sorted({n for o in hits for n in o.info.get("changed", [])})
                found.append(Diagnosis(bug.id, f"{bug.summary}: {', '.join(changed)}", bug.hint,
                                       {"tests": sorted({o.test_id for o in hits}), "mutated": changed}))
    if "value" in by_kind:  # the python track's plain answers (attention_cost): graders/mutants/values.py
        from .values import diagnose_values

        found += diagnose_values(bugs, by_kind["value"])
    return found
