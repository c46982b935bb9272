"""Ignores SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1/2 and SIGALRM at import, then hangs in the call."""

import signal
import time

for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGALRM, signal.SIGXCPU):
    signal.signal(_sig, signal.SIG_IGN)


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    while True:
        time.sleep(0.05)
