"""Making candidate-controlled text safe to show: bounded and free of control characters."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")


def clean_text(text: str, limit: int = 1000, *, keep_newlines: bool = False) -> str:
    """Strip ANSI escapes and control characters (newlines kept only if asked), then truncate to ``limit``."""
    text = _ANSI.sub("", str(text))
    if not keep_newlines:
        text = text.replace("\n", " ").replace("\t", " ")
    text = _CONTROL.sub("", text)
    if len(text) > limit:
        text = text[: max(0, limit - 15)] + "… [truncated]"
    return text
