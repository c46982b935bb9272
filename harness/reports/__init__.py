"""Showing reports: the terminal summary and full text, one self-contained HTML page with plots, side-by-side
comparison, JUnit XML and Gradescope results. Renderers read reports (core) only; one style table for all."""
