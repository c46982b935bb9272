"""Floods stderr with ANSI sequences, C1 controls, NULs and invalid UTF-8 until the output cap trips."""

import os

JUNK = (b"\x1b[31;1mFAIL\x1b[0m \x1b[2K\r\x9b31m\xc3\x28\xff\xfe\x00" * 200
        + "\u202eSSAP\u202c \u200b\u2028".encode())


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    while True:
        os.write(2, JUNK)
