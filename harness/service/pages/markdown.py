"""Markdown (an exercise's prompt) as HTML for the pages: CommonMark with tables (markdown-it-py; raw HTML in the
source stays text), then an allow-list sanitiser (nh3) over the result, so nothing a prompt holds can become a
script, a style or an event handler even if the renderer had a bug."""

from __future__ import annotations

import functools

TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul",
        "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "a", "del", "s"}
ATTRIBUTES = {"a": {"href", "title"}, "th": {"style"}, "td": {"style"}, "ol": {"start"}, "code": {"class"}}


@functools.lru_cache(maxsize=1)
def _renderer():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def to_html(text: str, *, shift: int = 0) -> str:
    """Sanitised HTML for ``text`` (safe to mark safe in a template); headings ``shift`` levels down (a prompt's
    own title under the page's h1 becomes an h2)."""
    import nh3

    md = _renderer()
    tokens = md.parse(text)
    for t in tokens:
        if t.type in ("heading_open", "heading_close"):
            t.tag = f"h{min(6, int(t.tag[1]) + shift)}"
    html = md.renderer.render(tokens, md.options, {})
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, url_schemes={"http", "https"},
                     link_rel="noopener noreferrer", filter_style_properties={"text-align"})
