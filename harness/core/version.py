"""The harness's version: one string, at the bottom of the house, so every part can read it without importing
the package's face (``harness/__init__.py``, which re-exports :func:`harness.grade` from the grading floor)."""

__version__ = "0.1.0"
