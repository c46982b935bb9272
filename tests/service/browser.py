"""Headless Chromium for the page tests (Playwright pointed at Debian's chromium; no browser download):
the executable, its flags, the marks every page-test module sets, and one module-scoped browser fixture."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
MARKS = [pytest.mark.browser, pytest.mark.skipif(
    not os.path.exists(CHROMIUM) and os.environ.get("CI") != "true",
    reason="chromium is not installed (apt-get install chromium; CI installs it in .ci/run)")]


def shots(name: str) -> Path:
    """The folder a page-test module saves its screenshots in (artifacts/<name>/), created."""
    folder = ROOT / "artifacts" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
