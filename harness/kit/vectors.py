"""Public test vectors: a few fixed cases per exercise and track, inputs and the reference's outputs as .npz,
in the format gradekit/runner.py reads. Generic over exercises: the cases follow from the argument names in
exercise.json (X, Y, Wq..Wo, h, g, Q, K, V, mask, cache, causal, block_size) and the sizes in ``DIMS``; an
exercise can set its own sizes and cases under ``"public"`` in exercise.json:

    "public": {"dims": {"s": 6}, "cases": [{"name": "small", "args": {"n": 3}, "dtype": "float64"}]}

A case may name a ``mask`` kind (none, causal, causal_padding, fully_masked_row), ``causal``, a cache ``prefix``
length and literal ``args``; an argument with no generator below takes its value from ``args`` or ``dims``."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path

import numpy as np

from gradekit import runner
from gradekit.exercises import load, names, tracks_of
from harness.core.exercises import EXERCISES_DIR, REFERENCE_DIR

DIMS = {"b": 2, "s": 5, "s_k": 3, "d": 8, "h": 4, "g": 2, "block_size": 2, "prefix": 3}
TOLERANCE = {"float32": 1e-5, "float64": 1e-10}
TORCH_NAMES = {"x": "X", "context": "Y", "d_model": "d", "n_heads": "h", "n_kv_heads": "g"}  # torch -> NumPy names


class VectorError(Exception):
    """An exercise whose public cases cannot be derived (an argument without a generator or a value)."""


def default_cases(arg_names: set[str], required: set[str]) -> list[dict]:
    """small, then one masked case and one with a fully-masked row where there is a mask (a causal case and a
    cached prefix where those exist), and the small case in float32."""
    cases = [{"name": "small"}]
    if "mask" in arg_names:
        cases[0]["mask"] = "causal" if "mask" in required else "none"
        cases.append({"name": "masked", "mask": "causal_padding" if "mask" in required else "causal"})
        cases.append({"name": "fully_masked_row", "mask": "fully_masked_row"})
    if "causal" in arg_names:
        cases.append({"name": "causal", "causal": True})
    if "cache" in arg_names:
        cases.append({"name": "prefix", "prefix": DIMS["prefix"]})
    cases.append({**cases[0], "name": "small_float32", "dtype": "float32"})
    return cases


def _mask(kind: str, dims: dict, s_q: int, s_k: int):
    b = dims["b"]
    causal = np.triu(np.ones((s_q, s_k), dtype=bool), k=1)                       # (s_q, s_k)
    if kind in (None, "none"):
        return None
    if kind == "causal":
        return causal
    pad = np.zeros((b, 1, 1, s_k), dtype=bool)                                   # (b, 1, 1, s_k)
    pad[-1, ..., :1] = True                                                      # last row: one left-padded key
    if kind == "causal_padding":
        return causal | pad                                                       # (b, 1, s_q, s_k)
    if kind == "fully_masked_row":
        mask = np.broadcast_to(causal, (b, 1, s_q, s_k)).copy()                  # (b, 1, s_q, s_k)
        mask[-1, 0, 0, :] = True                                                  # query 0 of the last row sees nothing
        return mask
    raise VectorError(f"unknown mask kind {kind!r}")


def _inputs(case: dict, dims: dict, arg_names: set[str], dtype: str, rng: np.random.Generator) -> dict:
    """Every NumPy-named input of the case: arrays in ``dtype``, masks bool, sizes int."""
    b, s, d, h = dims["b"], dims["s"], dims["d"], dims["h"]
    d_k = d // h
    g = dims["g"] if "g" in arg_names else h
    s_k = dims["s_k"] if "Y" in arg_names else s
    n = lambda *shape: rng.standard_normal(shape).astype(dtype)                   # noqa: E731
    w = lambda cols: (rng.standard_normal((d, cols)) / np.sqrt(d)).astype(dtype)  # noqa: E731
    gen = {"X": lambda: n(b, s, d), "Y": lambda: n(b, s_k, d), "Wq": lambda: w(d), "Wk": lambda: w(g * d_k),
           "Wv": lambda: w(g * d_k), "Wo": lambda: w(d), "h": lambda: h, "g": lambda: g, "d": lambda: d,
           "Q": lambda: n(b, h, s, d_k), "K": lambda: n(b, h, s, d_k), "V": lambda: n(b, h, s, d_k),
           "block_size": lambda: dims["block_size"], "causal": lambda: bool(case.get("causal", False)),
           "mask": lambda: _mask(case.get("mask"), dims, s, s_k), "cache": lambda: None}
    values = {}
    for name in sorted(arg_names):
        if name in case.get("args", {}):
            values[name] = case["args"][name]
        elif name in gen:
            values[name] = gen[name]()
        elif name in dims:
            values[name] = dims[name]
        else:
            raise VectorError(f"no generator for argument {name!r}: give it in exercise.json, public.cases[].args "
                              f"or public.dims")
    return values


def _ref(name: str, value, arrays: dict):
    """An argument reference of the runner's format; arrays go into ``arrays`` as in.NAME."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return {"t": [_ref(f"{name}.{i}", v, arrays) for i, v in enumerate(value)]}
    if isinstance(value, np.ndarray):
        arrays[f"in.{name}"] = value
        return {"a": f"in.{name}"}
    return {"v": value}


