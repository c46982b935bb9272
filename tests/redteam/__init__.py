"""The red-team corpus: hostile or broken submissions, one per file; ``cases.py`` is the manifest."""
