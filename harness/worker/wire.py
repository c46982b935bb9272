"""The wire format between the trusted host and the sandbox worker.

A frame is ``MAGIC`` + a 4-byte big-endian JSON length + the JSON header + the raw ``.npy`` blobs the header
lists in ``arrays`` (``[{"name": ..., "nbytes": ...}]``). Only plain numeric arrays cross: ``allow_pickle=False``,
an allow-list of dtypes, capped sizes. This module uses only the standard library and NumPy because the
worker imports it inside the sandbox too; :func:`decode_array` is the strict parser both sides use.
"""

from __future__ import annotations

import io
import json
import re
import struct

import numpy as np

MAGIC = b"AGW1"
HEADER = struct.Struct(">4sI")
MAX_JSON_BYTES = 256 * 1024
MAX_ARRAYS = 64
MAX_ARRAY_BYTES = 64 * 1024 * 1024
MAX_FRAME_BYTES = 256 * 1024 * 1024
MAX_NDIM = 8
MAX_NPY_HEADER = 4096
ALLOWED_DTYPES = frozenset(
    np.dtype(t).str
    for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64",
              "complex64", "complex128")
)


# Frame kinds the worker sends, and the names of the arrays in frames: both ends use these, never bare strings.
BOOT, READY, ERROR, FAULT, RESULT, MODULE = "boot", "ready", "error", "fault", "result", "module"
IDLE = "idle"            # a warm worker: set up and warmed, waiting for a load request (nothing of a candidate yet)
SOURCE = "source"        # the load request's array: the submission's bytes (uint8)
OUT = "out"              # the candidate's output
LEAF = "out."            # LEAF + index: one array of a tuple output (requests with "tree": the header's tree/leaves)
MAX_LEAVES = 16          # a tuple output holds at most this many arrays, nested at most MAX_TREE_DEPTH deep
MAX_TREE_DEPTH = 3
GRAD = "grad:"           # GRAD + argument array name, or GRAD + PARAM + parameter name: a gradient
INPUT = "input:"         # INPUT + argument array name, or INPUT + PARAM + parameter name: as the candidate left it
PARAM = "param:"
WEIGHT = "p:"            # WEIGHT + case field (wq, bq, wqkv...): a value the host loads into a parameter
GRAD_OUTPUT = "G"        # the upstream gradient for backward
MEMORY = "memory"        # call request flag: measure the call's peak extra memory; the result header's field
VALUE = "value"          # call request flag: return the output as a JSON value tree (encode_value); the header's field
FUNCTION = "function"    # call request field: which of the module's functions to call (entry MODULE_ENTRY)
BATCH = "batch"          # request field: requests sent ahead of their answers (the host's pipeline); a fault ends one
CALL_S = "call_s"        # result header field: seconds the request spent in the candidate's own code (the
                         # worker's word: a benchmark's figure, never a verdict's; the host drops a bad one)
MODULE_ENTRY = "*"       # --entry for a track of several plain functions: the worker serves the module itself
TRACKS = ("numpy", "torch", "python")  # python: plain functions over ints, answers as values (no torch imported)
MAX_VALUE_NODES = 512    # a value tree holds at most this many nodes, nested at most MAX_VALUE_DEPTH deep,
MAX_VALUE_DEPTH = 8
MAX_INT_DIGITS = 2000    # ints of up to this many decimal digits cross exactly (as strings); longer ones by size only
MAX_VALUE_TEXT = 200     # a string, a float's repr or another object's str() is cut to this many characters


class WireError(ValueError):
    """A frame or array that breaks the protocol."""


_HEADERS: dict[tuple, bytes] = {}  # (dtype, shape) -> the .npy header numpy writes for it (at most MAX_HEADERS kept)
MAX_HEADERS = 4096