def _call_spec(track: str, spec: dict, values: dict, arrays: dict) -> dict:
    """How the runner calls the track's entry: positional required arguments, optional ones by keyword (left
    out when None); a module gets its sizes, bias=False and the NumPy weights by nn.Linear name."""
    np_name = lambda n: TORCH_NAMES.get(n, n)                                    # noqa: E731
    if spec.get("style", "module" if "forward" in spec else "function") == "module":
        weights = {"linear": {f"w_{n[1:].lower()}": f"in.{n}" for n in ("Wq", "Wk", "Wv", "Wo")}}
        for n in ("Wq", "Wk", "Wv", "Wo"):
            arrays[f"in.{n}"] = values[n]
        if spec.get("fused_qkv"):
            weights["fused"] = {"qkv": ["w_q", "w_k", "w_v"]}
        weights["aliases"] = {"w_o": ["wo"]}
        return {"style": "module", "init": [_ref(n, values[np_name(n)], arrays) for n in spec["init"]],
                "init_kwargs": {"bias": {"v": False}} if "bias" in spec.get("init_kwargs", []) else {},
                "weights": weights,
                "args": [_ref(np_name(n), values[np_name(n)], arrays) for n in spec["forward"]],
                "kwargs": {n: _ref(np_name(n), values[np_name(n)], arrays) for n in spec.get("forward_kwargs", [])
                           if values.get(np_name(n)) is not None}}
    return {"style": "function", "args": [_ref(n, values[n], arrays) for n in spec["args"]],
            "kwargs": {n: _ref(n, values[n], arrays) for n in spec.get("kwargs", []) if values.get(n) is not None}}


def _arg_names(spec: dict) -> tuple[set[str], set[str]]:
    """(every NumPy-named argument, the required ones) of a track's spec."""
    required = [*spec.get("args", []), *spec.get("forward", []), *spec.get("init", [])]
    optional = [*spec.get("kwargs", []), *spec.get("forward_kwargs", [])]
    if "forward" in spec:                                                        # a module: the weights too
        required += ["Wq", "Wk", "Wv", "Wo"]
    names_ = {TORCH_NAMES.get(n, n) for n in required + optional}
    return names_, {TORCH_NAMES.get(n, n) for n in required}


def reference_module(exercise: str, track: str):
    path = REFERENCE_DIR / f"{exercise}_{track}.py"
    spec = importlib.util.spec_from_file_location(f"_kit_reference_{exercise}_{track}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_numpy(value) -> np.ndarray:
    return value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)


def build_track(exercise: str, track: str, out_dir: Path) -> list[Path]:
    """Write the track's vectors to ``out_dir`` (01-small.npz, ...); the reference computes the outputs."""
    meta_all = load(EXERCISES_DIR, exercise)
    spec = tracks_of(meta_all)[track]
    public = meta_all.get("public", {})
    dims = {**DIMS, **public.get("dims", {})}
    out_dir.mkdir(parents=True, exist_ok=True)
    if "functions" in spec:
        return _build_calls(exercise, track, spec, public.get("calls"), out_dir)
    arg_names, required = _arg_names(spec)
    numpy_spec = tracks_of(meta_all).get("numpy", spec)
    entry = getattr(reference_module(exercise, track), spec["entry"])
    written = []
    for i, case in enumerate(public.get("cases") or default_cases(arg_names, required), 1):
        dtype = case.get("dtype", "float64")
        rng = np.random.default_rng(zlib.crc32(f"{exercise}/{case['name']}".encode()))  # both tracks: same inputs
        values = _inputs(case, dims, arg_names, dtype, rng)
        arrays: dict = {}
        meta = {"exercise": exercise, "track": track, "case": case["name"], "entry": spec["entry"], "dtype": dtype,
                "outputs": spec.get("returns", numpy_spec.get("returns", "out")),
                "output_type": {"numpy": "ndarray", "torch": "tensor"}.get(track, "any"),
                "tolerance": TOLERANCE.get(dtype, 1e-10)}
        if case.get("prefix"):
            prefix_values = {**values, "X": _inputs({}, {**dims, "s": case["prefix"]}, {"X"}, dtype, rng)["X"]}
            pre_arrays: dict = {}
            pre = {**meta, **_call_spec(track, spec, prefix_values, pre_arrays)}
            result = runner.call_case(entry, pre, pre_arrays)
            values["cache"] = tuple(_as_numpy(v) for _, v in runner.outputs_of(result, meta["outputs"], track)[1:])
        meta.update(_call_spec(track, spec, values, arrays))
        meta["description"] = describe(values, case)
        result = runner.call_case(entry, meta, arrays)
        for name, value in runner.outputs_of(result, meta["outputs"], track):
            arrays[f"expect.{name}"] = _as_numpy(value)
        path = out_dir / f"{i:02d}-{case['name']}.npz"
        np.savez_compressed(path, __meta__=np.array(json.dumps(meta)), **arrays)
        written.append(path)
    return written


