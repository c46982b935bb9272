"""The candidate's side of attention-grader: `grade check` (the public test vectors, locally) and `grade submit`.

Standard library and NumPy only (torch only for the torch track's check); nothing of the grader, the references,
the suites or the mistake catalogue. The full package uses it as is; `grade kit build` copies it into the
candidate kit as `attention_kit` (hence relative imports only)."""

__version__ = "0.1.0"