def encode_array(arr: np.ndarray) -> bytes:
    """The ``.npy`` bytes numpy's ``write_array`` gives (version 1.0), with the header it wrote for the same dtype and
    shape before kept (writing one is ~3 µs of a small array's ~5)."""
    arr = np.ascontiguousarray(arr)
    key = (arr.dtype.str, arr.shape)
    head = _HEADERS.get(key)   # only allowed dtypes' headers are ever kept
    if head is None:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, arr, version=(1, 0), allow_pickle=False)  # refuses object arrays
        blob = buf.getvalue()
        if key[0] in ALLOWED_DTYPES and len(_HEADERS) < MAX_HEADERS:
            _HEADERS[key] = blob[:len(blob) - arr.nbytes]
        return blob
    return head + arr.tobytes()


def encode_frame(header: dict, arrays: dict[str, np.ndarray] | None = None) -> bytes:
    blobs = [(name, encode_array(a)) for name, a in (arrays or {}).items()]
    head = dict(header, arrays=[{"name": n, "nbytes": len(b)} for n, b in blobs])
    text = json.dumps(head, allow_nan=False).encode()
    return HEADER.pack(MAGIC, len(text)) + text + b"".join(b for _, b in blobs)


def parse_prefix(prefix: bytes) -> int:
    magic, length = HEADER.unpack(prefix)
    if magic != MAGIC:
        raise WireError(f"bad frame magic {magic!r}")
    if length > MAX_JSON_BYTES:
        raise WireError(f"frame header of {length} bytes exceeds {MAX_JSON_BYTES}")
    return length


def parse_header(text: bytes) -> tuple[dict, list[tuple[str, int]]]:
    try:
        head = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"frame header is not JSON: {exc}") from None
    if not isinstance(head, dict):
        raise WireError("frame header is not a JSON object")
    specs = head.pop("arrays", [])
    if not isinstance(specs, list) or len(specs) > MAX_ARRAYS:
        raise WireError("frame lists too many arrays or a malformed array list")
    out, total = [], 0
    for spec in specs:
        if not (isinstance(spec, dict) and isinstance(spec.get("name"), str) and type(spec.get("nbytes")) is int):
            raise WireError("malformed array entry in frame header")
        if not 0 < spec["nbytes"] <= MAX_ARRAY_BYTES + MAX_NPY_HEADER:
            raise WireError(f"array {spec['name'][:40]!r} of {spec['nbytes']} bytes exceeds the cap")
        total += spec["nbytes"]
        out.append((spec["name"][:200], spec["nbytes"]))
    if total > MAX_FRAME_BYTES:
        raise WireError(f"frame of {total} bytes exceeds the cap")
    return head, out


def arrange(value: np.ndarray, layout: str, track: str, tensor: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """An argument's layout, one for both sides: (holder, view), a C-contiguous array and the view of it the
    candidate gets. The host writes the holder's bytes into the input exchange (harness/sandbox/exchange.py);
    the worker builds the view from a pipe array (worker.Worker._value). NumPy ``F`` is Fortran order, torch
    ``F``/``transposed`` swaps the first two axes' strides, ``strided`` every other element of a doubled last
    axis; anything else is C order (the holder is then ``value`` itself when that is C-contiguous)."""
    torch_like = track == "torch" and tensor
    if layout == "strided":
        holder = np.ascontiguousarray(np.repeat(value, 2, axis=-1)) if value.ndim else np.ascontiguousarray(value)
        return holder, (holder[..., ::2] if value.ndim else holder)
    if torch_like and layout in ("F", "transposed") and value.ndim >= 2:
        holder = np.ascontiguousarray(np.swapaxes(value, 0, 1))
        return holder, np.swapaxes(holder, 0, 1)
    if not torch_like and layout == "F":
        holder = np.ascontiguousarray(value.T)
        return holder, holder.T
    holder = np.asarray(value, order="C")  # a 0-d array stays 0-d (ascontiguousarray would make it 1-d)
    return holder, holder


_NPY_V1 = b"\x93NUMPY\x01\x00"
_DIM = rb"(?:0|[1-9][0-9]*)"
# the header numpy's write_array gives an array of an allowed dtype (version 1.0), and nothing else: repr of the
# shape tuple, keys in its order, then the padding; any other header goes to numpy's own parser
_CANONICAL = re.compile(rb"\{'descr': '([<|][a-z][0-9]{1,2})', 'fortran_order': (False|True), 'shape': \((|"
                        + _DIM + rb",|" + _DIM + rb"(?:, " + _DIM + rb")+)\), \} *\n")
_DTYPES = {np.dtype(t).str.encode(): np.dtype(t) for t in ALLOWED_DTYPES}


def _header(blob: bytes) -> tuple[tuple, bool, np.dtype, int]:
    """An ``.npy`` blob's shape, order, dtype and where its data starts. The header numpy writes is read by one
    regular expression (~1 µs, where numpy's own reader compiles it as Python, ~18 µs an array); it accepts only
    headers that numpy's reader reads the same way. Any other header is numpy's reader's to parse or refuse."""
    if blob[:8] == _NPY_V1 and len(blob) >= 10:
        length = blob[8] | blob[9] << 8
        match = _CANONICAL.fullmatch(blob, 10, 10 + length) if length <= MAX_NPY_HEADER else None
        dtype = _DTYPES.get(match.group(1)) if match else None
        if dtype is not None and len(blob) >= 10 + length:
            dims = match.group(3)
            shape = tuple(int(n) for n in dims.split(b",") if n) if dims else ()
            return shape, match.group(2) == b"True", dtype, 10 + length
    f = io.BytesIO(blob)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=MAX_NPY_HEADER)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=MAX_NPY_HEADER)
        else:
            raise WireError(f"unsupported npy version {version}")
    except WireError:
        raise
    except Exception as exc:  # numpy raises ValueError/SyntaxError/... on garbage
        raise WireError(f"malformed npy header: {type(exc).__name__}: {str(exc)[:200]}") from None
    return shape, fortran, dtype, f.tell()


