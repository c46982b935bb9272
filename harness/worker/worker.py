"""The sandbox worker: the only process that imports and runs the candidate's file.

Runs as ``python -I worker.py --track numpy|torch|python --entry NAME SUBMISSION``, inside the sandbox, with only
the standard library, NumPy (and torch for the torch track) and ``wire.py`` beside it. It answers requests from
the host over stdin/stdout frames and never decides whether anything is right: it only runs the candidate and
returns plain arrays, or (the python track, request flag ``value``) plain values as a tagged JSON tree. With
``--entry '*'`` (``wire.MODULE_ENTRY``) it serves the module itself and each call names its function. The
candidate's own prints go to stderr (fd 1 is moved away from the protocol pipe).

A *warm* worker (``--warm --root DIR``, or a child forked by the local zygote, ``zygote.py``) does its imports and
a warm-up ahead of time, sends ``idle`` and waits for a ``load`` request carrying the entry point and the file's
bytes; it writes them to ``DIR/submission.py``, sends ``boot`` (everything before this is the grader's, nothing
of the candidate's has run) and continues exactly like a cold worker. It serves one submission, then exits.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import select
import sys
import threading
from time import perf_counter
from types import ModuleType
from typing import BinaryIO


def _without_site() -> None:
    """A local worker (and its zygote) starts without ``site`` (``-S``, harness/sandbox/local.py ``site_dirs``): no
    .pth file's code runs in it (an editable install's finder, a host's certificate hook: 15-40 ms of a cold
    start, and code of the host's in the sandbox). The host names the folders ``site`` would have put on
    ``sys.path`` (``--site-dirs``, a JSON list), and the builtins ``site`` sets (exit, quit, help...) are set as
    it sets them. A worker started with ``site`` (docker's) has nothing to do here."""
    if not sys.flags.no_site:
        return
    import json
    import site

    if "--site-dirs" in sys.argv[:-1]:
        dirs = json.loads(sys.argv[sys.argv.index("--site-dirs") + 1])
        sys.path.extend(d for d in dirs if isinstance(d, str) and d not in sys.path)
    site.setquit()
    site.setcopyright()
    site.sethelper()


_without_site()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402  (sibling module, copied next to this file in every sandbox)

del sys.path[0]

import numpy as np  # noqa: E402

BLOCKED_PACKAGES = ("harness", "graders", "reference", "exercises")
TRIPWIRES: list[str] = []
# Set (to "1") for a worker whose memory the host meters (harness/sandbox/base.py malloc_env): before every answer it
# hands back to the system what malloc holds free (malloc_trim), so its usage between calls follows what it holds.
TRIM_ENV = "GRADER_WORKER_TRIM"
MAX_TEXT = 4000


class _BlockGrader:
    """Makes the grader's own packages unimportable from candidate code. A finder on ``sys.meta_path`` needs only
    ``find_spec``: not subclassing ``importlib.abc.MetaPathFinder`` spares every cold worker that module's import
    (~13 ms: in Python 3.11 it pulls in importlib.resources, pathlib, tempfile, urllib...)."""

    def find_spec(self, name: str, path=None, target=None) -> None:
        if name.split(".")[0] in BLOCKED_PACKAGES:
            raise ImportError(f"module {name!r} is not available in the sandbox")
        return None


def _candidate_traceback(exc: BaseException, path: str) -> str:
    try:  # only when the candidate's code raised, not on every worker's start (~3 ms)
        import traceback
    except Exception:  # e.g. a MemoryError while the candidate's frames still hold its arrays: no frames then
        return ""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    lines = traceback.format_list(frames[-8:])
    return "".join(lines)[-MAX_TEXT:]


def _error(exc: BaseException, path: str, phase: str) -> dict:
    try:
        message = str(exc)
    except BaseException:  # a hostile __str__
        message = "<unprintable exception>"
    return {"kind": wire.ERROR, "phase": phase, "type": type(exc).__name__[:100], "message": message[:MAX_TEXT],
            "traceback": _candidate_traceback(exc, path)}


def _install_tripwires(torch) -> None:
    F = torch.nn.functional

    def wrap(owner, attr, label):
        original = getattr(owner, attr)

        def tripped(*args, **kwargs):
            if label not in TRIPWIRES:
                TRIPWIRES.append(label)
            return original(*args, **kwargs)

        setattr(owner, attr, tripped)

    wrap(F, "scaled_dot_product_attention", "F.scaled_dot_product_attention")
    wrap(F, "multi_head_attention_forward", "F.multi_head_attention_forward")
    original_init = torch.nn.MultiheadAttention.__init__

    def init(self, *args, **kwargs):
        if "nn.MultiheadAttention" not in TRIPWIRES:
            TRIPWIRES.append("nn.MultiheadAttention")
        original_init(self, *args, **kwargs)

    torch.nn.MultiheadAttention.__init__ = init


def _exit_when_orphaned() -> None:
    """Exit as soon as the host's end of stdin is gone (the grader died), even while the candidate's code is
    still running: a container whose grader was killed must not keep burning CPU until its limits stop it."""
    poller = select.poll()
    poller.register(0, select.POLLHUP | select.POLLERR)  # POLLIN deliberately not asked for
    while True:
        if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in poller.poll(500)):
            os._exit(0)  # same as a clean end of input: the host is done with us, or gone


