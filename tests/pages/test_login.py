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


@override_settings(PORTAL_LOGIN_ATTEMPTS=4)
def test_lockout_counts_every_spelling_that_logs_into_the_same_account(make_user):
    # given bob, and four failures under names Django's login normalises to "bob"
    make_user("bob", "researcher")
    spellings = [" bob", "bob ", "\tbob", "ｂｏｂ"]  # the last is full-width: NFKC makes it "bob"
    for i, name in enumerate(spellings):
        c = Client(REMOTE_ADDR=f"10.1.0.{i + 1}")  # a new address each time: the per-IP limit stays clear
        assert c.post("/login/", {"username": name, "password": "wrong"}).status_code == 200
    # when the right password comes, under any spelling and from yet another address, it is refused
    for i, name in enumerate(["bob", *spellings]):
        c = Client(REMOTE_ADDR=f"10.2.0.{i + 1}")
        r = c.post("/login/", {"username": name, "password": "pw-bob"})
        assert r.status_code == 429, name
        assert "_auth_user_id" not in c.session


@override_settings(PORTAL_LOGIN_ATTEMPTS=2)
def test_normalised_names_really_authenticate_so_the_key_matters(make_user):
    # the campaign's premise, locked: Django logs " bob" and "ｂｏｂ" into bob
    bob = make_user("bob", "researcher")
    for name in (" bob", "ｂｏｂ"):
        c = Client()
        assert c.post("/login/", {"username": name, "password": "pw-bob"}).status_code == 302
        assert c.session["_auth_user_id"] == str(bob.pk)


@override_settings(PORTAL_LOGIN_ATTEMPTS=2, PORTAL_TRUSTED_PROXIES=[])
def test_forwarded_for_is_ignored_without_trusted_proxies(make_user):
    # given failures from one peer that claims a new X-Forwarded-For address each time
    make_user("bob", "researcher")
    make_user("carol", "researcher")
    for i, name in enumerate(["bob", "carol"]):
        c = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=f"203.0.113.{i + 1}")
        c.post("/login/", {"username": name, "password": "wrong"})
    # then the peer is limited whatever it claims
    c = Client(REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.99")
    assert c.post("/login/", {"username": "dave", "password": "x"}).status_code == 429


@override_settings(PORTAL_LOGIN_ATTEMPTS=2, PORTAL_TRUSTED_PROXIES=["10.9.0.0/24"])
def test_forwarded_for_counts_the_client_behind_a_trusted_proxy(make_user):
    make_user("bob", "researcher")
    make_user("carol", "researcher")
    proxy = {"REMOTE_ADDR": "10.9.0.5"}
    # given two failures from one client behind the proxy (its own claim on the left is not believed)
    for i, name in enumerate(["bob", "carol"]):
        c = Client(**proxy, HTTP_X_FORWARDED_FOR=f"198.51.100.{i + 1}, 203.0.113.7")
        c.post("/login/", {"username": name, "password": "wrong"})
    # then that client is limited, and another client behind the same proxy is not
    c = Client(**proxy, HTTP_X_FORWARDED_FOR="198.51.100.50, 203.0.113.7")
    assert c.post("/login/", {"username": "dave", "password": "x"}).status_code == 429
    other = Client(**proxy, HTTP_X_FORWARDED_FOR="203.0.113.8")
    assert other.post("/login/", {"username": "bob", "password": "pw-bob"}).status_code == 302
