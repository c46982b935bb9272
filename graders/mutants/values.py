"""Named-bug diagnosis for plain answers (the python track, attention_cost): which catalogued mistake explains
the counts a candidate got wrong (host-side only).

The functions are independent, so each is judged on its own: for a function with a wrong answer, a bug
explains it when the mutant (graders/common/cost_oracle.py with that bug on) gives the candidate's answer on
*every* call of that function the suite made, right ones included. When no single bug does, pairs are tried
(two mistakes in one formula). A count of the wrong type is judged by the number it stands for (an integral
float, a NumPy integer), so the formula's mistake is named beside the type's. Nothing fits -> nothing named.
"""

from __future__ import annotations

import itertools

from harness.core.report import Diagnosis

from ..common import cost_oracle
from ..common.cost import as_number, call_text


def _answer(function: str, values: dict, bugs: frozenset) -> object:
    try:
        return getattr(cost_oracle, function)(**values, bugs=bugs)
    except (ArithmeticError, TypeError, ValueError):
        return None


def _explains(function: str, calls: list, bugs: frozenset) -> bool:
    return all(number is not None and _answer(function, o.info["values"], bugs) == number for o, number in calls)


def _has_float(value: object) -> bool:
    if type(value) is float:
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False


def diagnose_values(bugs, observations) -> list[Diagnosis]:
    """``observations``: the suite's ``value`` records (function, values, value, passed)."""
    by_function: dict[str, list] = {}
    for o in observations:
        by_function.setdefault(o.info["function"], []).append(o)
    value_bugs = [b for b in bugs if b.detector == "value"]
    named: dict[str, dict] = {}
    for function, obs in by_function.items():
        if all(o.info["passed"] for o in obs):
            continue
        calls = [(o, as_number(o.info["value"])) for o in obs]
        if all(number == _answer(function, o.info["values"], frozenset()) for o, number in calls):
            continue  # every answer has the right number: only its type is wrong
        wrong = next(o for o, number in calls if not o.info["passed"])
        evidence = {"calls_checked": len(calls), "example": call_text(function, wrong.info["values"])}
        singles = [b for b in value_bugs if _explains(function, calls, frozenset({b.id}))]
        if singles:
            for bug in singles:
                named.setdefault(bug.id, {"functions": []})["functions"].append(function)
                named[bug.id].update({k: v for k, v in evidence.items() if k not in named[bug.id]})
            continue
        for a, b in itertools.combinations(value_bugs, 2):
            if _explains(function, calls, frozenset({a.id, b.id})):
                for bug, other in ((a, b), (b, a)):
                    entry = named.setdefault(bug.id, {"functions": []})
                    entry["functions"].append(function)
                    entry.setdefault("together_with", other.id)
                    entry.update({k: v for k, v in evidence.items() if k not in entry})
                break
    found = [Diagnosis(b.id, b.summary, b.hint, named[b.id]) for b in value_bugs if b.id in named]
    floats = sorted({o.info["function"] for o in observations if _has_float(o.info["value"])})
    for bug in bugs:
        if bug.detector == "type" and floats:
            found.append(Diagnosis(bug.id, bug.summary, bug.hint, {"functions": floats}))
    return found