def _flop_counter(torch: ModuleType):
    """A FlopCounterMode, without the ~1.3 s import of torch._dynamo its first use triggers: its dispatch hook
    is wrapped in torch._disable_dynamo, which imports dynamo lazily; nothing is compiled in this process, so
    the raw hook is marked as already dynamo-disabled."""
    from torch.utils import flop_counter

    for value in vars(flop_counter).values():
        hook = isinstance(value, type) and value.__dict__.get("__torch_dispatch__")
        raw = getattr(hook, "__wrapped__", None)
        if raw is not None and not hasattr(raw, "__dynamo_disable"):
            raw.__dynamo_disable = raw
    return flop_counter.FlopCounterMode(display=False)


def _storage_meter(torch: ModuleType):
    """A TorchDispatchMode that counts the bytes of tensor storage allocated while it is active and still alive,
    and their peak. Only fresh results count (an op whose schema says its result aliases an input, a view or an
    in-place op, allocates nothing); a weakref callback on each storage takes its bytes off when it is freed.
    Kept lean (one dict lookup per op): it runs on every aten op of the measured call."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    Tensor = torch.Tensor

    class LiveStorage(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # else __torch_dispatch__ is wrapped in torch._disable_dynamo: a ~1.5 s dynamo import

        def __init__(self):
            super().__init__()
            self.live = self.peak = 0
            self.refs: dict[int, tuple] = {}       # id(storage) -> (weakref, nbytes)
            self.fresh: dict[object, bool] = {}    # op -> its results are new allocations

        def _track(self, t) -> None:
            try:
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError):  # a tensor without a plain storage
                return
            key = id(storage)
            if key not in self.refs:
                n = storage.nbytes()
                self.refs[key] = (weakref.ref(storage, lambda _, key=key: self._free(key)), n)
                self.live += n
                if self.live > self.peak:
                    self.peak = self.live

        def _free(self, key: int) -> None:
            entry = self.refs.pop(key, None)
            if entry is not None:
                self.live -= entry[1]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            fresh = self.fresh.get(func)
            if fresh is None:
                fresh = self.fresh[func] = not any(r.alias_info is not None for r in func._schema.returns)
            if fresh:
                if isinstance(out, Tensor):
                    self._track(out)
                elif isinstance(out, (tuple, list)):
                    for t in out:
                        if isinstance(t, Tensor):
                            self._track(t)
            return out

    return LiveStorage()


def warm_up(track: str) -> None:
    """Import what a worker needs and run one small attention-shaped forward and backward (float32 and float64,
    with a mask, and a FLOP count), so that a warm worker pays none of torch's lazy initialisation on the
    candidate's clock. Runs single-threaded: a process that ran multi-threaded OpenMP work must never fork."""
    import importlib.util  # noqa: F401
    import platform  # noqa: F401

    np.random.default_rng(0).standard_normal((2, 3, 4)) @ np.ones((4, 4))
    if track != "torch":
        return
    import torch

    torch.set_num_threads(1)
    for dtype in (torch.float32, torch.float64):
        lin = torch.nn.Linear(8, 24).to(dtype)
        out = torch.nn.Linear(8, 8).to(dtype)
        x = torch.randn(2, 3, 8, dtype=dtype, requires_grad=True)
        q, k, v = lin(x).split(8, dim=-1)
        mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)
        scores = (q.view(2, 3, 2, 4).transpose(1, 2) @ k.view(2, 3, 2, 4).transpose(1, 2).transpose(-2, -1)) / 2.0
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        y = out((weights @ v.view(2, 3, 2, 4).transpose(1, 2)).transpose(1, 2).reshape(2, 3, 8))
        (y * torch.ones_like(y)).sum().backward()
        y.detach().numpy()
    counter = _flop_counter(torch)
    with counter, torch.no_grad():
        torch.nn.Linear(4, 4)(torch.ones(1, 4))