def _build_calls(exercise: str, track: str, spec: dict, calls: list | None, out_dir: Path) -> list[Path]:
    """A track of plain functions: one vector per call of ``public.calls`` (``{"function": NAME, "args":
    {ARG: VALUE}}``), the reference's answer kept as a plain value and compared exactly."""
    if not calls:
        raise VectorError(f"{exercise} ({track} track) is a track of functions: list its public cases in "
                          f"exercise.json as public.calls = [{{\"function\": ..., \"args\": {{...}}}}]")
    module = reference_module(exercise, track)
    counts: dict[str, int] = {}
    written = []
    for i, call in enumerate(calls, 1):
        name, args = call["function"], call.get("args", {})
        fspec = spec["functions"][name]
        counts[name] = counts.get(name, 0) + 1
        meta = {"exercise": exercise, "track": track, "case": f"{name}-{counts[name]}", "entry": name,
                "style": "function", "args": [{"v": args[n]} for n in fspec["args"]],
                "kwargs": {k: {"v": args[k]} for k in fspec.get("kwargs", []) if k in args},
                "outputs": "out", "output_type": "value", "tolerance": 0,
                "description": f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"}
        meta["expect_value"] = runner.plain(runner.call_case(getattr(module, name), meta, {}))
        path = out_dir / f"{i:02d}-{meta['case']}.npz"
        np.savez_compressed(path, __meta__=np.array(json.dumps(meta)))
        written.append(path)
    return written


def describe(values: dict, case: dict) -> str:
    """``X (2, 5, 16) float64, h=4, causal mask`` — what a candidate needs to reproduce the case."""
    parts = []
    for name, v in values.items():
        if isinstance(v, np.ndarray) and name != "mask" and name[0].isupper() and name not in ("Wq", "Wk", "Wv", "Wo"):
            parts.append(f"{name} {tuple(v.shape)} {v.dtype}")
        elif isinstance(v, (int, bool)) and not isinstance(v, np.ndarray):
            parts.append(f"{name}={v}")
    if values.get("mask") is not None:
        parts.append(f"{case.get('mask', 'a')} mask {tuple(values['mask'].shape)}")
    if values.get("cache") is not None:
        parts.append(f"cache of {values['cache'][0].shape[2]} tokens")
    return ", ".join(parts)


def tracks(exercise: str) -> list[str]:
    return list(tracks_of(load(EXERCISES_DIR, exercise)))


def build_all(out_root: Path, *, exercises: list[str] | None = None, skip=lambda exercise, track: False,
              ) -> dict[tuple[str, str], list[Path]]:
    """Every exercise's vectors under ``out_root/<exercise>/vectors/<track>/``."""
    built = {}
    for exercise in exercises or names(EXERCISES_DIR):
        for track in tracks(exercise):
            if not skip(exercise, track):
                built[exercise, track] = build_track(exercise, track, out_root / exercise / "vectors" / track)
    return built


def cached(exercise: str, track: str) -> Path:
    """The vectors of one track for the full package's `grade check`, built once per version of their inputs
    (the exercise, its reference, this builder and the runner) in the user's cache folder."""
    inputs = [EXERCISES_DIR / exercise / "exercise.json", REFERENCE_DIR / f"{exercise}_{track}.py",
              Path(__file__), Path(runner.__file__)]
    key = hashlib.sha256(b"".join(p.read_bytes() for p in inputs if p.is_file())).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attention-grader" / "vectors"
    final = root / key / exercise / track
    if not any(final.glob("*.npz")):
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{track}-", dir=final.parent))
        try:
            build_track(exercise, track, tmp)
            try:
                tmp.rename(final)
            except OSError:  # another process built it first
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final
