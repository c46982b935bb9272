"""Runs a candidate's file on the public vectors of one exercise and track, in a process of its own:

    python -m gradekit.runner VECTORS_DIR TRACK FILE

One JSON line per case on the original stdout (``{"case": ..., "started": true}`` before the call, then the
outcome), so the parent can name the case that hung; whatever the candidate prints goes to stderr. The build of
the kit uses :func:`call_case` and :func:`outputs_of` to compute the expected outputs with the reference, so the
vectors and this runner agree on the calling convention by construction.

A vector is an ``.npz``: ``__meta__`` (JSON: entry, style, how to build the arguments, the output names, the
tolerance), the inputs ``in.*`` and the expected outputs ``expect.*``. An argument reference is ``null``,
``{"a": KEY}`` (an array of the file), ``{"v": VALUE}`` (a literal) or ``{"t": [REF, ...]}`` (a tuple)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from .compare import compare, mismatch_message


class Mismatch(Exception):
    """The candidate's output has the wrong type, structure, shape or dtype, or wrong parameters."""

    def __init__(self, message: str, diagnostics: dict | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or {}


def load_vector(path: Path) -> tuple[dict, dict]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return json.loads(str(arrays.pop("__meta__"))), arrays


def _decode(ref, arrays: dict, to_tensor):
    if ref is None:
        return None
    if "a" in ref:
        a = np.array(arrays[ref["a"]])            # a copy: the vector stays intact whatever the call does
        return to_tensor(a) if to_tensor else a
    if "t" in ref:
        return tuple(_decode(r, arrays, to_tensor) for r in ref["t"])
    return ref["v"]


def call_case(entry, meta: dict, arrays: dict):
    """Call ``entry`` (the function or class the file defines) as the grader would: required arguments
    positionally, optional ones by keyword; a module is built, given the vector's weights, and called."""
    to_tensor = None
    if meta["track"] == "torch":
        import torch

        to_tensor = torch.from_numpy
    args = [_decode(r, arrays, to_tensor) for r in meta["args"]]
    kwargs = {k: _decode(r, arrays, to_tensor) for k, r in meta.get("kwargs", {}).items()}
    if meta.get("style") != "module":
        if to_tensor:
            with torch.no_grad():
                return entry(*args, **kwargs)
        return entry(*args, **kwargs)
    init = [_decode(r, arrays, None) for r in meta["init"]]
    init_kwargs = {k: _decode(r, arrays, None) for k, r in meta.get("init_kwargs", {}).items()}
    model = entry(*init, **init_kwargs)
    model = model.to(getattr(torch, meta["dtype"]))
    with torch.no_grad():
        load_weights(model, meta["weights"], arrays)
        model.eval()
        return model(*args, **kwargs)


def load_weights(model, spec: dict, arrays: dict) -> None:
    """``linear``: {module name: array key} (NumPy convention, W is (d_in, d_out), so weight = W.T);
    ``fused``: {module name: [linear names]} stacked along the output; ``aliases``: other accepted names."""
    import torch

    children = dict(model.named_children())
    loaded: set[str] = set()

    def put(name: str, module, w: np.ndarray):
        if not isinstance(module, torch.nn.Linear) or tuple(module.weight.shape) != w.T.shape:
            raise Mismatch(f"{name} should be an nn.Linear with weight of shape {list(w.T.shape)}; it is "
                           f"{type(module).__name__} {list(getattr(module, 'weight', np.empty(0)).shape)}")
        module.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
        if module.bias is not None:
            module.bias.zero_()

    for name, keys in spec.get("fused", {}).items():
        if name in children:
            put(name, children[name], np.concatenate([arrays[spec["linear"][k]] for k in keys], axis=1))
            loaded.update(keys)
    for name, key in spec["linear"].items():
        if name in loaded:
            continue
        found = next((n for n in (name, *spec.get("aliases", {}).get(name, [])) if n in children), None)
        if found is not None:
            put(found, children[found], arrays[key])
            loaded.add(name)
    missing = [n for n in spec["linear"] if n not in loaded]
    if missing:
        found = sorted(n for n, _ in model.named_parameters())
        raise Mismatch(f"the module has no {', '.join(missing)}: parameters found {found}; expected nn.Linear "
                       f"layers {', '.join(spec['linear'])}" + "".join(f" (or {n} for {', '.join(k)})"
                                                                       for n, k in spec.get("fused", {}).items()))


def outputs_of(result, spec, track: str) -> list[tuple[str, object]]:
    """[(name, value)] following the output structure ``spec``: a name, or a list of specs for a tuple."""
    if isinstance(spec, str):
        return [(spec, result)]
    if not isinstance(result, (tuple, list)) or len(result) != len(spec):
        want = "(" + ", ".join(_describe(s) for s in spec) + ")"
        raise Mismatch(f"the call returned {type(result).__name__}, expected a tuple {want}")
    return [pair for value, s in zip(result, spec) for pair in outputs_of(value, s, track)]


def _describe(spec) -> str:
    return spec if isinstance(spec, str) else "(" + ", ".join(_describe(s) for s in spec) + ")"


def _as_array(name: str, value, track: str, kind: str) -> np.ndarray:
    if kind == "tensor":
        import torch

        if type(value) is not torch.Tensor:
            raise Mismatch(f"{name} is {type(value).__name__}, expected a torch.Tensor", {"returned_type": type(value).__name__})
        return value.detach().cpu().numpy()
    if kind == "ndarray" and type(value) is not np.ndarray:
        raise Mismatch(f"{name} is {type(value).__name__}, expected a numpy.ndarray", {"returned_type": type(value).__name__})
    return np.asarray(value)


def plain(value):
    """A value as JSON has it (tuples as lists, NumPy scalars as Python numbers); a track of plain functions is
    compared this way, exactly."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def _check_value(result, expected) -> None:
    got = plain(result)
    if json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True):
        return
    if isinstance(got, dict) and isinstance(expected, dict):
        wrong = [k for k in expected if json.dumps(got.get(k)) != json.dumps(expected[k])]
        extra = sorted(set(got) - set(expected))
        parts = [f"{k!r}: got {_short(got.get(k, '(missing)'))}, expected {_short(expected[k])}" for k in wrong[:3]]
        raise Mismatch("; ".join(parts + ([f"unexpected keys {extra}"] if extra else [])),
                       {"wrong_keys": wrong, "unexpected_keys": extra})
    raise Mismatch(f"returned {_short(got)}, expected {_short(expected)}", {"returned": _short(got)})


def _short(value, limit: int = 120) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_case(entry, meta: dict, arrays: dict) -> dict:
    """Call and compare: shape, dtype, then values (the tolerance of the case); plain values exactly."""
    result = call_case(entry, meta, arrays)
    if "expect_value" in meta:
        _check_value(result, meta["expect_value"])
        return {}
    diags = {}
    for name, value in outputs_of(result, meta["outputs"], meta["track"]):
        expected = arrays[f"expect.{name}"]
        got = _as_array(name, value, meta["track"], meta.get("output_type", "ndarray"))
        if got.shape != expected.shape:
            raise Mismatch(f"{name} has shape {list(got.shape)}, expected {list(expected.shape)} (no broadcasting "
                           f"accepted)", {"returned_shape": list(got.shape), "expected_shape": list(expected.shape)})
        if meta.get("output_type") != "any" and got.dtype != expected.dtype:
            raise Mismatch(f"{name} has dtype {got.dtype}, expected {expected.dtype} (the input dtype)",
                           {"returned_dtype": str(got.dtype), "expected_dtype": str(expected.dtype)})
        diag = compare(got, expected, meta["tolerance"])
        if not diag.pop("ok"):
            raise Mismatch(mismatch_message(diag, got, expected, what=name), diag)
        diags[name] = {"max_abs_error": diag["max_abs_error"]}
    return diags


def _own_frames(exc: BaseException, path: str) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    return "".join(traceback.format_list(frames[-6:])).rstrip()


def load_module(path: str):
    import importlib.util

    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def entry_of(module, name: str):
    if not hasattr(module, name):
        raise Mismatch(f"your file does not define {name}")
    return getattr(module, name)


def main(argv: list[str], results_fd: int | None = None) -> int:
    """Results go to ``results_fd`` (default: the original stdout); whatever the candidate prints, to stderr."""
    vectors_dir, track, path = Path(argv[0]), argv[1], os.path.abspath(argv[2])
    out = os.fdopen(os.dup(1) if results_fd is None else results_fd, "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(**record):
        out.write(json.dumps(record) + "\n")
        out.flush()

    cases = sorted(vectors_dir.glob("*.npz"))
    loaded = [load_vector(p) for p in cases]
    try:
        module = load_module(path)
    except BaseException as exc:  # noqa: BLE001  the candidate's file, anything can happen
        emit(error=f"importing your file raised {type(exc).__name__}: {exc}", traceback=_own_frames(exc, path))
        return 0
    for meta, arrays in loaded:
        emit(case=meta["case"], description=meta.get("description", ""), started=True)
        record = {"case": meta["case"], "description": meta.get("description", "")}
        try:
            record.update(status="passed", diagnostics=check_case(entry_of(module, meta["entry"]), meta, arrays))
        except Mismatch as exc:
            record.update(status="failed", message=str(exc), diagnostics=exc.diagnostics)
        except BaseException as exc:  # noqa: BLE001
            record.update(status="error", message=f"your code raised {type(exc).__name__}: {exc}",
                          traceback=_own_frames(exc, path))
        emit(**record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