def reseed() -> None:
    """Fresh random state, as a new interpreter has: Python's, NumPy's and torch's global generators seeded from
    the OS's entropy (torch, like the others, starts from a nondeterministic seed in a fresh interpreter)."""
    import random

    random.seed()
    np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


class Worker:
    def __init__(self, track: str, entry: str, path: str, proto_out: BinaryIO):
        self.track, self.entry, self.path, self.out = track, entry, path, proto_out
        self.torch = None
        self.module = None
        self.target = None
        self.exchange_fd: int | None = None  # the host's input exchange (see harness/sandbox/exchange.py)
        self.trim = os.environ.get(TRIM_ENV) == "1"  # metered: free memory back before every answer (TRIM_ENV)
        self.spent = 0.0  # seconds in the candidate's own code during this request (CALL_S)

    # -- plumbing ---------------------------------------------------------------------------------
    def send(self, header: dict, arrays: dict | None = None) -> None:
        if self.trim:  # before the answer, so the host's next reading (it meters after the answer) sees it done
            _malloc_trim()
        header = dict(header, tripwires=list(TRIPWIRES))
        self.out.write(wire.encode_frame(header, arrays))  # whole: a buffered writer (protocol_stdout)
        self.out.flush()

    def read_frame(self) -> tuple[dict | None, dict | None]:
        prefix = sys.stdin.buffer.read(wire.HEADER.size)
        if len(prefix) < wire.HEADER.size:
            return None, None
        head, specs = wire.parse_header(sys.stdin.buffer.read(wire.parse_prefix(prefix)))
        arrays = {name: wire.decode_array(sys.stdin.buffer.read(n)) for name, n in specs}
        return head, arrays

    # -- the input exchange -----------------------------------------------------------------------
    def open_exchange(self, path: str | None, fd: int | None) -> None:
        """The host's exchange file: a path (Docker: a bind mount) or an inherited descriptor (local)."""
        try:
            self.exchange_fd = os.open(path, os.O_RDWR | os.O_CLOEXEC) if path else fd
        except OSError:
            self.exchange_fd = None

    def exchange_handshake(self) -> None:
        """Before the boot frame (nothing of the candidate's has run): write the complement of the host's 16-byte
        nonce beside it through a shared mapping; the host checks it reached its file (a coherent mapping)."""
        if self.exchange_fd is None:
            return
        try:
            with mmap.mmap(self.exchange_fd, 32, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as m:
                m[16:32] = bytes(b ^ 0xFF for b in m[:16])
        except (OSError, ValueError):
            self.exchange_fd = None

    def _shared(self, spec: dict) -> np.ndarray:
        """An argument as a view of the host's exchange: the candidate works on memory the host reads back."""
        if self.exchange_fd is None:
            raise ValueError("a shared argument without an exchange")
        dtype = np.dtype(spec["dtype"])
        if dtype.str not in wire.ALLOWED_DTYPES:
            raise ValueError("bad shared dtype")
        region = mmap.mmap(self.exchange_fd, max(int(spec["nbytes"]), 1), mmap.MAP_SHARED,
                           mmap.PROT_READ | mmap.PROT_WRITE, offset=int(spec["offset"]))
        return np.ndarray(tuple(spec["shape"]), dtype=dtype, buffer=region, offset=int(spec["skip"]),
                          strides=tuple(spec["strides"]))

    # -- start-up ---------------------------------------------------------------------------------
    def boot(self) -> dict:
        """The worker's own start-up, before anything of the candidate's is read: a worker that dies before
        its boot frame is the grader's fault (the host retries it, then reports an infrastructure error)."""
        if self.track == "torch":
            import torch

            torch.set_num_threads(1)
            self.torch = torch
            _install_tripwires(torch)
        sys.meta_path.insert(0, _BlockGrader())
        return {"kind": wire.BOOT}

    def start(self) -> dict:
        spec = importlib.util.spec_from_file_location("submission", self.path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # SystemExit, KeyboardInterrupt included: all are the candidate's
            return _error(exc, self.path, "import")
        target = module if self.entry == wire.MODULE_ENTRY else getattr(module, self.entry, None)
        if target is None:
            defined = sorted(n for n in vars(module) if not n.startswith("_"))[:30]
            return {"kind": wire.ERROR, "phase": "import", "type": "MissingEntryPoint",
                    "message": f"the file defines no {self.entry!r}; it defines: {', '.join(defined) or 'nothing'}",
                    "traceback": ""}
        self.target = target
        import platform

        versions = {"python": platform.python_version(), "numpy": np.__version__}
        if self.torch is not None:
            versions["torch"] = self.torch.__version__
        return {"kind": wire.READY, "versions": versions}

    # -- argument building ------------------------------------------------------------------------
    def _value(self, spec: object, arrays: dict) -> object:
        if not isinstance(spec, dict):
            raise ValueError("bad argument spec")
        if "int" in spec:
            return int(spec["int"])
        if "bool" in spec:
            return bool(spec["bool"])
        if spec.get("none"):
            return None
        if "tuple" in spec:  # e.g. a KV cache (K, V): a tuple of arrays (tensors on the torch track)
            return tuple(self._value(s, arrays) for s in spec["tuple"][:wire.MAX_LEAVES])
        tensor = self.track == "torch" and spec.get("tensor", True)
        if "shared" in spec:  # already in its layout, in the host's memory
            arr = self._shared(spec["shared"])
        else:
            given = arrays[spec["array"]]
            _, arr = wire.arrange(given, spec.get("layout", "C"), self.track, spec.get("tensor", True))
            if tensor and arr is given:  # a tensor of its own, never one that shares a pipe array's memory
                arr = np.array(given, copy=True)
        if tensor:
            t = self.torch.from_numpy(arr)
            return t.requires_grad_(True) if spec.get("requires_grad") else t
        return arr

    @staticmethod
    def _to_numpy(obj: object, torch: ModuleType) -> np.ndarray:
        if torch is not None and isinstance(obj, torch.Tensor):
            t = obj.detach()
            if t.dtype == torch.bfloat16:
                t = t.float()
            return t.cpu().numpy()
        return np.asarray(obj)

    def _describe_output(self, out: object) -> tuple[dict, np.ndarray | None]:
        torch = self.torch
        expected = torch.Tensor if self.track == "torch" else np.ndarray
        kind = type(out)
        info = {"type": f"{kind.__module__}.{kind.__qualname__}"[:200]}
        if kind is not expected:
            info["exact_type"] = False
            return info, None
        info["exact_type"] = True
        if torch is not None:
            info["dtype"] = str(out.dtype).replace("torch.", "")
            info["requires_grad"] = bool(out.requires_grad)
        arr = self._to_numpy(out, torch)
        if arr.dtype.hasobject or arr.dtype.str not in wire.ALLOWED_DTYPES:
            info["unsendable_dtype"] = str(arr.dtype)
            return info, None
        if arr.nbytes > wire.MAX_ARRAY_BYTES or arr.ndim > wire.MAX_NDIM:
            info["too_large"] = [int(n) for n in arr.shape[:16]]
            return info, None
        return info, arr

    def _describe_tree(self, out: object) -> tuple[dict, dict, list]:
        """A tuple output (e.g. ``(out, (K, V))``): the nesting as lists of leaf indices, each leaf described like
        a single output and its array sent as LEAF + index. The host decides whether the structure is right."""
        leaves: list = []

        def walk(node: object, depth: int) -> object:
            if isinstance(node, (tuple, list)) and depth < wire.MAX_TREE_DEPTH:
                items = list(node)[:wire.MAX_LEAVES + 1]
                return [walk(item, depth + 1) for item in items]
            if len(leaves) >= wire.MAX_LEAVES:
                raise ValueError(f"the output holds more than {wire.MAX_LEAVES} values")
            leaves.append(node)
            return len(leaves) - 1

        kind = type(out)
        whole = {"type": f"{kind.__module__}.{kind.__qualname__}"[:200], "exact_type": False}
        if not isinstance(out, (tuple, list)):
            return {"output": whole}, {}, []
        tree = walk(out, 0)
        infos, send = [], {}
        for i, leaf in enumerate(leaves):
            info, arr = self._describe_output(leaf)
            infos.append(info)
            if arr is not None:
                send[wire.LEAF + str(i)] = arr
        return {"output": whole, "tree": tree, "leaves": infos}, send, leaves

    def _inputs_after(self, send: dict, spec: object, value: object, kind: type) -> None:
        """The arguments as the candidate left them (for the mutation check), tuples of arrays included."""
        if not isinstance(spec, dict):
            return
        if "array" in spec and "shared" not in spec and isinstance(value, kind):  # shared: the host reads it
            send[wire.INPUT + spec["array"]] = self._to_numpy(value, self.torch).copy()
        elif "tuple" in spec and isinstance(value, tuple):
            for sub, item in zip(spec["tuple"], value):
                self._inputs_after(send, sub, item, kind)

    # -- requests ---------------------------------------------------------------------------------
    def handle(self, req: dict, arrays: dict) -> tuple[dict, dict]:
        op = req.get("op")
        if op == "call":
            return self.op_call(req, arrays)
        if op == "init":
            return self.op_init(req)
        if op == "forward":
            return self.op_forward(req, arrays)
        if op == "ping":
            return {"kind": "pong"}, {}
        return {"kind": wire.ERROR, "phase": "protocol", "type": "BadRequest", "message": f"unknown op {op!r}",
                "traceback": ""}, {}

    def _timed(self, fn, /, *args, **kwargs):
        """``fn(*args, **kwargs)``, its time added to :attr:`spent` (wire.CALL_S), whether it returns or raises."""
        t0 = perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.spent += perf_counter() - t0

    def _function(self, req: dict) -> object:
        """The callable a call request names: the entry point, or (entry MODULE_ENTRY) the module's function."""
        name = req.get(wire.FUNCTION)
        if self.entry != wire.MODULE_ENTRY:
            return self.target
        if not isinstance(name, str):
            raise LookupError("a call request without a function name")
        fn = getattr(self.target, name, None)
        if not callable(fn):
            defined = sorted(n for n in vars(self.target) if not n.startswith("_"))[:30]
            raise LookupError(f"the file defines no function {name!r}; it defines: {', '.join(defined) or 'nothing'}")
        return fn

    def op_call(self, req: dict, arrays: dict) -> tuple[dict, dict]:
        args = [self._value(s, arrays) for s in req.get("args", [])]
        kwargs = {k: self._value(s, arrays) for k, s in req.get("kwargs", {}).items()}
        extra = {}
        try:
            target = self._function(req)
        except LookupError as exc:
            return {"kind": wire.ERROR, "phase": "call", "type": "MissingFunction", "message": str(exc)[:MAX_TEXT],
                    "traceback": ""}, {}
        except BaseException as exc:  # a module-level __getattr__ of the candidate's, raising
            return _error(exc, self.path, "call"), {}
        try:
            if req.get(wire.MEMORY):
                out, extra[wire.MEMORY] = self._measured_call(target, args, kwargs)
            else:
                out = self._timed(target, *args, **kwargs)
        except MemoryError:
            return {"kind": wire.FAULT, "status": "memory", "message": "MemoryError raised during the call"}, {}
        except BaseException as exc:
            return _error(exc, self.path, "call"), {}
        if req.get(wire.VALUE):  # plain values (the python track): a tagged JSON tree, no arrays
            return dict({"kind": wire.RESULT, wire.VALUE: wire.encode_value(out)}, **extra), {}
        head, send, first, arr = self._output(req, out)
        if (req.get("grad_output") and arr is not None and self.torch is not None
                and getattr(first, "requires_grad", False)):
            try:  # a function-style torch track: gradients of the tensor arguments sent with requires_grad
                self._backward(req, arrays, first, args, kwargs, send)
            except MemoryError:
                return {"kind": wire.FAULT, "status": "memory", "message": "MemoryError raised in backward"}, {}
            except BaseException as exc:
                return _error(exc, self.path, "backward"), {}
        if req.get("return_inputs"):
            kind = np.ndarray if self.torch is None else (np.ndarray, self.torch.Tensor)
            for spec, value in zip(req.get("args", []), args):
                self._inputs_after(send, spec, value, kind)
            for k, value in kwargs.items():
                self._inputs_after(send, req["kwargs"][k], value, kind)
        return dict({"kind": wire.RESULT}, **head, **extra), send

    def _output(self, req: dict, out: object) -> tuple[dict, dict, object, np.ndarray | None]:
        """The output described for the host (``head``), the arrays to send, and the value an upstream gradient
        applies to with its array: the output itself, or a tuple output's first value (``tree`` requests)."""
        if req.get("tree"):
            head, send, leaves = self._describe_tree(out)
            return head, send, (leaves[0] if leaves else None), send.get(wire.LEAF + "0")
        info, arr = self._describe_output(out)
        return {"output": info}, ({} if arr is None else {wire.OUT: arr}), out, arr

    def _backward(self, req: dict, arrays: dict, out: object, args: list, kwargs: dict, send: dict) -> None:
        """``sum(out * G).backward()`` for the request's ``grad_output`` G (its gradient wrt ``out`` is G; unlike
        ``out.backward(G)`` it does not import sympy, ~0.5 s), then the gradient of every tensor argument sent
        with ``requires_grad``, positional and keyword alike, as GRAD + its array's name."""
        torch = self.torch
        (out * torch.from_numpy(arrays[req["grad_output"]]).to(out.dtype)).sum().backward()
        specs = [*zip(req.get("args", []), args), *((req["kwargs"][k], v) for k, v in kwargs.items())]
        for spec, value in specs:
            if isinstance(spec, dict) and spec.get("requires_grad") and isinstance(value, torch.Tensor):
                if value.grad is not None:
                    send[wire.GRAD + spec["array"]] = self._to_numpy(value.grad, torch)

    def _measured_call(self, target, args: list, kwargs: dict) -> tuple[object, dict]:
        """The call with its peak extra memory measured (request flag ``memory``): NumPy, the peak of what the
        call allocated (tracemalloc; NumPy reports its buffers to it); torch, the peak of live tensor storage the
        call allocated (a dispatch mode; the call runs under torch.no_grad; a detour through NumPy is not seen,
        and would cut the gradients anyway). Arguments allocated before the call are not counted; the output
        is. Self-reported by the worker: best effort."""
        torch = self.torch
        if torch is not None:
            from torch.utils._python_dispatch import _get_current_dispatch_mode

            meter = _storage_meter(torch)
            with torch.no_grad(), meter:
                out = self._timed(target, *args, **kwargs)
                intact = _get_current_dispatch_mode() is meter  # the call did not pop the meter
            return out, {"peak_bytes": int(meter.peak), "method": "torch_dispatch", "intact": intact}
        import tracemalloc

        tracemalloc.start()
        try:
            out = self._timed(target, *args, **kwargs)
            intact = tracemalloc.is_tracing()  # the call did not stop (or restart) the tracing
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        report = {"peak_bytes": int(peak), "method": "tracemalloc", "intact": intact}
        return out, report

    def op_init(self, req: dict) -> tuple[dict, dict]:
        torch = self.torch
        try:
            torch.manual_seed(0)
            module = self._timed(self.target, *req.get("args", []), **req.get("kwargs", {}))
        except MemoryError:
            return {"kind": wire.FAULT, "status": "memory", "message": "MemoryError raised in __init__"}, {}
        except BaseException as exc:
            return _error(exc, self.path, "init"), {}
        if not isinstance(module, torch.nn.Module):
            self.module = None
            return {"kind": wire.ERROR, "phase": "init", "type": "NotAModule",
                    "message": f"{self.entry} is not an nn.Module (got {type(module).__name__})", "traceback": ""}, {}
        self.module = module
        params = [{"name": n, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", "")}
                  for n, p in module.named_parameters()]
        buffers = [{"name": n, "shape": list(b.shape)} for n, b in module.named_buffers()]
        return {"kind": wire.MODULE, "params": params[:200], "buffers": buffers[:200]}, {}

    def op_forward(self, req: dict, arrays: dict) -> tuple[dict, dict]:
        torch = self.torch
        module = self.module
        if module is None:
            return {"kind": wire.ERROR, "phase": "forward", "type": "NoModule", "message": "module was not built",
                    "traceback": ""}, {}
        try:
            dtype = getattr(torch, req.get("dtype", "float32"))
            module.to(dtype)
            params = dict(module.named_parameters())
            with torch.no_grad():
                for name, arr_name in req.get("state", {}).items():
                    params[name].copy_(torch.from_numpy(arrays[arr_name]))
            module.zero_grad(set_to_none=True)
            module.train(req.get("mode", "eval") == "train")
        except BaseException as exc:
            return _error(exc, self.path, "load"), {}
        args = [self._value(s, arrays) for s in req.get("args", [])]
        kwargs = {k: self._value(s, arrays) for k, s in req.get("kwargs", {}).items()}
        send, extra = {}, {}
        try:
            if req.get("flops"):
                counter = _flop_counter(torch)
                with counter, torch.no_grad():
                    module(*args, **kwargs)
                extra["flops"] = int(counter.get_total_flops())
            out = self._timed(module, *args, **kwargs)
            head, send, first, arr = self._output(req, out)  # a tuple output: the gradient applies to its first value
            extra.update(head)
            info = extra.pop("output")
            if req.get("grad_output") and arr is not None:
                self._backward(req, arrays, first, args, kwargs, send)
                for name, p in module.named_parameters():
                    if p.grad is not None:
                        send[wire.GRAD + wire.PARAM + name] = self._to_numpy(p.grad, torch)
        except MemoryError:
            return {"kind": wire.FAULT, "status": "memory", "message": "MemoryError raised during forward"}, {}
        except BaseException as exc:
            return _error(exc, self.path, "forward"), {}
        if req.get("return_inputs"):
            for spec, value in zip(req.get("args", []), args):
                self._inputs_after(send, spec, value, torch.Tensor)
            for k, value in kwargs.items():
                self._inputs_after(send, req["kwargs"][k], value, torch.Tensor)
            for name, p in module.named_parameters():
                send[wire.INPUT + wire.PARAM + name] = self._to_numpy(p, torch).copy()
        return dict({"kind": wire.RESULT, "output": info}, **extra), send

    def serve(self) -> None:
        threading.Thread(target=_exit_when_orphaned, daemon=True).start()
        head = self.boot()
        self.exchange_handshake()
        self.send(head)
        self.send(self.start())
        self.loop()

    def serve_warm(self, root: str) -> None:
        """A warm worker: set up, ``idle``; then one ``load`` request (the entry point and the file's bytes),
        ``boot``, and the candidate's import and requests exactly as a cold worker serves them."""
        threading.Thread(target=_exit_when_orphaned, daemon=True).start()
        self.boot()
        self.send({"kind": wire.IDLE})
        req, arrays = self.read_frame()
        if req is None:
            return  # the pool let us go unused
        source = arrays.get(wire.SOURCE)
        entry = req.get("entry")
        if req.get("op") != "load" or not isinstance(entry, str) or source is None or source.dtype != np.uint8:
            self.send({"kind": wire.ERROR, "phase": "protocol", "type": "BadRequest",
                       "message": "expected a load request", "traceback": ""})
            return
        self.entry = entry
        self.path = os.path.join(root, "submission.py")
        with open(self.path, "wb") as f:
            f.write(source.tobytes())
        os.chmod(self.path, 0o444)
        self.exchange_handshake()
        self.send({"kind": wire.BOOT, "warm": True})
        self.send(self.start())
        self.loop()

    def loop(self) -> None:
        """Answer requests in order, one frame each. Requests sent ahead of their answers carry a ``batch`` id
        (wire.BATCH): once one of them is answered with a fault, the rest of its batch is read and dropped
        unanswered, as if the host had stopped sending there (it stops reading answers at a fault)."""
        aborted = None
        while True:
            try:
                req, arrays = self.read_frame()
            except wire.WireError as exc:
                self.send({"kind": wire.ERROR, "phase": "protocol", "type": "WireError", "message": str(exc),
                           "traceback": ""})
                return
            if req is None:
                return
            batch = req.get(wire.BATCH)
            if batch is not None and batch == aborted:
                continue
            try:
                self.spent = 0.0
                header, send = self.handle(req, arrays)
                if self.spent:
                    header = dict(header, **{wire.CALL_S: self.spent})
                if header.get("kind") == wire.FAULT:
                    aborted = batch
                self.send(header, send)
            except MemoryError:
                aborted = batch
                self.send({"kind": wire.FAULT, "status": "memory", "message": "MemoryError in the worker"})
            except wire.WireError as exc:
                self.send({"kind": wire.ERROR, "phase": "output", "type": "WireError", "message": str(exc)[:MAX_TEXT],
                           "traceback": ""})
            except BaseException as exc:  # e.g. a hostile __array__ raising SystemExit
                self.send(_error(exc, self.path, "output"))


def _malloc_trim() -> None:
    """glibc's malloc_trim(0): what malloc holds free goes back to the system (NumPy has imported ctypes)."""
    global _trim
    if _trim is None:
        import ctypes

        try:
            _trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc: nothing to trim
            _trim = lambda _pad: 0  # noqa: E731
    _trim(0)


_trim = None


def protocol_stdout() -> BinaryIO:
    """The protocol's own copy of fd 1; fd 1 itself then points at stderr, so the candidate's prints land there."""
    # buffered: its write() and flush() loop over short writes (gVisor's pipes take 64 KiB per write), so a
    # frame always arrives whole, whoever writes through it
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the candidate's prints land on stderr, which the host caps
    sys.stdout = sys.__stdout__ = os.fdopen(1, "w", buffering=1, closefd=False)
    return proto_out


OPTIONS = {"--track": str, "--entry": str, "--root": str, "--exchange": str, "--exchange-fd": int, "--site-dirs": str}
FLAGS = ("--warm", "--no-warm-up")
USAGE = (f"usage: worker.py --track {{{','.join(wire.TRACKS)}}} [--entry NAME SUBMISSION | --warm [--root DIR] "
         "[--no-warm-up]] [--exchange PATH | --exchange-fd FD] [--site-dirs JSON]")


def parse_args(argv: list[str]) -> dict:
    """The worker's command line (the host writes it; argparse would cost every cold worker ~4 ms of imports:
    argparse, gettext, and shutil for its help's width). ``--track``: numpy, torch or python; ``--entry`` and
    SUBMISSION, or ``--warm`` (import and warm up, send idle, wait for a load request; ``--root``: where the
    submission is written, default /tmp; ``--no-warm-up``: imports only); ``--exchange``/``--exchange-fd``: the
    host's input exchange (a bind-mounted file, an inherited descriptor); ``--site-dirs``: a JSON list, the
    folders site would add (a worker started with -S). A malformed line exits 2 with the usage, as argparse
    would."""
    opts = {"track": None, "entry": None, "root": "/tmp", "exchange": None, "exchange_fd": None, "site_dirs": None,
            "warm": False, "no_warm_up": False, "submission": None}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name in OPTIONS:
            if not eq:
                if not args:
                    _usage(f"{name} expects a value")
                value = args.pop(0)
            try:
                opts[name[2:].replace("-", "_")] = OPTIONS[name](value)
            except ValueError:
                _usage(f"{name}: invalid value {value!r}")
        elif arg in FLAGS:
            opts[arg[2:].replace("-", "_")] = True
        elif not arg.startswith("-") and opts["submission"] is None:
            opts["submission"] = arg
        else:
            _usage(f"unrecognized argument {arg!r}")
    if opts["track"] not in wire.TRACKS:
        _usage(f"--track must be one of {', '.join(wire.TRACKS)}")
    if not opts["warm"] and not (opts["entry"] and opts["submission"]):
        _usage("--entry and SUBMISSION are required (or --warm)")
    return opts


def _usage(message: str) -> None:
    sys.stderr.write(f"{USAGE}\nworker.py: error: {message}\n")
    raise SystemExit(2)


def main() -> None:
    opts = parse_args(sys.argv[1:])
    if opts["warm"]:
        if not opts["no_warm_up"]:
            warm_up(opts["track"])
        reseed()
        w = Worker(opts["track"], "", "", protocol_stdout())
        w.open_exchange(opts["exchange"], opts["exchange_fd"])
        w.serve_warm(opts["root"])
        return
    w = Worker(opts["track"], opts["entry"], os.path.abspath(opts["submission"]), protocol_stdout())
    w.open_exchange(opts["exchange"], opts["exchange_fd"])
    w.serve()


if __name__ == "__main__":
    main()
