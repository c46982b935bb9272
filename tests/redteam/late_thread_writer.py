"""Leaves a thread behind after the call returns. Between calls it writes extra, well-formed result frames onto
the protocol pipe (so the host's next answer would come from the thread, not the call) and forges files."""

import gc
import json
import os
import struct
import threading
import time

import numpy as np

STATE = {"shape": (1, 1, 1), "dtype": "float64"}


def _protocol_out():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and hasattr(obj, "out"):
            return obj.out
    return os.fdopen(3, "wb", buffering=0)


def _npy(arr):
    import io

    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _late():
    out = _protocol_out()
    for _ in range(200):
        time.sleep(0.05)
        blob = _npy(np.ones(STATE["shape"], dtype=STATE["dtype"]))
        head = json.dumps({"kind": "result", "output": {"type": "numpy.ndarray", "exact_type": True},
                           "arrays": [{"name": "out", "nbytes": len(blob)}]}).encode()
        try:
            out.write(b"AGW1" + struct.pack(">I", len(head)) + head + blob)
            out.flush()
        except Exception:
            return
        try:
            with open(os.path.join("/tmp", "@@MARKER@@-late.json"), "w") as f:
                f.write('{"verdict": "passed"}')
        except OSError:
            pass


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    STATE.update(shape=X.shape, dtype=X.dtype)
    if not any(t.name == "late" for t in threading.enumerate()):
        threading.Thread(target=_late, name="late", daemon=True).start()
    return np.zeros_like(X)
