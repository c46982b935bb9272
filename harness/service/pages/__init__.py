"""Server-rendered pages (Jinja2, no build step, no scripts but the compare table's hashed sorter)."""

from harness.service.pages.views import router  # noqa: F401
