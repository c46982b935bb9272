"""Writes a forged result frame straight to the protocol pipe, carrying a pickled object array (`np.save` with
allow_pickle=True) whose unpickling would create the host canary file @@CANARY@@. The host must reject it
unread (object dtype is not allowed on the wire) and the canary must never appear. A raw pickle (no npy
header at all) is sent on the worker's second life."""

import gc
import io
import json
import os
import pickle
import struct
import time

import numpy as np

CANARY = "@@CANARY@@"


class Payload:
    def __reduce__(self):
        return (exec, (f"open({CANARY!r}, 'w').write('unpickled on the host')",))


def _protocol_out():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and hasattr(obj, "out"):
            return obj.out
    return os.fdopen(3, "wb", buffering=0)


def _frame(head, blobs):
    head = dict(head, arrays=[{"name": n, "nbytes": len(b)} for n, b in blobs])
    text = json.dumps(head).encode()
    return b"AGW1" + struct.pack(">I", len(text)) + text + b"".join(b for _, b in blobs)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    if os.path.exists("second-life"):
        blob = pickle.dumps(Payload())
    else:
        open("second-life", "w").close()
        buf = io.BytesIO()
        np.save(buf, np.array([Payload()], dtype=object), allow_pickle=True)
        blob = buf.getvalue()
    out = _protocol_out()
    out.write(_frame({"kind": "result", "output": {"type": "numpy.ndarray", "exact_type": True}}, [("out", blob)]))
    out.flush()
    time.sleep(60)
