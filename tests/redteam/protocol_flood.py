"""Floods the protocol pipe itself (not stdout/stderr) with 64 MB of junk from a background thread, then hangs:
the host must give up at the first bad byte, kill the worker promptly and not wait on a blocked pipe."""

import gc
import os
import threading
import time


def _protocol_out():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Worker" and hasattr(obj, "out"):
            return obj.out
    return os.fdopen(3, "wb", buffering=0)


def _flood():
    out = _protocol_out()
    junk = b"\xde\xad\xbe\xef" * 16384
    for _ in range(1024):
        try:
            out.write(junk)
        except Exception:
            return


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    threading.Thread(target=_flood, daemon=True).start()
    time.sleep(60)
