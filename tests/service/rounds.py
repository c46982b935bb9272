"""Helpers of the rounds tests: open an invitation link as a browser would (page, button, session cookie) and
submit through the page's form."""

from __future__ import annotations

import contextlib
import re

import httpx

_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(html: str) -> str:
    m = _CSRF.search(html)
    assert m, html[:2000]
    return m.group(1)


def join(base_url: str, link: str) -> httpx.Client:
    """A new client (a browser of its own) signed in through the invitation ``link``."""
    c = httpx.Client(base_url=base_url, timeout=90)
    path = link[len(base_url):] if link.startswith(base_url) else link
    page = c.get(path)
    assert page.status_code == 200, page.text
    code = path.split("code=", 1)[1]
    r = c.post("/join", data={"csrf": csrf_of(page.text), "code": code})
    assert r.status_code == 303 and r.headers["location"] == "/exercises", r.text
    return c


def page_submit(c: httpx.Client, exercise: str, source: str) -> httpx.Response:
    """Upload through the exercises page's form (what a signed-in browser does)."""
    page = c.get("/exercises")
    return c.post("/submit", data={"csrf": csrf_of(page.text), "exercise": exercise, "track": "auto"},
                  files={"file": ("solution.py", source.encode())})


@contextlib.contextmanager
def signed_in(base_url: str, token: str):
    """A client signed in on the pages with ``token`` (the sign-in form; the cookie is a session id)."""
    with httpx.Client(base_url=base_url, timeout=90) as c:
        page = c.get("/login")
        r = c.post("/login", data={"csrf": csrf_of(page.text), "token": token, "next": "/"})
        assert r.status_code == 303 and "grader_session" in c.cookies, r.text
        yield c
