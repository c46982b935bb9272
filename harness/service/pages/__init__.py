"""Server-rendered pages (Jinja2, no build step, no scripts but the compare table's hashed sorter): the
submission pages (views), rounds and invitations (rounds), staff tokens (staff)."""

from harness.service.pages.views import router  # noqa: F401
from harness.service.pages import rounds as _rounds, staff as _staff  # noqa: E402

router.include_router(_rounds.router)
router.include_router(_staff.router)
