"""One submission, graded: the engine, the submission file checks, the pytest plugin that runs a hidden suite
in-process, and the arrays kept for plots. The only door from ``harness`` into ``graders/``."""
