"""One table of marks and colours for statuses and verdicts, used by every renderer (terminal and HTML)."""

from __future__ import annotations

MARK = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "timeout": "TIMEOUT", "memory": "MEMORY",
        "output_limit": "OUTPUT", "skipped": "SKIP"}

# rich/click colour names; a test's status and a report's verdict share them (an error is never a plain fail)
COLOUR = {"passed": "green", "failed": "red", "error": "magenta", "timeout": "yellow", "memory": "yellow",
          "output_limit": "yellow", "skipped": "bright_black", "infrastructure": "yellow"}

# the same colours on a white HTML page
CSS = {"green": "#1f9d55", "red": "#cc2f3c", "magenta": "#8e44ad", "yellow": "#8a5a00", "bright_black": "#6b7280"}


def colour_of(status: str) -> str:
    """The colour of a status or verdict (``passed``, ``FAIL``, ``infrastructure``...)."""
    status = status.lower()
    for key, mark in MARK.items():
        if status == mark.lower():
            status = key
    return COLOUR.get(status, "white")


def css_colour(status: str) -> str:
    return CSS.get(colour_of(status), "#1d2330")


def css_rules(selector: str, prop: str = "color") -> str:
    """``selector.passed{color:#...}`` rules for every status and verdict (``selector`` e.g. ``.v``)."""
    return " ".join(f"{selector}.{s}{{{prop}:{CSS[c]}}}" for s, c in COLOUR.items())
