"""Attention grader harness: CLI, sandbox, protocol, checks and reports (trusted side)."""

__version__ = "0.1.0"
