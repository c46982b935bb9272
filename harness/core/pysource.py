"""Parsing a candidate's Python source on the host, one parse at a time per process.

CPython 3.11 keeps the AST constructor's recursion depth in state shared by every thread of the interpreter; two
threads building ASTs at once can corrupt it, and ``ast.parse`` then raises ``SystemError: AST constructor
recursion depth mismatch`` for a valid file (python/cpython#106905). `grade serve` parses each submission on its
intake threads (the track detection), so concurrent submissions hit it: seen as an HTTP 500 under load. Every
parse of a submission goes through :func:`parse`, which holds a process-wide lock (a parse takes ~0.1-1 ms)."""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, never two at once in this process. Raises what ``ast.parse`` raises."""
    with _LOCK:
        return ast.parse(source)
