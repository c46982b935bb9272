"""The host's BLAS runs on one thread while it grades.

The host's side of a grade is thousands of small NumPy products (the oracle, the checks, the diagnosis's
mutants). With OpenBLAS's default of one thread per core, its threads spin between those calls: measured on this
machine's 2 cores, a warm mha grade cost the host 301 ms of CPU with the default and 158 ms with one thread
(flash_attention: 502 and 159 ms), at the same or a shorter wall time, and the spinning took the CPU the
candidate's worker was waiting for. (The worker already runs with one thread: harness/sandbox/local.py's
environment, the image's.)

:func:`one_thread` limits every BLAS library loaded in this process (threadpoolctl: OpenBLAS, MKL, BLIS) for
the duration of a grade and restores what it found afterwards, so a library caller's own NumPy is left as it was.
"""

from __future__ import annotations

import contextlib
import threading

_controller = None
_lock = threading.Lock()


def _get_controller():
    global _controller
    with _lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()   # ~5 ms once: finds the loaded libraries
        return _controller


@contextlib.contextmanager
def one_thread():
    """BLAS limited to one thread inside the block (a no-op where no BLAS library is loaded or it cannot be
    limited)."""
    try:
        limiter = _get_controller().limit(limits=1, user_api="blas")
    except Exception:   # threadpoolctl could not inspect or limit a library: grading goes on at its default
        limiter = contextlib.nullcontext()
    with limiter:
        yield
