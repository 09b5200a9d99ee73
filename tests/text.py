"""What a person reads on a page: its <main> as text (tags and scripts removed, whitespace collapsed,
entities decoded), for tests that assert what a page must say."""

from __future__ import annotations

import html
import re
from typing import Any


def page_text(page: Any) -> str:
    """The text of ``page`` (a test client response or HTML text) from <main> on."""
    body = page if isinstance(page, str) else page.content.decode()
    start = body.find("<main")
    body = body[start:] if start >= 0 else body
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return re.sub(r"\s+", " ", text).strip()
