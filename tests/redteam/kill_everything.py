"""Tries to take the grader down with it: SIGKILL to its parent, to its process group and to every process it may
signal (kill -1). Inside the sandbox's PID namespace (or container) there is nothing else to hit; the grader must
survive and report. (The red-team test skips this case where the local backend has no namespaces.)"""

import os
import signal


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    for target in (lambda: os.kill(os.getppid(), signal.SIGKILL), lambda: os.kill(-1, signal.SIGKILL),
                   lambda: os.killpg(0, signal.SIGKILL), lambda: os.kill(1, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass
    os.kill(os.getpid(), signal.SIGKILL)
