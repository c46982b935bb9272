"""The host's BLAS runs on one thread while it grades.

The host's side of a grade is thousands of small NumPy products (the oracle, the checks, the diagnosis's
mutants). With OpenBLAS's default of one thread per core, its threads spin between those calls: measured on this
machine's 2 cores, a warm mha grade cost the host 301 ms of CPU with the default and 158 ms with one thread
(flash_attention: 502 and 159 ms), at the same or a shorter wall time, and the spinning took the CPU the
candidate's worker was waiting for. (The worker already runs with one thread: harness/sandbox/local.py's
environment, the image's.)

:func:`from_the_start`: a process of ours (the CLI's, and through its environment every grading process it
starts) defaults to one BLAS thread before anything imports NumPy, which costs nothing.
:func:`one_thread`: elsewhere (``grade()`` called as a library, the test suite's processes), every BLAS library
loaded in this process (threadpoolctl: OpenBLAS, MKL, BLIS) is limited for the duration of a grade and restored
afterwards, so a library caller's own NumPy is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

_controller = None
_lock = threading.Lock()
_single_from_start = False
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def from_the_start() -> None:
    """At a process's start: one BLAS thread for this process and its children, unless NumPy is already loaded or
    a setting says otherwise."""
    global _single_from_start
    if "numpy" not in sys.modules:
        for var in THREAD_VARS:
            os.environ.setdefault(var, "1")
        _single_from_start = all(os.environ[var] == "1" for var in THREAD_VARS)


def _get_controller():
    global _controller
    with _lock:
        if _controller is None:
            import numpy  # noqa: F401  (loads its BLAS first: a controller made before finds no library, and kept,
            #                           it would limit nothing in any grade; every grade imports NumPy anyway)
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()   # ~5 ms once: finds the loaded libraries
        return _controller


@contextlib.contextmanager
def one_thread():
    """BLAS limited to one thread inside the block (a no-op where it already is from the start, where no BLAS
    library is loaded, or where it cannot be limited)."""
    if _single_from_start:
        yield
        return
    try:
        limiter = _get_controller().limit(limits=1, user_api="blas")
    except Exception:   # threadpoolctl could not inspect or limit a library: grading goes on at its default
        limiter = contextlib.nullcontext()
    with limiter:
        yield
