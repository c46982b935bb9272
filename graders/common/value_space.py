"""The value-space test every Case-based suite imports beside the shape sweep (the cases: value_cases.py)."""

from __future__ import annotations

import pytest

from .value_cases import KINDS, check_value_case, value_case

__all__ = ["test_value_space"]

grade = pytest.mark.grade


@grade("edge", points=1)
@pytest.mark.parametrize("kind", KINDS)
def test_value_space(candidate, problem, track, rng, record, kind):
    """Scores where softmax code breaks, float64 and float32: every score of a row far below zero, every score huge
    and positive, exact ties, all keys equal, a single key."""
    from .suite import reference

    for dtype in ("float64", "float32"):
        check_value_case(candidate, value_case(problem, track, rng, kind, dtype), kind, dtype, record, reference)