def decode_array(blob: bytes) -> np.ndarray:
    """Parse one ``.npy`` blob strictly: no pickles, allow-listed dtypes, exact size, capped shape."""
    shape, fortran, dtype, start = _header(blob)
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.str not in ALLOWED_DTYPES:
        raise WireError(f"dtype {dtype.str!r} is not allowed on the wire")
    if len(shape) > MAX_NDIM or any(type(n) is not int or n < 0 for n in shape):
        raise WireError(f"shape {shape!r} is not allowed")
    count = 1
    for n in shape:
        count *= n
        if count * dtype.itemsize > MAX_ARRAY_BYTES:
            raise WireError(f"array of shape {shape!r} exceeds the size cap")
    if len(blob) - start != count * dtype.itemsize:
        raise WireError(f"array data is {len(blob) - start} bytes, header promises {count * dtype.itemsize}")
    arr = np.frombuffer(blob, dtype=dtype, count=count, offset=start)
    return arr.reshape(shape, order="F" if fortran else "C").copy(order="C")


# -- plain values (the python track) -----------------------------------------------------------------------
# A value crosses as a JSON tree of tagged nodes; ints as decimal strings, so big integers arrive exact and an
# int is never confused with a float: {"int": "123"}, {"bool": true}, {"float": "1.5"} (its repr), {"str": ".."},
# {"none": true}, {"tuple": [..]}, {"list": [..]}, {"dict": [[key, value], ..]}, {"big_int": bits} (an int too
# long to print), {"other": "numpy.int64", "text": str(obj)} (anything else, e.g. a NumPy scalar or an int
# subclass: named by its exact type). Exact types only: a subclass of int, tuple or dict is "other". The tag is
# the worker's report of the type (the candidate's process): see SECURITY.md, "Values and their types".

class Opaque:
    """On the host: an object of a type a value tree does not carry (its exact type's name and its text)."""

    __slots__ = ("type", "text")

    def __init__(self, type_name: str, text: str):
        self.type, self.text = type_name, text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type, self.text) == (other.type, other.text)

    def __hash__(self) -> int:
        return hash((Opaque, self.type, self.text))

    def __repr__(self) -> str:
        return f"<{self.type} {self.text}>"


class BigInt(Opaque):
    """On the host: an int the worker could not send digit by digit (over MAX_INT_DIGITS), known by its size."""

    def __init__(self, bits: int):
        super().__init__("int", f"an integer of {bits} bits")
        self.bits = bits


