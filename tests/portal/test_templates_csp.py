"""The Content-Security-Policy allows no inline script, event handler or style: no template has one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)
STYLE_ATTR = re.compile(r"\sstyle\s*=", re.I)
STYLE_ELEMENT = re.compile(r"<style[\s>]", re.I)
JS_URL = re.compile(r"(href|src|action)\s*=\s*[\"']\s*javascript:", re.I)


def test_there_are_templates_to_check() -> None:
    assert len(TEMPLATES) >= 30


def test_no_template_has_inline_script_handlers_or_styles() -> None:
    found = []
    for path in TEMPLATES:
        text = path.read_text()
        for name, pattern in [
            ("inline <script>", INLINE_SCRIPT),
            ("event handler attribute", HANDLER),
            ("style attribute", STYLE_ATTR),
            ("<style> element", STYLE_ELEMENT),
            ("javascript: URL", JS_URL),
        ]:
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert found == []


def test_the_patterns_catch_what_they_are_for() -> None:
    assert INLINE_SCRIPT.search("<script>alert(1)</script>")
    assert not INLINE_SCRIPT.search('<script src="/static/js/portal.js" defer></script>')
    assert HANDLER.search('<select onchange="this.form.submit()">')
    assert not HANDLER.search('<select data-autosubmit name="language">')
    assert STYLE_ATTR.search('<tr style="height: 2em">')
    assert JS_URL.search('<a href="javascript:void(0)">')
