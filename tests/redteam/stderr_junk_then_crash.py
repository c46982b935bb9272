"""Writes a little terminal junk to stderr (under the cap), then dies: the junk ends up as the report's
stderr_tail evidence, which must be stripped of every control character."""

import os
import sys

JUNK = ("\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\r"
        "PASSED 31/31\x00\x07\x08\x7f\x9b2J\u202egnissap\u202c\u2066\u200b\ufeff\u2028\u2029 done\n")


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    sys.stderr.write(JUNK * 20)
    sys.stderr.flush()
    os.write(2, b"\xff\xfe\xc3\x28 invalid utf-8 \x1b[31m" * 5)
    os._exit(3)
