"""Process plumbing shared by the sandbox backends and the batch's grading processes."""

from __future__ import annotations

import os
import signal

PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal this process gets when its parent dies


def die_with_parent(sig: int = signal.SIGKILL, *, parent: int | None = None) -> None:
    """Ask the kernel (Linux) to send ``sig`` to this process when its parent dies, so a parent killed outright
    leaves nothing behind; then, when ``parent`` is given and is already gone, exit now. Best effort elsewhere.
    Safe between fork and exec (no allocation beyond ctypes' own)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if parent and os.getppid() != parent:
        os._exit(0)


class TermWhileBusy:
    """SIGTERM in a grading process (the batch's and the service's): while a task is being graded (inside
    :meth:`busy`) it raises KeyboardInterrupt, which unwinds the engine, whose ``finally`` kills the sandbox
    worker; while it waits for the next task (inside :meth:`waiting`) it raises too, so a process whose parent
    died stops even when its stdin is not at EOF (a descriptor of the pipe held elsewhere); while the process
    closes (stdin at EOF, the warm pool and its workers shutting down) it only marks the process as stopping, so
    that close runs to its end instead of being cut short; the parent's own grace period (then SIGKILL) bounds
    it."""

    def __init__(self):
        self.grading = False
        self.idle = False
        self.stopping = False
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame):
        self.stopping = True
        if self.grading or self.idle:
            self.grading = self.idle = False
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise KeyboardInterrupt

    def busy(self):
        """The scope of grading one task."""
        return self._scope("grading")

    def waiting(self):
        """The scope of waiting for the next task (reading stdin)."""
        return self._scope("idle")

    def _scope(self, flag: str):
        import contextlib

        @contextlib.contextmanager
        def scope():
            if self.stopping:
                raise KeyboardInterrupt
            setattr(self, flag, True)
            try:
                yield
            finally:
                setattr(self, flag, False)
        return scope()
