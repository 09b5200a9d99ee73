"""Every page reachable from the navigation, for each role and in both languages, tells the truth.

The demo (``scripts/demo``: its seed and simulation) is walked in headless Chromium as the admin and
the researcher, in English and in Simplified Chinese, following the links of each page (one page per
URL shape: ``/inventory/nodes/<n>/`` is opened once). Each page must show no console error, no Python
``None``, no ``{`` of a dict or JSON, no ``+00:00`` or microseconds of a raw timestamp, and in
zh-Hans no string of the catalogue left in English (a visible line that is a msgid whose msgstr
differs, or a longer msgid anywhere in the text). Text in ``<pre>``/``<code>`` (scripts, output,
commands) is what the cluster wrote and is not checked.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.demo.test_demo_e2e import ARGS, CHROMIUM, _login, demo  # noqa: F401  (the demo fixture)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
PAGES_PER_WALK = 60
SKIP = re.compile(r"^/(logout|admin|api|i18n|static|ws)/|/(delete|revoke)/$|/add/$|/edit/$")
LEAKS = {
    "None": re.compile(r"\bNone\b"),
    "{": re.compile(r"\{"),
    "+00:00": re.compile(r"\+00:00"),
    "microseconds": re.compile(r"\d\d:\d\d:\d\d\.\d{3,}"),
}
VISIBLE_TEXT = """() => {
  const body = document.body.cloneNode(true);
  body.querySelectorAll('pre, code, script, style, noscript, template').forEach(e => e.remove());
  document.documentElement.appendChild(body);  // innerText needs the clone laid out
  body.style.position = 'absolute'; body.style.left = '-99999px';
  const text = body.innerText;
  body.remove();
  return text;
}"""


def _unquote(chunks: str) -> str:
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', chunks)).replace('\\"', '"').replace("\\n", "\n")


def translated_msgids() -> tuple[set[str], list[str]]:
    """(short msgids, long msgids) of the catalogue whose Chinese differs from the English and that
    have no placeholder; a short one (one or two words) counts only as a whole visible line."""
    short, long = set(), []
    for entry in PO.read_text().split("\n\n"):
        m = re.search(r'^msgid ((?:".*"\n)+)msgstr ((?:".*"\n?)+)', entry, re.M)
        if not m or "msgctxt" in entry:
            continue
        msgid, msgstr = _unquote(m.group(1)), _unquote(m.group(2))
        if not msgid or not msgstr or msgid == msgstr or re.search(r"%|\{", msgid):
            continue
        if not re.search(r"[A-Za-z]{3}", msgid):
            continue
        (long.append(msgid) if len(msgid.split()) >= 3 else short.add(msgid.strip()))
    return short, long


def page_problems(text: str, lang: str, short: set[str], long: list[str]) -> list[str]:
    found = []
    for name, rx in LEAKS.items():
        for m in rx.finditer(text):
            found.append(f"{name} | {text[max(0, m.start() - 40) : m.end() + 40]!r}")
    if lang != "en":
        for line in re.split(r"[\n\t]", text):
            if line.strip() in short:
                found.append(f"English | {line.strip()!r}")
        for msgid in long:
            if re.search(r"(?<![A-Za-z])" + re.escape(msgid) + r"(?![A-Za-z])", text):
                found.append(f"English | {msgid!r}")
    return found


def test_page_problems_finds_each_kind_of_leak():
    short, long = {"Cluster"}, ["Nothing here yet."]
    text = "集群\nCluster\n\tBMC None\t{'oversubscription': 1}\n2026-12-01 10:11:18.103279+00:00\nNothing here yet."
    found = page_problems(text, "zh-hans", short, long)
    assert [f.split(" | ")[0] for f in found] == ["None", "{", "+00:00", "microseconds", "English", "English"]
    assert page_problems("集群 Clusters gb10-desk 2 分钟前", "zh-hans", short, long) == []
    assert page_problems("Cluster", "en", short, long) == []


def test_the_catalogue_gives_both_kinds_of_msgid():
    short, long = translated_msgids()
    assert "Cluster" in short and "Nodes" in short
    assert "Nothing here yet." in long


def _walk(browser, base: str, role: str, password: str, lang: str, short, long) -> dict[str, list[str]]:
    context = browser.new_context(locale=lang, extra_http_headers={"Accept-Language": lang})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    _login(page, base, role, password)
    problems: dict[str, list[str]] = {}
    queue, seen, opened = [f"{base}/"], set(), 0
    while queue and opened < PAGES_PER_WALK:
        url = queue.pop(0)
        shape = re.sub(r"\d+|[0-9a-f-]{36}", "N", urlparse(url).path)
        if shape in seen:
            continue
        seen.add(shape)
        errors.clear()
        response = page.goto(url, wait_until="load")
        page.wait_for_timeout(500)  # htmx loads (outputs, charts) and the first live snapshot
        opened += 1
        assert response is not None and response.status == 200, (
            f"{role} {lang} {url}: {response and response.status}"
        )
        found = page_problems(page.evaluate(VISIBLE_TEXT), lang, short, long)
        found += [f"console: {e}" for e in errors]
        if found:
            problems[urlparse(url).path] = list(dict.fromkeys(found))
        for href in page.eval_on_selector_all("a[href^='/']", "els => els.map(e => e.getAttribute('href'))"):
            path = urlparse(href).path
            if "?" not in href and "#" not in href and not SKIP.search(path):
                queue.append(base + path)
    context.close()
    assert opened >= 10, f"{role} {lang}: only {opened} pages reachable"
    return problems


@pytest.mark.parametrize("lang", ["en", "zh-hans"])
def test_every_page_for_each_role_shows_no_raw_values_and_no_untranslated_strings(demo, lang):  # noqa: F811
    from playwright.sync_api import sync_playwright

    base, _proc, log, _copy = demo
    passwords = dict(re.findall(r"(admin|researcher)\s+login: \S+\s+password: (\S+)", log.read_text()))
    short, long = translated_msgids()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            problems = {
                role: _walk(browser, base, role, passwords[role], lang, short, long)
                for role in ("admin", "researcher")
            }
        finally:
            browser.close()
    assert problems == {"admin": {}, "researcher": {}}
