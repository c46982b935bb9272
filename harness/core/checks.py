"""Host-side checks with diagnostics a candidate can act on. Every failure raises :class:`CheckFailure`."""

from __future__ import annotations

import numpy as np

from gradekit.compare import compare, mismatch_message  # shared with `grade check`: one wording of a mismatch

TOLERANCE = {"float32": 1e-5, "float64": 1e-10}


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
        raise CheckFailure(f"{what} has dtype {out.dtype}, expected {np.dtype(dtype)} (the input dtype)",
                           {"returned_dtype": str(out.dtype), "expected_dtype": str(np.dtype(dtype))})
    return out


def assert_close(actual: np.ndarray, expected: np.ndarray, *, tol: float, what: str = "output",
                 extra: dict | None = None) -> dict:
    diag = compare(actual, expected, tol)
    if extra:
        diag.update(extra)
    if not diag.pop("ok"):
        raise CheckFailure(mismatch_message(diag, actual, expected, what=what), diag)
    return diag
