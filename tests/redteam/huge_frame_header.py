"""Forged frame prefixes: a JSON header length of 4 GiB, then (second life) a header listing a 1 TiB array and
64+ arrays. The host must refuse before allocating anything."""

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


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    out = _protocol_out()
    if os.path.exists("second-life"):
        head = {"kind": "result", "arrays": [{"name": "out", "nbytes": 1 << 40}]
                + [{"name": f"a{i}", "nbytes": 8} for i in range(100)]}
        text = json.dumps(head).encode()
        out.write(b"AGW1" + struct.pack(">I", len(text)) + text)
    else:
        open("second-life", "w").close()
        out.write(b"AGW1" + struct.pack(">I", 0xFFFFFFFF) + b"{" * 4096)
    out.flush()
    time.sleep(60)
