"""The `candidate` the hidden suites talk to: a proxy that turns a :class:`Case` into worker requests.

The suite never sees the candidate's objects, only plain arrays the worker sent back; every check runs here,
in the trusted process. The proxy knows the exercise's calling convention (exercise.json) and, on the torch
track, loads the case's weights into the candidate's parameter layout (separate w_q/w_k/w_v/w_o or fused qkv).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterable, Iterator

import numpy as np

from harness.core.case import Case
from harness.session.channel import HOST_MEMORY, READ_BACK, WorkerSession
from harness.core.errors import CandidateException, WorkerFault
from harness.core.exercises import Exercise
from harness.session.layouts import WEIGHTS, Layout, StructureError, expected_layouts, match_layout  # noqa: F401
from harness.worker import wire

ARG_FIELDS = {"X": "x", "x": "x", "Y": "y", "context": "y", "Wq": "wq", "Wk": "wk", "Wv": "wv", "Wo": "wo",
              "mask": "mask", "cache": "cache"}
INT_FIELDS = {"h": "h", "n_heads": "h", "g": "g", "n_kv_heads": "g"}
def forged(key: str, value: np.ndarray, shape: tuple, dtype) -> WorkerFault:
    """An array no honest worker can send (a gradient whose shape or dtype is not its argument's): the
    candidate's process wrote it, so it is the candidate's failure, like any malformed frame."""
    detail = (f"the worker sent {key!r} with shape {list(value.shape)} and dtype {value.dtype}; "
              f"expected shape {list(shape)} and dtype {np.dtype(dtype)}")
    return WorkerFault("error", f"malformed frame from the worker: {detail}", {"protocol_error": detail})


def gradients(out: dict, sent: dict) -> dict:
    """The gradients of the arguments in ``sent`` (name -> the array sent), each checked against its argument's
    shape and dtype before anyone uses it; gradients of arguments never sent are dropped."""
    grads = {}
    for name, before in sent.items():
        got = out.get(wire.GRAD + name)
        if got is None:
            continue
        if got.shape != before.shape or got.dtype != before.dtype:
            raise forged(wire.GRAD + name, got, before.shape, before.dtype)
        grads[name] = got
    return grads


def inputs_after(out: dict, sent: dict) -> dict:
    """The arguments as the candidate left them, for those that were sent (a different shape or dtype is a
    mutation the suite reports; an argument never sent is dropped)."""
    return {name: out[wire.INPUT + name] for name in sent if wire.INPUT + name in out}


@dataclasses.dataclass
class Result:
    out: np.ndarray | None             # the output, when it was a plain array/tensor of a sendable dtype
    info: dict                         # type, dtype (torch), exact_type, unsendable_dtype, too_large
    grads: dict                        # case-space names: x, y, wq, ..., bo
    inputs_after: dict                 # case-space names -> the arrays as the candidate left them
    flops: int | None = None
    tree: object = None                # a tuple output: nested lists of leaf indices (requests with "tree")
    leaves: list = dataclasses.field(default_factory=list)  # [(info, array or None)] per leaf of the tree
    memory: dict | None = None         # call(memory=True): the worker's own figure: peak_bytes (+ method, ...)
    host_memory: dict | None = None    # call(memory=True): the host's figure from the worker's cgroup, or unavailable
    read_back: tuple = ()              # names in inputs_after the host read back itself (the rest: the worker's word)
    absent: tuple = ()                 # case fields the module has no parameter for (a missing bias, held at zero)
    value: object = None               # call_function: the returned value (ints, tuples, dicts; wire.Opaque others)


def _refuses_bias(exc: CandidateException) -> bool:
    """The constructor raised because of the ``bias`` keyword (``unexpected keyword argument 'bias'``)."""
    return exc.phase == "init" and exc.exc_type == "TypeError" and "bias" in (exc.exc_message or "")


class Candidate:
    """Proxy to the candidate's entry point in the sandbox worker."""

    def __init__(self, session: WorkerSession, exercise: Exercise, track: str):
        self.session, self.exercise, self.track = session, exercise, track
        self.spec = exercise.track(track)
        self._module_key = None
        self._layout: Layout | None = None
        self._layout_error: StructureError | None = None
        self._source: str | None = None
        self.layout_check: str | None = None  # where the parameter layout was checked (the static read or not)
        self.bias_refused: str | None = None  # the constructor's exception when it was given bias=False
        self.calls = 0

    # -- torch structure --------------------------------------------------------------------------
    def build(self, *, d: int, h: int, g: int | None = None, bias: bool = True) -> Layout:
        """Construct the module (if not already built with these arguments) and match its parameter layout.

        The constructor gets its required arguments positionally, ``(d_model, n_heads[, n_kv_heads])``, and
        ``bias`` only when it is False (True is the contract's default). A constructor that refuses ``bias`` is
        built without it and its biases held at zero; only the tests about ``bias=False`` fail for it
        (:meth:`require_bias_kwarg`)."""
        key = (d, h, g, bias)
        if key != self._module_key:
            ctor = {"d_model": d, "n_heads": h, "n_kv_heads": g if g is not None else h}
            args = [ctor[name] for name in self.spec["init"]]
            wants = not bias and "bias" in self.spec.get("init_kwargs", [])
            kwargs = {"bias": False} if wants and self.bias_refused is None else {}
            self._module_key = None
            try:
                head, _ = self.session.request({"op": "init", "args": args, "kwargs": kwargs})
            except CandidateException as exc:
                if not (kwargs and _refuses_bias(exc)):
                    raise
                self.bias_refused = exc.exc_message or str(exc)
                kwargs = {}
                head, _ = self.session.request({"op": "init", "args": args, "kwargs": kwargs})
            self._module_key = key
            self._layout, self._layout_error = None, None
            d_kv = (g if g is not None else h) * (d // h)
            try:
                self._cross_check(head.get("params", []), args, kwargs)
                self._layout = match_layout(self.exercise, head.get("params", []), bias, d, d_kv)
                if wants and not kwargs:  # built without bias=False: its biases are held at zero
                    self._layout.deviations.pop("extra_bias", None)
                    self._layout.deviations["constructor_without_bias"] = self.bias_refusal()
            except StructureError as exc:
                self._layout_error = exc
                self._params = head.get("params", [])
        if self._layout_error:
            raise self._layout_error
        return self._layout

    def bias_refusal(self) -> str:
        init = ", ".join(self.spec["init"])
        return (f"the constructor does not accept bias=False ({self.bias_refused}); the contract's constructor is "
                f"{self.spec['entry']}({init}, bias=True)")

    def require_bias_kwarg(self, *, d: int, h: int, g: int | None = None) -> Layout:
        """For the tests about ``bias=False``: the module built with it, or a StructureError saying the
        constructor refuses it."""
        layout = self.build(d=d, h=h, g=g, bias=False)
        if self.bias_refused is not None:
            raise StructureError(self.bias_refusal(), {"deviation": "constructor_without_bias"})
        return layout

    def fit(self, case: Case) -> Case:
        """``case`` as the module can compute it: a bias the module does not have is held at zero (torch track;
        the reference then has the same deviation, see harness/session/layouts.py)."""
        if self.track != "torch" or not case.has_bias:
            return case
        try:
            layout = self.build(d=case.d, h=case.h, g=case.g, bias=True)
        except StructureError:
            return case
        if not layout.absent:
            return case
        return case.replace(**{f: np.zeros_like(getattr(case, f)) for f in layout.absent})

    def _cross_check(self, reported: list[dict], args: list, kwargs: dict) -> None:
        """The worker's parameter list against a static read of the file (harness/session/static_layout.py):
        a report the file contradicts is a structure failure; where the file cannot be read for certain, the
        report stands (``layout_check`` says which)."""
        from harness.session.static_layout import declared_parameters

        if self._source is None:
            try:
                self._source = self.session.submission.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError, AttributeError):
                self._source = ""
        declared = declared_parameters(self._source, self.session.entry, args, kwargs)
        self.layout_check = "host: static read" if declared.params is not None else \
            f"worker's report (the file cannot be read statically: {declared.reason})"
        wrong = declared.disagreement(reported)
        if wrong:
            raise StructureError(f"the module's parameters do not match its source: {wrong}",
                                 {"reported": [p["name"] for p in reported][:50],
                                  "declared": sorted(declared.params)[:50]})

    def parameters(self, *, d: int, h: int, g: int | None = None, bias: bool = True) -> list[dict]:
        """The module's declared parameters (name, shape, dtype), whatever their layout."""
        try:
            return self.build(d=d, h=h, g=g, bias=bias).params
        except StructureError:
            return self._params

    # -- running ----------------------------------------------------------------------------------
    def run(self, case: Case, *, layout: str = "C", mode: str = "eval", grad_output: np.ndarray | None = None,
            return_inputs: bool = False, flops: bool = False) -> Result:
        """Run the candidate on ``case`` (its arrays already in the dtype under test)."""
        self.calls += 1
        if self.track == "numpy":
            return self._run_numpy(case, layout, return_inputs)
        return self._run_torch(case, layout, mode, grad_output, return_inputs, flops)

    def call(self, arrays: dict, values: dict | None = None, *, layout: str = "C",
             grad_output: np.ndarray | None = None, memory: bool = False, return_inputs: bool = False) -> Result:
        """Call a function-style entry point (both tracks; exercise.json lists its ``args`` and ``kwargs`` by
        name): array arguments from ``arrays`` (tensors on the torch track), ints and bools from ``values``; a
        keyword whose value is None or absent is not passed. On the torch track ``grad_output`` makes every
        array argument require grad and brings back their gradients by name; ``memory`` measures the call's peak
        extra memory: the host from the worker's cgroup (``Result.host_memory``), the worker itself beside it
        (``Result.memory``, a diagnostic)."""
        self.calls += 1
        values = values or {}
        send: dict = {}
        grad = grad_output is not None and self.track == "torch"

        def spec(name: str) -> dict:
            if name in arrays:
                send[name] = arrays[name]
                out = {"array": name}
                if layout != "C":
                    out["layout"] = layout
                if grad:
                    out["requires_grad"] = True
                return out
            value = values.get(name)
            if value is None:
                return {"none": True}
            return {"bool": bool(value)} if isinstance(value, (bool, np.bool_)) else {"int": int(value)}

        args = [spec(n) for n in self.spec["args"]]
        kwargs = {n: spec(n) for n in self.spec.get("kwargs", []) if n in arrays or values.get(n) is not None}
        req = {"op": "call", "args": args, "kwargs": kwargs, "return_inputs": return_inputs}
        if memory:
            req[wire.MEMORY] = True
        if grad:
            send[wire.GRAD_OUTPUT] = grad_output
            req["grad_output"] = wire.GRAD_OUTPUT
        head, out = self.session.request(req, send, readback=return_inputs)
        args = {k: v for k, v in send.items() if k != wire.GRAD_OUTPUT}
        grads = gradients(out, args) if grad else {}
        inputs = inputs_after(out, args)
        return Result(out.get(wire.OUT), head.get("output", {}), grads, inputs, memory=head.get(wire.MEMORY),
                      read_back=tuple(head.get(READ_BACK, ())), host_memory=head.get(HOST_MEMORY))

    def call_function(self, function: str, values: dict) -> Result:
        """Call one of a "functions" track's plain functions (exercise.json's ``functions`` table lists its
        ``args`` and ``kwargs``) with ints and bools from ``values`` (a keyword absent or None is not passed);
        ``Result.value`` is what it returned, decoded on the host (wire.decode_value) with its types as the
        worker named them: an int is an int (exact, however large), a NumPy integer a ``wire.Opaque``."""
        self.calls += 1
        spec = self.exercise.functions(self.track)[function]

        def arg(value: object) -> dict:
            return {"bool": value} if type(value) is bool else {"int": int(value)}

        args = [arg(values[n]) for n in spec.get("args", [])]
        kwargs = {n: arg(values[n]) for n in spec.get("kwargs", []) if values.get(n) is not None}
        req = {"op": "call", wire.FUNCTION: function, "args": args, "kwargs": kwargs, wire.VALUE: True}
        head, _ = self.session.request(req, {})
        return Result(None, {}, {}, {}, value=head.get(wire.VALUE))

    def _spec(self, name: str, case: Case, arrays: dict, layout: str, **extra) -> dict:
        if name in INT_FIELDS:
            return {"int": int(getattr(case, INT_FIELDS[name]))}
        field = ARG_FIELDS[name]
        value = getattr(case, field)
        if value is None:
            return {"none": True}
        if isinstance(value, tuple):  # a tuple of arrays (a KV cache): sent as field.0, field.1, ...
            for i, item in enumerate(value):
                arrays[f"{field}.{i}"] = item
            return {"tuple": [{"array": f"{field}.{i}"} for i in range(len(value))]}
        arrays[field] = value
        spec = {"array": field}
        if field != "mask" and layout != "C":
            spec["layout"] = layout
        spec.update(extra)
        return spec

    def run_many(self, cases: Iterable[Case]) -> Iterator[Result | CandidateException]:
        """:meth:`run` (default arguments) on each case in turn: the Result, or the CandidateException that run
        would raise (the next case still runs); a WorkerFault is raised and ends it. On the NumPy track the
        requests go ahead of their answers (WorkerSession.pipeline): the worker computes the next cases while
        the caller checks this one. Elsewhere (a torch case may build its module first) one call after another.
        ``cases`` is drawn lazily, a few ahead of the answer being yielded."""
        if self.track != "numpy":
            for case in cases:
                try:
                    yield self.run(case)
                except CandidateException as exc:
                    if exc.phase == "import":
                        raise
                    yield exc
            return
        sent: list[dict] = []

        def requests():
            for case in cases:
                self.calls += 1
                req, arrays = self._numpy_request(case, "C", False)
                sent.append(arrays)
                yield req, arrays

        with contextlib.closing(self.session.pipeline(requests())) as answers:
            for i, answer in enumerate(answers):
                if isinstance(answer, CandidateException):
                    yield answer
                else:
                    yield self._numpy_result(answer, sent[i])
                sent[i] = None  # the arrays are the caller's to keep; the list need not

    def _numpy_request(self, case: Case, layout: str, return_inputs: bool) -> tuple[dict, dict]:
        arrays: dict = {}
        args = [self._spec(n, case, arrays, layout) for n in self.spec["args"]]
        kwargs = {n: self._spec(n, case, arrays, layout) for n in self.spec.get("kwargs", [])
                  if getattr(case, ARG_FIELDS.get(n, INT_FIELDS.get(n, "")), None) is not None}
        req = {"op": "call", "args": args, "kwargs": kwargs, "return_inputs": return_inputs}
        if self.spec.get("returns"):
            req["tree"] = True
        return req, arrays

    def _numpy_result(self, answer: tuple[dict, dict], arrays: dict) -> Result:
        head, out = answer
        inputs = inputs_after(out, arrays)
        return self._with_tree(Result(out.get(wire.OUT), head.get("output", {}), {}, inputs,
                                      read_back=tuple(head.get(READ_BACK, ()))), head, out)

    def _run_numpy(self, case: Case, layout: str, return_inputs: bool) -> Result:
        req, arrays = self._numpy_request(case, layout, return_inputs)
        return self._numpy_result(self.session.request(req, arrays, readback=return_inputs), arrays)

    @staticmethod
    def _with_tree(result: Result, head: dict, out: dict) -> Result:
        """A tuple output's structure and leaves (the header was validated by the channel)."""
        if "tree" in head:
            result.tree = head["tree"]
            result.leaves = [(info, out.get(wire.LEAF + str(i))) for i, info in enumerate(head.get("leaves", []))]
        return result


    def _run_torch(self, case, layout, mode, grad_output, return_inputs, flops) -> Result:
        lay = self.build(d=case.d, h=case.h, g=case.g, bias=case.has_bias)
        dtype = str(case.x.dtype)
        arrays: dict = {}
        state = {}
        values = {"wq": case.wq.T, "wk": case.wk.T, "wv": case.wv.T, "wo": case.wo.T,
                  "bq": case.bq, "bk": case.bk, "bv": case.bv, "bo": case.bo}
        if lay.kind == "fused":
            values["wqkv"] = np.concatenate([case.wq.T, case.wk.T, case.wv.T], axis=0)
            if case.has_bias:
                values["bqkv"] = np.concatenate([case.bq, case.bk, case.bv])
        shapes = {p["name"]: tuple(p["shape"]) for p in lay.params}
        for field, pname in lay.names.items():
            value = values.get(field)
            if value is None:  # a bias the case does not have (bias=False): held at zero
                value = np.zeros(shapes[pname], dtype=case.x.dtype)
            arrays[wire.WEIGHT + field] = np.ascontiguousarray(value)
            state[pname] = wire.WEIGHT + field
        grad = grad_output is not None
        args = [self._spec(n, case, arrays, layout, requires_grad=grad and n not in ("mask", "cache"))
                for n in self.spec["forward"]]
        kwargs = {n: self._spec(n, case, arrays, layout) for n in self.spec.get("forward_kwargs", [])
                  if getattr(case, ARG_FIELDS[n], None) is not None}
        req = {"op": "forward", "state": state, "dtype": dtype, "mode": mode, "args": args, "kwargs": kwargs,
               "return_inputs": return_inputs, "flops": flops}
        if self.spec.get("returns"):
            req["tree"] = True
        if grad:
            arrays[wire.GRAD_OUTPUT] = grad_output
            req["grad_output"] = wire.GRAD_OUTPUT
        head, out = self.session.request(req, arrays, readback=return_inputs)
        args = {k: v for k, v in arrays.items() if not k.startswith(wire.WEIGHT) and k != wire.GRAD_OUTPUT}
        grads = gradients(out, {k: v for k, v in args.items() if k not in ("mask",) and not k.startswith("cache")}) \
            if grad else {}
        inputs = inputs_after(out, args)
        declared = {p["name"]: tuple(p["shape"]) for p in lay.params}
        for field, pname in lay.names.items():
            for prefix, target in ((wire.GRAD, grads), (wire.INPUT, inputs)):
                value = out.get(prefix + wire.PARAM + pname)
                if value is None or (prefix == wire.GRAD and not grad):
                    continue
                if value.shape != declared[pname] or (prefix == wire.GRAD and value.dtype != np.dtype(dtype)):
                    if prefix == wire.GRAD:
                        raise forged(prefix + wire.PARAM + pname, value, declared[pname], dtype)
                    parts = {"wqkv": ("wq", "wk", "wv"), "bqkv": ("bq", "bk", "bv")}.get(field, (field,))
                    target.update({name: value for name in parts})   # reshaped in place: the suite says so
                elif field == "wqkv":   # (3d, d), checked above
                    for part, name in zip(np.split(value, 3, axis=0), ("wq", "wk", "wv")):
                        target[name] = part.T
                elif field == "bqkv":
                    for part, name in zip(np.split(value, 3), ("bq", "bk", "bv")):
                        target[name] = part
                else:
                    target[field] = value.T if field.startswith("w") else value
        return self._with_tree(Result(out.get(wire.OUT), head.get("output", {}), grads, inputs, head.get("flops"),
                                      read_back=tuple(head.get(READ_BACK, ())), absent=lay.absent), head, out)
