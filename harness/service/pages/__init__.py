"""Server-rendered pages (Jinja2, no build step, no scripts but two hashed ones: local times on hover
(timestamps.py) and the compare table's sorter): the submission pages (views), rounds and invitations (rounds),
staff tokens (staff); prompts as sanitised Markdown (markdown.py)."""

from harness.service.pages.views import router  # noqa: F401
from harness.service.pages import rounds as _rounds, staff as _staff  # noqa: E402

router.include_router(_rounds.router)
router.include_router(_staff.router)
