"""Attention grader harness (trusted side). A submission travels:

    cli -> grading.engine -> sandbox -> worker (over session.channel, worker.wire) -> grading.plugin + graders/
        -> graders.mutants (diagnosis) -> core.report -> reports (terminal, HTML, JUnit, Gradescope)

``harness.grade(...)`` is the library entry point (see :func:`harness.grading.engine.grade`).
"""

from harness.core.version import __version__  # noqa: F401  (lives in core: nothing below imports this face)


def grade(**kwargs):
    """Grade one submission; see :func:`harness.grading.engine.grade`. Imported lazily: ``import harness`` stays
    free of NumPy and pytest, so the worker can start before the host pays for them."""
    from harness.grading.engine import grade as _grade

    return _grade(**kwargs)
