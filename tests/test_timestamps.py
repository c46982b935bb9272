"""Pages show times relative to now, past and to come (a round's close), with the exact UTC time on hover."""

import datetime as dt

from harness.service.pages.timestamps import relative, when

NOW = dt.datetime(2026, 12, 1, 16, 0, tzinfo=dt.timezone.utc)


def test_relative_times_past_and_to_come():
    ago = {5: "just now", 42: "42 s ago", 150: "2 min ago", 7200: "2 h ago", 3 * 86400: "3 days ago"}
    for s, text in ago.items():
        assert relative(NOW - dt.timedelta(seconds=s), NOW) == text
    ahead = {45 * 60: "in 45 min", 5 * 3600: "in 5 h", 86400 + 5: "in 1 day", 3 * 86400: "in 3 days"}
    for s, text in ahead.items():
        assert relative(NOW + dt.timedelta(seconds=s), NOW) == text


def test_a_deadline_renders_as_time_with_the_exact_moment_on_hover():
    html = str(when("2026-12-01T17:10:43.662000Z", NOW))
    assert html == '<time datetime="2026-12-01T17:10:43Z" title="2026-12-01 17:10:43 UTC">in 1 h</time>'


def test_a_deadline_beside_a_countdown_shows_its_clock_time():
    assert str(when("2026-12-01T17:10:43Z", NOW, exact=True)) == \
        '<time datetime="2026-12-01T17:10:43Z" title="2026-12-01 17:10:43 UTC">17:10 UTC</time>'
    assert ">2026-12-03 09:00 UTC<" in str(when("2026-12-03T09:00:00Z", NOW, exact=True))
