"""Small arrays kept from a grading run for the interviewer's HTML page: for a few failing forward tests, the
case (inputs, weights, mask; a kv_cache step's cached prefix; a flash case's Q, K, V), the candidate's output and
the float64 reference.

They live in a sidecar ``.npz`` next to the JSON report (:mod:`harness.core.sidecar`). Everything
here runs on the host: the arrays come from the plugin's recorded observations, never from a file the
candidate could write.
Reading them back and deriving the plots is :mod:`harness.reports.plots`.
"""

from __future__ import annotations

import numpy as np

MAX_ITEMS = 6                  # failing tests kept per report
MAX_ELEMENTS = 20_000          # per array; bigger cases are skipped
CATEGORY_ORDER = ("numeric", "edge", "shape", "gradient", "structure")
CASE_FIELDS = ("x", "y", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "mask")


def collect(observations, results, *, max_items: int = MAX_ITEMS) -> list[dict]:
    """Pick up to ``max_items`` failing tests with a recorded forward output and keep their arrays."""
    status = {r.id: r for r in results}
    first: dict[str, object] = {}
    for ob in observations:
        r = status.get(ob.test_id)
        if (ob.kind != "forward" or ob.case is None or ob.out is None or r is None or r.status != "failed"
                or ob.test_id in first or ob.passed):     # last: an observation may judge itself only when asked
            continue
        first[ob.test_id] = ob
    order = sorted(first, key=lambda t: (CATEGORY_ORDER.index(status[t].category)
                                         if status[t].category in CATEGORY_ORDER else 9))
    items = []
    for test_id in order:
        ob = first[test_id]
        try:
            item = _item(ob)
        except Exception:  # a case the oracle cannot take is simply not plotted
            continue
        if item is None:
            continue
        arrays = item["arrays"]
        out = arrays["out"]
        if out.shape != arrays["ref"].shape or any(a.size > MAX_ELEMENTS for a in arrays.values()):
            continue
        items.append({"test_id": test_id, **item})
        if len(items) >= max_items:
            break
    return items


def _item(ob) -> dict | None:
    """The arrays one observation keeps, by the kind of case it is: an MHA-style Case (x and weights), a
    kv_cache step (the same, plus the cached prefix and its causal mask) or a flash case (Q, K, V per head).
    Every item's ``out`` and ``ref`` are (b, s_q, d) with the heads merged, so every plot reads them alike."""
    case, out = ob.case, np.asarray(ob.out)
    if not np.issubdtype(out.dtype, np.floating):
        return None
    if hasattr(case, "q") and not hasattr(case, "wq"):          # flash_attention: (b, h, s, d_k), no weights
        from graders.common.flash import reference as flash_reference
        from graders.common.flash_oracle import causal_hidden

        if out.shape != case.q.shape:
            return None
        b, h, s_q, d_k = case.q.shape
        merge = lambda t: np.asarray(t, np.float64).transpose(0, 2, 1, 3).reshape(b, s_q, h * d_k)  # noqa: E731
        arrays = {"q": np.asarray(case.q), "k": np.asarray(case.k), "v": np.asarray(case.v),
                  "out": merge(out), "ref": merge(flash_reference(case))}
        if case.causal:
            arrays["mask"] = causal_hidden(s_q, case.k.shape[2])
        return {"h": int(h), "g": None, "dtype": str(case.q.dtype), "kind": "flash", "arrays": arrays}
    if not hasattr(case, "wq"):
        return None
    arrays = {f: np.asarray(getattr(case, f)) for f in CASE_FIELDS if getattr(case, f, None) is not None}
    kind = "mha"
    if ob.info.get("kv"):                                           # out is (out, K, V) flattened; out first
        from graders.common.kv import step

        if out.size < case.x.size:
            return None
        out = out.ravel()[:case.x.size].reshape(case.x.shape)
        ref = step(case)[0]
        s_new = case.x.shape[1]
        t0 = 0 if case.cache is None else case.cache[0].shape[2]
        if case.cache is not None:
            arrays["pk"], arrays["pv"] = (np.asarray(c) for c in case.cache)   # (b, g, t0, d_k) each
        arrays["mask"] = np.triu(np.ones((s_new, t0 + s_new), dtype=bool), k=1 + t0)   # causal after the prefix
        kind = "kv"
    else:
        from graders.common.suite import reference

        if out.shape != case.x.shape:
            return None
        ref = reference(case)
    arrays["out"] = out.astype(np.float64)
    arrays["ref"] = np.asarray(ref, dtype=np.float64)
    return {"h": int(case.h), "g": None if case.g is None else int(case.g), "dtype": str(case.x.dtype),
            "kind": kind, "arrays": arrays}
