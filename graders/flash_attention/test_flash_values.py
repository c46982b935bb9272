"""Hidden suite, flash_attention: value-space cases beside the shape tests (graders/common/value_cases.py) — rows
whose every score is far below zero (a running max started at 0 gives 0/0), huge positive scores, exact ties, all
keys equal, a single key; full and causal, float64 and float32."""

import pytest

from graders.common.flash import check_forward
from graders.common.value_cases import KINDS, flash_value_case, value_tol

grade = pytest.mark.grade


@grade("edge", points=1)
@pytest.mark.parametrize("kind", KINDS)
def test_value_space(candidate, rng, record, kind):
    """Scores where softmax code breaks, full and causal, float64 and float32 (blocks of 4 over 20 keys)."""
    for dtype in ("float64", "float32"):
        for causal in (False, True):
            check_forward(candidate, flash_value_case(rng, kind, dtype, causal=causal), record, dtype=dtype,
                          tol=value_tol(kind, dtype), what=f"output ({kind.replace('_', ' ')}, {dtype}"
                                                      f"{', causal' if causal else ''})")
