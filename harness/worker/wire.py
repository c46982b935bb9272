"""The wire format between the trusted host and the sandbox worker.

A frame is ``MAGIC`` + a 4-byte big-endian JSON length + the JSON header + the raw ``.npy`` blobs the header
lists in ``arrays`` (``[{"name": ..., "nbytes": ...}]``). Only plain numeric arrays cross: ``allow_pickle=False``,
an allow-list of dtypes, capped sizes. This module uses only the standard library and NumPy because the
worker imports it inside the sandbox too; :func:`decode_array` is the strict parser both sides use.
"""

from __future__ import annotations

import io
import json
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


class WireError(ValueError):
    """A frame or array that breaks the protocol."""


def encode_array(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


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


def decode_array(blob: bytes) -> np.ndarray:
    """Parse one ``.npy`` blob strictly: no pickles, allow-listed dtypes, exact size, capped shape."""
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
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.str not in ALLOWED_DTYPES:
        raise WireError(f"dtype {dtype.str!r} is not allowed on the wire")
    if len(shape) > MAX_NDIM or any(type(n) is not int or n < 0 for n in shape):
        raise WireError(f"shape {shape!r} is not allowed")
    count = 1
    for n in shape:
        count *= n
        if count * dtype.itemsize > MAX_ARRAY_BYTES:
            raise WireError(f"array of shape {shape!r} exceeds the size cap")
    data = blob[f.tell():]
    if len(data) != count * dtype.itemsize:
        raise WireError(f"array data is {len(data)} bytes, header promises {count * dtype.itemsize}")
    arr = np.frombuffer(data, dtype=dtype, count=count)
    return arr.reshape(shape, order="F" if fortran else "C").copy(order="C")
