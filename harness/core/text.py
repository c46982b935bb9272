"""Making candidate-controlled text safe to show: bounded and free of control characters."""

from __future__ import annotations

import re
import unicodedata

# C0/C1 controls (newline and tab handled separately), zero-width and bidi controls, the Arabic letter mark,
# the Mongolian vowel separator, line/paragraph separators (newlines to some terminals and to JavaScript),
# word joiner and invisible operators, the byte-order mark / zero-width no-break space, interlinear
# annotation controls, and lone surrogates (a strict UTF-8 writer cannot even encode those).
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\ufff9-\ufffb\ud800-\udfff]")
_ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")


def clean_text(text: str, limit: int = 1000, *, keep_newlines: bool = False) -> str:
    """Strip ANSI escapes and control characters (newlines kept only if asked), then truncate to ``limit``."""
    text = _ANSI.sub("", str(text))
    if not keep_newlines:
        text = text.replace("\n", " ").replace("\t", " ")
    text = _CONTROL.sub("", text)
    if len(text) > limit:
        text = text[: max(0, limit - 15)] + "… [truncated]"
    if not text.isascii():  # any other format character (soft hyphen, tag characters used to smuggle text...)
        text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cs", "Zl", "Zp"))
    return text
