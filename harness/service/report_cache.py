"""Rendered report pages, kept per (submission, audience, report version): a page costs about 1.6 s of CPU
(its plots), so a token holder asking for it again and again must not starve grading. The version is the
submission's fence (``lease``), which every grading that writes a report moves on, so a regrade's page is
rendered afresh. Bounded by bytes, least recently used first out; one per API process."""

from __future__ import annotations

import collections
import threading

MAX_BYTES = 64 * 1024 * 1024


class PageCache:
    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self._pages: collections.OrderedDict[tuple, str] = collections.OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._building: dict[tuple, threading.Lock] = {}

    def get_or_render(self, key: tuple, render) -> tuple[str, bool]:
        """(page, rendered now). Two requests for one page at once render it once."""
        with self._lock:
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key], False
            building = self._building.setdefault(key, threading.Lock())
        with building:
            with self._lock:
                if key in self._pages:
                    return self._pages[key], False
            try:
                page = render()
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                self._pages[key] = page
                self._size += len(page)
                while self._size > self.max_bytes and len(self._pages) > 1:
                    _, old = self._pages.popitem(last=False)
                    self._size -= len(old)
            return page, True
