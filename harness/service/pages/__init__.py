"""Server-rendered pages (Jinja2, no build step, no scripts but two hashed ones: local times on hover
(timestamps.py) and the compare table's sorter); prompts as sanitised Markdown (markdown.py)."""

from harness.service.pages.views import router  # noqa: F401