def _text(obj: object) -> str:
    try:
        return str(obj)[:MAX_VALUE_TEXT]
    except BaseException:  # a hostile __str__
        return "<unprintable>"


def encode_value(obj: object) -> object:
    """The worker's side: ``obj`` as a tagged JSON tree (raises WireError past the node or depth caps)."""
    count = [0]

    def walk(node: object, depth: int) -> object:
        count[0] += 1
        if count[0] > MAX_VALUE_NODES:
            raise WireError(f"the value holds more than {MAX_VALUE_NODES} items")
        kind = type(node)
        if kind is bool:
            return {"bool": node}
        if kind is int:
            if node.bit_length() > MAX_INT_DIGITS * 3:  # surely more digits than MAX_INT_DIGITS
                return {"big_int": node.bit_length()}
            text = str(node)
            return {"int": text} if len(text.lstrip("-")) <= MAX_INT_DIGITS else {"big_int": node.bit_length()}
        if kind is float:
            return {"float": repr(node)}
        if kind is str:
            return {"str": node[:MAX_VALUE_TEXT]}
        if node is None:
            return {"none": True}
        if kind in (tuple, list, dict) and depth >= MAX_VALUE_DEPTH:
            raise WireError(f"the value is nested more than {MAX_VALUE_DEPTH} deep")
        if kind is tuple or kind is list:
            items = list(node)[:MAX_VALUE_NODES + 1]
            return {kind.__name__: [walk(item, depth + 1) for item in items]}
        if kind is dict:
            pairs = list(dict.items(node))[:MAX_VALUE_NODES + 1]
            return {"dict": [[walk(k, depth + 1), walk(v, depth + 1)] for k, v in pairs]}
        return {"other": f"{kind.__module__}.{kind.__qualname__}"[:MAX_VALUE_TEXT], "text": _text(node)}

    return walk(obj, 0)


def decode_value(tree: object) -> object:
    """The host's side: a tagged tree back into Python objects (int, bool, float, str, None, tuple, list, dict,
    :class:`Opaque`), strictly; anything malformed is a WireError (a forged frame)."""
    count = [0]

    def walk(node: object, depth: int) -> object:
        count[0] += 1
        if count[0] > MAX_VALUE_NODES + 1 or depth > MAX_VALUE_DEPTH or not isinstance(node, dict) or len(node) > 2:
            raise WireError("malformed value in frame header")
        if len(node) == 1:
            (tag, body), = node.items()
            if tag == "int" and isinstance(body, str) and 0 < len(body.lstrip("-")) <= MAX_INT_DIGITS \
                    and body.lstrip("-").isascii() and body.lstrip("-").isdigit() and body.count("-") <= 1:
                return int(body)
            if tag == "bool" and type(body) is bool:
                return body
            if tag == "float" and isinstance(body, str) and len(body) <= 40:
                try:
                    return float(body)
                except ValueError:
                    pass
            if tag == "str" and isinstance(body, str):
                return body[:MAX_VALUE_TEXT]
            if tag == "none" and body is True:
                return None
            if tag == "big_int" and type(body) is int and 0 < body < 2 ** 40:
                return BigInt(body)
            if tag in ("tuple", "list") and isinstance(body, list) and len(body) <= MAX_VALUE_NODES + 1:
                items = [walk(item, depth + 1) for item in body]
                return tuple(items) if tag == "tuple" else items
            if tag == "dict" and isinstance(body, list) and len(body) <= MAX_VALUE_NODES + 1:
                out = {}
                for pair in body:
                    if not (isinstance(pair, list) and len(pair) == 2):
                        raise WireError("malformed dict in a value")
                    key = walk(pair[0], depth + 1)
                    try:
                        hash(key)
                    except TypeError:
                        raise WireError("a dict key in a value is unhashable") from None
                    out[key] = walk(pair[1], depth + 1)
                return out
        elif isinstance(node.get("other"), str) and isinstance(node.get("text"), str):
            return Opaque(node["other"][:MAX_VALUE_TEXT], node["text"][:MAX_VALUE_TEXT])
        raise WireError("malformed value in frame header")

    return walk(tree, 0)
