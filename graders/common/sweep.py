"""The shape sweep and the large fixed cases every suite shares (numeric category, visible); the drawing, the
checking and the shrinking are in graders/common/shapes.py."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from .shapes import LARGE_IDS, describe, draw, fail, large_shape, run_all_checked, run_checked

__all__ = ["test_shape_sweep", "test_large_case"]

grade = pytest.mark.grade


def sweep_plan(problem, track: str, seed: int) -> list:
    """The sweep's shapes in the order they run (torch: grouped by module, so each module is built once)."""
    shapes = draw(problem, track, np.random.default_rng([seed, zlib.crc32(b"test_shape_sweep")]))
    return sorted(shapes, key=lambda s: s.module_key) if track == "torch" else shapes


@grade("numeric", points=4)
def test_shape_sweep(candidate, problem, track, exercise, record, grade_seed):
    """Seeded random shapes over the whole space (b ≤ 8, s ≤ 128, h ≤ 16, every g, d_k up to 64, every mask form,
    bias on/off, float32/float64) match the reference; a failure is shrunk to the smallest failing shape."""
    shapes = sweep_plan(problem, track, grade_seed)
    failures = {}
    for i, f in run_all_checked(candidate, problem, shapes, record, lambda s: describe(s, problem, track)):
        if f is not None:
            failures[i] = f
    record.note(sweep_cases=len(shapes), sweep_seed=grade_seed)
    if failures:
        i = min(failures, key=lambda j: (shapes[j].size(problem.cross), j))   # shrink from the smallest failure
        fail(candidate, problem, track, record, grade_seed, shapes[i], failures[i], exercise=exercise.name,
             where=f"sweep case {i + 1} of {len(shapes)}",
             extra={"failing_cases": len(failures), "sweep_cases": len(shapes)})


@grade("numeric", points=1)
@pytest.mark.parametrize("which", LARGE_IDS)
def test_large_case(candidate, problem, track, exercise, record, grade_seed, which):
    """A large fixed case (long sequences, wide model, big batch, many heads) matches the reference: length- or
    size-dependent code paths and accumulation errors show here."""
    sh = large_shape(problem, track, which)
    f = run_checked(candidate, problem, sh, record, lambda s: describe(s, problem, track))
    if f is not None:
        fail(candidate, problem, track, record, grade_seed, sh, f, exercise=exercise.name,
             where=f"the large case {which}", extra={})
