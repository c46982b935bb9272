"""Hidden suite, kv_cache: long decoding — well past any power-of-two buffer a candidate might hard-code (256, 512,
1024): a prefill, one-token steps across each of them and chunks between, to 1,104 positions; a long single chunk
on a short prefix — and the value-space cases (graders/common/value_cases.py) on a prefill and a decoding step.
Small d, so the whole file stays cheap."""

import numpy as np
import pytest

from graders.common.kv import LONG_SCHEDULE as LONG, check_chunks, make_case, run_step, step, with_prefix
from graders.common.suite import fit
from graders.common.value_cases import KINDS, place_scores, value_tol
from harness.core.checks import assert_close

grade = pytest.mark.grade


@grade("numeric", points=2)
def test_long_decoding(candidate, track, rng, record):
    """Prefill 250 tokens, then one-token steps and chunks to 1,104 positions (across 256, 512 and 1024), each
    call fed the cache the previous one returned: causal GQA over the whole sequence."""
    check_chunks(candidate, make_case(track, rng, b=1, s=sum(LONG), d=8, h=2, g=1), LONG, record)


@grade("numeric", points=1)
def test_long_single_chunk(candidate, track, rng, record):
    """A prefill of 7 tokens, then one chunk of 1,100 new tokens (positions 7..1106) in a single call."""
    check_chunks(candidate, make_case(track, rng, b=1, s=1107, d=8, h=2, g=1), (7, 1100), record)


@grade("edge", points=1)
@pytest.mark.parametrize("kind", [k for k in KINDS if k != "single_key"])  # a single key: test_prefill_single_token
def test_value_space(candidate, track, rng, record, kind):
    """Scores where softmax code breaks (every score far below zero, huge and positive, exact ties, all keys
    equal), float64 and float32: a prefill of 6 tokens, then a step of 2 on its cache."""
    for dtype in ("float64", "float32"):
        case = place_scores(fit(candidate, make_case(track, rng, b=2, s=8, d=16, h=4, g=2)), kind, dtype, rng)
        for part in (case.astype(dtype).replace(x=case.x[:, :6].astype(dtype)), with_prefix(case, 6, dtype)):
            out, (k, v) = run_step(candidate, part, record, check_values=False, what=f" ({kind}, {dtype})")
            ref_out, (ref_k, ref_v) = step(part)
            tol = value_tol(kind, dtype)
            for got, want, what in ((out, ref_out, "output"), (k, ref_k, "cached K"), (v, ref_v, "cached V")):
                assert_close(got, want, tol=tol, what=f"{what} ({kind.replace('_', ' ')}, {dtype}, prefix "
                                                      f"{0 if part.cache is None else part.cache[0].shape[2]})",
                             extra={"case": part.describe(), "value_case": kind})
