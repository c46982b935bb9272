"""A forged frame whose JSON header is 100,000 nested lists (within the 256 KB header cap): a recursive JSON
parser on the host would hit RecursionError. Second life: a header whose fields have hostile types."""

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
        text = json.dumps({"kind": "result", "output": [1, 2, 3], "tripwires": {"a": 1}, "arrays": []}).encode()
    else:
        open("second-life", "w").close()
        text = b'{"kind": "result", "output": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    out.write(b"AGW1" + struct.pack(">I", len(text)) + text)
    out.flush()
    time.sleep(60)
