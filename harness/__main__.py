"""`python -m harness ...` is `grade ...` (e.g. where the console script is not on PATH)."""

from harness.launch import main

main()
