"""Small arrays kept from a grading run for the interviewer's HTML page: for a few failing forward tests, the
case (inputs, weights, mask), the candidate's output and the float64 reference.

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
    from graders.common.suite import reference

    status = {r.id: r for r in results}
    first: dict[str, object] = {}
    for ob in observations:
        r = status.get(ob.test_id)
        if (ob.kind != "forward" or ob.passed or ob.case is None or ob.out is None or r is None
                or r.status != "failed" or ob.test_id in first):
            continue
        first[ob.test_id] = ob
    order = sorted(first, key=lambda t: (CATEGORY_ORDER.index(status[t].category)
                                         if status[t].category in CATEGORY_ORDER else 9))
    items = []
    for test_id in order:
        ob = first[test_id]
        case = ob.case
        if not hasattr(case, "wq"):  # not an MHA-style Case (flash_attention): nothing to plot
            continue
        arrays = {f: np.asarray(getattr(case, f)) for f in CASE_FIELDS if getattr(case, f, None) is not None}
        out = np.asarray(ob.out)
        if out.shape != case.x.shape or any(a.size > MAX_ELEMENTS for a in (*arrays.values(), out)):
            continue
        if not np.issubdtype(out.dtype, np.floating):
            continue
        try:
            ref = reference(case)
        except Exception:  # a case the oracle cannot take is simply not plotted
            continue
        arrays["out"] = out.astype(np.float64)
        arrays["ref"] = np.asarray(ref, dtype=np.float64)
        items.append({"test_id": test_id, "h": int(case.h), "g": None if case.g is None else int(case.g),
                      "dtype": str(case.x.dtype), "arrays": arrays})
        if len(items) >= max_items:
            break
    return items
