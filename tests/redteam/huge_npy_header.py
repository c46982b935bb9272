"""Forged frames with hostile .npy blobs: first a header claiming a (10**12, 10**12) float64 array (8 exabytes)
with no data behind it; on the worker's second life a v2 header whose length field claims 4 GiB."""

import gc
import json
import os
import struct
import time


def _protocol_out():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and hasattr(obj, "out"):
            return obj.out
    return os.fdopen(3, "wb", buffering=0)


def _frame(head, blobs):
    head = dict(head, arrays=[{"name": n, "nbytes": len(b)} for n, b in blobs])
    text = json.dumps(head).encode()
    return b"AGW1" + struct.pack(">I", len(text)) + text + b"".join(b for _, b in blobs)


def _npy_v1(header: str) -> bytes:
    text = header.encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if os.path.exists("second-life"):
        blob = b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF) + b"{'descr': '<f8'" + b" " * 64
    else:
        open("second-life", "w").close()
        blob = _npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }")
    out = _protocol_out()
    out.write(_frame({"kind": "result", "output": {"type": "numpy.ndarray", "exact_type": True}}, [("out", blob)]))
    out.flush()
    time.sleep(60)
