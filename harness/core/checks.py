"""Host-side checks with diagnostics a candidate can act on. Every failure raises :class:`CheckFailure`."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

import numpy as np

from gradekit.compare import compare, mismatch_message  # shared with `grade check`: one wording of a mismatch

TOLERANCE = {"float32": 1e-5, "float64": 1e-10}
ROOT_CAUSES = ("dtype", "precision")


@dataclasses.dataclass
class RootCauses:
    """The scoring rule "each root cause is charged once", for the test running now (the grading plugin sets it).

    Two mistakes spread over every numeric test unless they are charged where they belong: an output of another
    float dtype than the input (``dtype``: charged by the tests that exist for it, test_dtype_preserved) and part
    of the computation in a lower precision than the input, e.g. a float32 softmax inside a float64 call
    (``precision``: charged by the float64 reference test). Elsewhere a float output of the wrong dtype is
    accepted and compared, like every output whose only fault is that precision, at float32's tolerance; each time
    that happens it is a *finding* the plugin turns into a note on the test and a signature for the diagnosis."""

    charged: frozenset = frozenset()               # the causes this test exists for (they fail it)
    findings: list = dataclasses.field(default_factory=list)   # [(cause, info)]


_ACTIVE: contextvars.ContextVar[RootCauses | None] = contextvars.ContextVar("root_causes", default=None)


@contextlib.contextmanager
def root_causes(charged=()):
    """Apply the charge-once rule to the checks inside (without it every check is strict)."""
    rc = RootCauses(frozenset(charged))
    token = _ACTIVE.set(rc)
    try:
        yield rc
    finally:
        _ACTIVE.reset(token)


class CheckFailure(AssertionError):
    """A check that failed; ``diagnostics`` goes into the report next to the message."""

    def __init__(self, message: str, diagnostics: dict | None = None):
        super().__init__(message)
        self.message = message
        self.diagnostics = diagnostics or {}


def tolerance_for(dtype) -> float:
    return TOLERANCE.get(str(np.dtype(dtype)), 1e-5)


def check_output(result, *, shape: tuple, dtype, what: str = "output") -> np.ndarray:
    """Default-deny: the output must be a plain array/tensor of exactly ``shape`` and ``dtype``."""
    info = result.info or {}
    if not info.get("exact_type", False):
        expected = "a torch.Tensor" if "requires_grad" in info or info.get("type", "").startswith("torch") \
            else "a plain array/tensor"
        raise CheckFailure(f"{what} is {info.get('type', 'missing')}, expected {expected}",
                           {"returned_type": info.get("type")})
    if info.get("unsendable_dtype"):
        raise CheckFailure(f"{what} has dtype {info['unsendable_dtype']}, expected {np.dtype(dtype)}",
                           {"returned_dtype": info["unsendable_dtype"]})
    if info.get("too_large"):
        raise CheckFailure(f"{what} of shape {info['too_large']} is far larger than expected {list(shape)}",
                           {"returned_shape": info["too_large"]})
    out = result.out
    if out is None:
        raise CheckFailure(f"no {what} came back", {})
    if tuple(out.shape) != tuple(shape):
        raise CheckFailure(f"{what} has shape {list(out.shape)}, expected {list(shape)} (no broadcasting accepted)",
                           {"returned_shape": list(out.shape), "expected_shape": list(shape)})
    if out.dtype != np.dtype(dtype):
        rc = _ACTIVE.get()
        if rc is not None and "dtype" not in rc.charged and out.dtype.kind == "f" and np.dtype(dtype).kind == "f":
            rc.findings.append(("dtype", {"expected": str(np.dtype(dtype)), "got": str(out.dtype)}))
            return out  # charged by the dtype tests only; its values are still compared
        raise CheckFailure(f"{what} has dtype {out.dtype}, expected {np.dtype(dtype)} (the input dtype)",
                           {"returned_dtype": str(out.dtype), "expected_dtype": str(np.dtype(dtype))})
    return out


def assert_close(actual: np.ndarray, expected: np.ndarray, *, tol: float, what: str = "output",
                 extra: dict | None = None) -> dict:
    diag = compare(actual, expected, tol)
    if extra:
        diag.update(extra)
    lowered = _lowered_precision(actual, expected, tol, diag, what)
    if lowered == "forgiven":
        diag.pop("ok")
        return diag
    if not diag.pop("ok"):
        message = mismatch_message(diag, actual, expected, what=what)
        if lowered == "charged":
            diag["lowered_precision"] = True
            message += (f". It matches to float32 precision (atol=rtol={TOLERANCE['float32']:g}): part of the "
                        f"attention is computed in a lower precision than the {np.asarray(actual).dtype} input "
                        "(e.g. a softmax in float32). Charged here only: the other tests accept float32 precision")
        raise CheckFailure(message, diag)
    return diag


def _lowered_precision(actual, expected, tol: float, diag: dict, what: str) -> str | None:
    """Under the charge-once rule: None (no such finding), "forgiven" (the only fault is a lower precision, charged
    elsewhere) or "charged" (the same, in a test that exists for it)."""
    rc = _ACTIVE.get()
    loose = TOLERANCE["float32"]
    if rc is None or diag["ok"] or tol >= loose or diag["nan_count"] or diag["inf_count"]:
        return None
    if not compare(actual, expected, loose)["ok"]:
        return None
    cause = "dtype" if np.asarray(actual).dtype.itemsize < 8 else "precision"
    info = {"what": what, "max_abs_error": diag["max_abs_error"], "tolerance": tol}
    if cause in rc.charged:
        rc.findings.append((cause, dict(info, charged=True)))
        return "charged"
    rc.findings.append((cause, info))
    return "forgiven"
