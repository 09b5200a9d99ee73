"""The UI speaks Simplified Chinese: browser preference honoured, a language switch, every msgid translated."""

from __future__ import annotations

import gettext
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.lab import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
PO = ROOT / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"

pytestmark = pytest.mark.django_db


def test_accept_language_zh_hans_renders_chinese_navigation(client, make_user):
    user = make_user("li", "researcher")
    client.force_login(user)
    html = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5").content.decode()
    assert '<html lang="zh-hans"' in html
    assert ">概览<" in html and ">作业<" in html and ">退出登录<" in html
    assert ">Overview<" not in html


def test_english_is_the_default(client, make_user):
    client.force_login(make_user("li", "researcher"))
    html = client.get("/").content.decode()
    assert ">Overview<" in html and "概览" not in html


def test_the_language_switch_sets_chinese(client, make_user):
    client.force_login(make_user("li", "researcher"))
    resp = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    assert resp.status_code == 302
    html = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert ">概览<" in html


def test_the_login_page_and_its_error_are_chinese(client):
    html = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "登录 Rackpilot" in html and "用户名" in html and "密码" in html


def test_every_message_is_translated_and_the_committed_mo_matches_the_po(tmp_path):
    text = PO.read_text()
    entries = text.split("\n\n")[1:]
    untranslated = [e for e in entries if e.rstrip().endswith('msgstr ""')]
    assert untranslated == []
    assert "#, fuzzy" not in text
    if shutil.which("msgfmt") is None:
        skip_or_fail("gettext (msgfmt) is not installed: apt-get install gettext")
    fresh = tmp_path / "django.mo"
    subprocess.run(["msgfmt", "--check", "-o", str(fresh), str(PO)], check=True, capture_output=True)
    with fresh.open("rb") as a, PO.with_suffix(".mo").open("rb") as b:
        assert gettext.GNUTranslations(b)._catalog == gettext.GNUTranslations(a)._catalog


@pytest.mark.parametrize(
    ("role", "menus", "absent"),
    [
        ("admin", ["Operations", "Inventory", "Monitoring"], []),
        ("operator", ["Operations", "Inventory", "Monitoring"], []),
        ("researcher", ["Inventory"], ["/jobs/nodes/", "/audit/"]),
    ],
)
def test_the_top_bar_groups_what_each_role_may_open(client, make_user, role, menus, absent):
    """The top bar fits one line: operations and monitoring set-up are menus, shown to the roles
    that may open something in them, in the page's language."""
    import re

    from django.urls import reverse

    client.force_login(make_user("u", role))
    html = client.get("/jobs/").content.decode()
    nav = html[html.index("<nav") : html.index("</nav>")]
    assert re.findall(r"<summary>([^<]+)</summary>", nav) == menus
    if role == "admin":
        ops = nav[nav.index("<summary>Operations</summary>") :]
        assert reverse("jobs:node_ops") in ops[: ops.index("</details>")]
        assert reverse("audit_list") in ops[: ops.index("</details>")]
    for url in absent:
        assert url not in nav
    zh = client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    if "Operations" in menus:
        assert "<summary>运维</summary>" in zh
    if "Monitoring" in menus:
        assert "<summary>监控</summary>" in zh
