"""Which parameter of a torch module plays which part (W_Q, W_K, W_V, W_O, their biases), read from the names and
shapes the worker reported.

The contract's layouts are separate ``w_q, w_k, w_v, w_o`` Linears or (mha, masked_mha) a fused ``qkv`` Linear
plus ``w_o``/``wo``. Real code names them otherwise (``q_proj``, ``W_query``, ``out_proj``, ``c_attn``/``c_proj``,
a ``linears`` list of four) and sometimes leaves a bias out (an output projection without bias) or keeps one the
case does not have. Such a *recognisable* layout is loaded anyway, and what differs from the contract is listed in
``Layout.deviations`` (bug id -> sentence): the structure tests fail naming it, every other test runs against the
reference with the same deviation (a missing bias held at zero, an extra one loaded with zeros). Anything that
cannot be placed for certain — an unknown parameter, two candidates for one part, a wrong shape — is still a
structure failure naming what was found and what was expected.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from harness.core.errors import GraderError
from harness.core.exercises import Exercise

WEIGHTS = (("q", "wq", "bq"), ("k", "wk", "bk"), ("v", "wv", "bv"), ("o", "wo", "bo"))
# The last component of a Linear's module path (lower-cased, without separators) -> the part it plays.
ALIASES = {
    "q": {"wq", "q", "qproj", "query", "wquery", "queries", "toq", "linearq", "qlinear", "projq", "queryproj"},
    "k": {"wk", "k", "kproj", "key", "wkey", "keys", "tok", "lineark", "klinear", "projk", "keyproj"},
    "v": {"wv", "v", "vproj", "value", "wvalue", "values", "tov", "linearv", "vlinear", "projv", "valueproj"},
    "o": {"wo", "o", "oproj", "out", "outproj", "cproj", "proj", "wout", "toout", "linearout", "output", "dense",
          "fcout", "outlinear", "projo", "outputproj", "linearo"},
    "qkv": {"qkv", "wqkv", "cattn", "qkvproj", "inproj", "toqkv", "querykeyvalue", "attn", "linearqkv", "qkvlinear"},
}
CONTRACT_NAMES = {"q": "w_q", "k": "w_k", "v": "w_v", "o": "w_o", "qkv": "qkv"}


class StructureError(GraderError, AssertionError):
    """The torch module's parameters are not in a layout the grader can load (a test failure, not a crash)."""

    def __init__(self, message: str, diagnostics: dict | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or {}


@dataclasses.dataclass
class Layout:
    kind: str                          # separate | fused
    names: dict                        # case field (wq, bq, ..., wqkv, bqkv) -> parameter name
    params: list                       # what the module declared: [{name, shape, dtype}]
    deviations: dict = dataclasses.field(default_factory=dict)  # bug id -> what differs from the contract
    absent: tuple = ()                 # case fields the module has no parameter for (held at zero)
    zeroed: tuple = ()                 # case fields loaded with zeros (a bias the case does not have)

    @property
    def count(self) -> int:
        return int(sum(int(np.prod(p["shape"])) for p in self.params))


def expected_layouts(exercise: Exercise, bias: bool) -> list[list[str]]:
    suffixes = ("weight", "bias") if bias else ("weight",)
    separate = [f"w_{t}.{s}" for t in "qkvo" for s in suffixes]
    layouts = [separate]
    if exercise.torch.get("fused_qkv"):
        for out in ("w_o", "wo"):
            layouts.append([f"qkv.{s}" for s in suffixes] + [f"{out}.{s}" for s in suffixes])
    return layouts


def _role(path: str) -> str | None:
    last = re.sub(r"[^a-z0-9]", "", path.rsplit(".", 1)[-1].lower())
    return next((role for role, names in ALIASES.items() if last in names), None)


def _modules(found: dict) -> tuple[dict, list]:
    """Parameter names grouped by module path -> {"weight": shape, "bias": shape}; names that are neither."""
    modules, other = {}, []
    for name, shape in found.items():
        path, _, leaf = name.rpartition(".")
        if path and leaf in ("weight", "bias"):
            modules.setdefault(path, {})[leaf] = shape
        else:
            other.append(name)
    return modules, other


def _roles(modules: dict) -> dict | None:
    """part -> module path, or None when the modules cannot be placed for certain."""
    roles: dict = {}
    listed = {}
    for path in modules:
        head, _, index = path.rpartition(".")
        if head and index.isdigit():
            listed.setdefault(head, []).append(int(index))
    for head, indices in listed.items():  # a list of four Linears: q, k, v, o in that order (annotated transformer)
        if sorted(indices) == [0, 1, 2, 3] and len(modules) == 4:
            return {part: f"{head}.{i}" for i, part in enumerate("qkvo")}
    for path in modules:
        role = _role(path)
        if role is None or role in roles:
            return None
        roles[role] = path
    if set(roles) in ({"q", "k", "v", "o"}, {"qkv", "o"}):
        return roles
    return None


def match_layout(exercise: Exercise, params: list[dict], bias: bool, d: int, d_kv: int) -> Layout:
    found = {p["name"]: tuple(p["shape"]) for p in params}
    modules, other = _modules(found)
    roles = None if other else _roles(modules)
    fused_ok = bool(exercise.torch.get("fused_qkv")) or d_kv == d
    if roles is None or ("qkv" in roles and not fused_ok):
        expected = " or ".join("{" + ", ".join(n) + "}" for n in expected_layouts(exercise, bias))
        raise StructureError(
            f"unrecognised parameter layout: found {{{', '.join(sorted(found)) or 'no parameters'}}}; "
            f"expected {expected}",
            {"found": sorted(found)[:50], "expected": expected_layouts(exercise, bias)})
    fused = "qkv" in roles
    out_dims = {"q": d, "k": d_kv, "v": d_kv, "o": d, "qkv": d + 2 * d_kv}
    names, wrong, deviations, absent, zeroed = {}, {}, {}, [], []
    for part, path in roles.items():
        field = "qkv" if part == "qkv" else part
        shapes = {"weight": (out_dims[part], d)}
        if "bias" in modules[path]:
            shapes["bias"] = (out_dims[part],)
        for leaf, want in shapes.items():
            got = modules[path][leaf]
            if got != want:
                wrong[f"{path}.{leaf}"] = (got, want)
        names[f"w{field}"] = f"{path}.weight"
        has_bias = "bias" in modules[path]
        if has_bias:
            names[f"b{field}"] = f"{path}.bias"
            if not bias:
                zeroed.append(f"b{field}")
        elif bias:
            parts = "qkv" if part == "qkv" else part
            for p in parts:
                deviations[f"missing_bias_{p}"] = f"{path} has no bias"
            absent.extend(f"b{p}" for p in parts)
    if wrong:
        kind = "fused" if fused else "separate"
        detail = "; ".join(f"{n} has shape {list(a)}, expected {list(b)}" for n, (a, b) in wrong.items())
        raise StructureError(f"parameter shapes do not match the {kind} layout: {detail}",
                             {"found": {n: list(s) for n, s in found.items()}})
    if zeroed:
        deviations["extra_bias"] = (f"bias=False still builds biases ({', '.join(names[f] for f in zeroed)}); "
                                    f"graded with them held at zero")
    renamed = {path: CONTRACT_NAMES[part] for part, path in roles.items()
               if path != CONTRACT_NAMES[part] and not (part == "o" and path == "wo")}
    if renamed:
        deviations["layout_renamed"] = ("parameters named " + ", ".join(f"{p} (for {n})" for p, n in renamed.items())
                                        + "; graded as that layout")
    return Layout("fused" if fused else "separate", names, params, deviations, tuple(absent), tuple(zeroed))
