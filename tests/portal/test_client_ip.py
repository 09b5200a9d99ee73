"""The per-IP limit's address: X-Forwarded-For is believed only from PORTAL_TRUSTED_PROXIES."""

from __future__ import annotations

import pytest
from django.test import RequestFactory, override_settings

from portal.clientip import client_ip


def _ip(remote: str, forwarded: str | None = None) -> str:
    meta = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_ip(RequestFactory().get("/", **meta))


@override_settings(PORTAL_TRUSTED_PROXIES=[])
def test_default_trusts_no_one() -> None:
    assert _ip("127.0.0.1", "203.0.113.1") == "127.0.0.1"


@pytest.mark.parametrize(
    ("remote", "forwarded", "expected"),
    [
        ("10.0.0.2", "203.0.113.1", "203.0.113.1"),  # one trusted proxy
        ("10.0.0.2", "198.51.100.9, 203.0.113.1", "203.0.113.1"),  # a forged hop on the left is ignored
        ("10.0.0.2", "203.0.113.1, 10.0.0.3", "203.0.113.1"),  # two trusted proxies in a row
        ("10.0.0.2", "10.0.0.4, 10.0.0.3", "10.0.0.4"),  # every hop trusted: the first one
        ("10.0.0.2", "not-an-ip", "10.0.0.2"),  # a malformed chain counts the proxy
        ("10.0.0.2", "", "10.0.0.2"),
        ("192.0.2.7", "203.0.113.1", "192.0.2.7"),  # an untrusted peer's header is ignored
        ("::1", "2001:db8::5", "2001:db8::5"),  # IPv6
    ],
)
@override_settings(PORTAL_TRUSTED_PROXIES=["10.0.0.0/24", "::1"])
def test_trusted_proxies(remote: str, forwarded: str, expected: str) -> None:
    assert _ip(remote, forwarded) == expected
