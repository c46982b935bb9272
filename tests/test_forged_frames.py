"""Issue 28 #4: a rewritten worker may send any frame the wire accepts — arrays of any allowed shape and
dtype, keys missing or extra. Whatever it sends, the run must end with a test status charged to the candidate
(failed or error), never an exception inside the grader (which the plugin turns into an infrastructure error,
retried and reported as "not your code"). The candidate here is the real proxy (harness/session/candidate.py)
and the real suite checks, over a fake session that answers what a forged worker could."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from graders.common import suite
from harness.core.exercises import get_exercise
from harness.grading.plugin import _status_for
from harness.session.candidate import Candidate
from harness.session.channel import _checked_header
from harness.worker import wire

D, H = 8, 2
PARAMS = {"qkv.weight": (3 * D, D), "qkv.bias": (3 * D,), "w_o.weight": (D, D), "w_o.bias": (D,)}


class Record:
    def signature(self, *a, **k):
        pass

    def note(self, *a, **k):
        pass

    def forward(self, *a, **k):
        pass


class ForgedSession:
    """Answers like an honest worker with the fused qkv layout, then lets ``forge`` rewrite the arrays."""

    submission = None
    entry = "MultiHeadAttention"

    def __init__(self, forge):
        self.forge = forge

    def request(self, header, arrays=None, *, readback=False):
        arrays = arrays or {}
        if header["op"] == "init":
            return {"kind": wire.RESULT, "params": [{"name": n, "shape": list(s), "dtype": "float64"}
                                                     for n, s in PARAMS.items()]}, {}
        dtype = np.dtype(header["dtype"])
        x = arrays["x"]
        out = {wire.OUT: np.zeros(x.shape, dtype)}
        if header.get("grad_output"):
            out[wire.GRAD + "x"] = np.zeros(x.shape, dtype)
            out.update({wire.GRAD + wire.PARAM + n: np.zeros(s, dtype) for n, s in PARAMS.items()})
        if header.get("return_inputs"):
            out.update({wire.INPUT + k: v.copy() for k, v in arrays.items() if not k.startswith(wire.WEIGHT)})
            out.update({wire.INPUT + wire.PARAM + n: arrays[wire.WEIGHT + ("wqkv" if n == "qkv.weight" else
                                                                           "bqkv" if n == "qkv.bias" else
                                                                           "wo" if n == "w_o.weight" else "bo")]
                        .copy() for n in PARAMS})
        head = _checked_header({"kind": wire.RESULT, "output": {"type": "torch.Tensor", "exact_type": True,
                                                                 "dtype": str(dtype), "requires_grad": False}})
        return head, self.forge(out)


SHAPES = [(4, 4), (), (0,), (1,), (3, 3 * D), (2, 3 * D, D), (3 * D + 1, D), (D, 3 * D)]
DTYPES = ["bool", "int8", "uint8", "int64", "float16", "float32", "complex64", "complex128"]
EXTRA = [wire.GRAD + "zzz", wire.GRAD + wire.PARAM + "nope.weight", wire.INPUT + wire.PARAM + "nope",
         wire.INPUT + "ghost", wire.LEAF + "7", wire.GRAD + "mask", wire.INPUT + "mask"]
KEYS = [wire.OUT, wire.GRAD + "x"] + [p + wire.PARAM + n for p in (wire.GRAD, wire.INPUT) for n in PARAMS] + \
    [wire.INPUT + "x"]


def _forgeries():
    for key, shape in itertools.product(KEYS, SHAPES):
        yield f"{key}-shape{shape}", lambda out, k=key, s=shape: {**out, k: np.zeros(s)} if k in out else out
    for key, dt in itertools.product(KEYS, DTYPES):
        yield f"{key}-{dt}", lambda out, k=key, d=dt: {**out, k: out[k].astype(d)} if k in out else out
    for key in KEYS:
        yield f"{key}-missing", lambda out, k=key: {n: v for n, v in out.items() if n != k}
    for key in EXTRA:
        yield f"extra-{key}", lambda out, k=key: {**out, k: np.ones((4, 4))}
    yield "nan-everywhere", lambda out: {k: np.full_like(v, np.nan) if v.dtype.kind == "f" else v for k, v in out.items()}


@pytest.mark.parametrize("name,forge", list(_forgeries()), ids=[n for n, _ in _forgeries()])
def test_no_forged_frame_becomes_an_infrastructure_error(name, forge):
    candidate = Candidate(ForgedSession(forge), get_exercise("mha"), "torch")
    rng = np.random.default_rng(0)
    case = suite.make_case("torch", rng, d=D, h=H)
    for check in (lambda: suite.check_gradients(candidate, case, rng, Record()),
                  lambda: suite.check_not_mutated(candidate, case, Record()),
                  lambda: suite.check_forward(candidate, case, Record())):
        try:
            check()
        except BaseException as exc:  # noqa: BLE001 - the point: what kind of exception
            assert _status_for(exc) is not None, f"{name}: {type(exc).__name__}: {exc} would be an infrastructure error"


def test_a_fused_qkv_gradient_of_the_wrong_shape_is_the_candidates_error():
    """The issue's reproduction: grad:param:qkv.weight of shape (4, 4)."""
    forge = lambda out: {**out, wire.GRAD + wire.PARAM + "qkv.weight": np.zeros((4, 4))}  # noqa: E731
    candidate = Candidate(ForgedSession(forge), get_exercise("mha"), "torch")
    rng = np.random.default_rng(0)
    with pytest.raises(Exception) as info:
        suite.check_gradients(candidate, suite.make_case("torch", rng, d=D, h=H), rng, Record())
    status, message, diag = _status_for(info.value)
    assert status == "error" and "qkv.weight" in message and "protocol_error" in diag
