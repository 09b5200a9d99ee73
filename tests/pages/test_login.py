"""Login is Django's, rate-limited per IP and per user name."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


@override_settings(PORTAL_LOGIN_ATTEMPTS=3)
def test_login_refused_with_429_after_repeated_failures(researcher_user):
    c = Client()
    for _ in range(3):
        r = c.post("/login/", {"username": "alice", "password": "wrong"})
        assert r.status_code == 200  # the form again, with its error
    # when the limit is reached even the right password is refused
    r = c.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert r.status_code == 429
    assert "Too many failed logins" in r.content.decode()
    assert "_auth_user_id" not in c.session


@override_settings(PORTAL_LOGIN_ATTEMPTS=3)
def test_good_login_works_within_the_limit(researcher_user):
    c = Client()
    for _ in range(2):
        c.post("/login/", {"username": "alice", "password": "wrong"})
    r = c.post("/login/", {"username": "alice", "password": "pw-alice"})
    assert r.status_code == 302
    assert c.session["_auth_user_id"] == str(researcher_user.pk)


@override_settings(PORTAL_LOGIN_ATTEMPTS=2)
def test_failures_for_one_user_do_not_lock_out_another_from_another_ip(researcher_user, make_user):
    make_user("bob", "researcher")
    c = Client(REMOTE_ADDR="10.0.0.1")
    for _ in range(2):
        c.post("/login/", {"username": "alice", "password": "wrong"})
    assert c.post("/login/", {"username": "alice", "password": "pw-alice"}).status_code == 429
    other = Client(REMOTE_ADDR="10.0.0.2")
    assert other.post("/login/", {"username": "bob", "password": "pw-bob"}).status_code == 302
