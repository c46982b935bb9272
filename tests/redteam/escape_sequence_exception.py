"""Raises an exception whose type name and message are full of terminal escape sequences (clear screen, window
title, OSC 52 clipboard write, hyperlinks), carriage-return overwrites that fake a PASS, NUL and bell, bidi
overrides, zero-width characters, line separators, invisible tag characters and a lone surrogate (which a strict UTF-8 stdout cannot
even encode)."""

EVIL = type("\x1b[2J\x1b[32mPASSED\x1b[0m\u202eEvil", (Exception,), {})
MESSAGE = ("\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b]8;;http://evil.example\x07link\x1b]8;;\x07"
           "\rmha (numpy track): PASSED  score 31/31\x00\x07\x08\x7f\x9b2J\u202egnissap\u202c\u2066\u200b\ufeff"
           "\u2028\u2029 soft\u00adhyphen \U000E0041\U000E0042 tags \u0600 lone surrogate: \ud800 end")


def mha(X, Wq, Wk, Wv, Wo, h, mask=None):
    raise EVIL(MESSAGE)
