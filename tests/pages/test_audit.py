"""The audit log: entries written by services, the admin page and the read-only API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone

from inventory.models import Site
from portal.models import AuditEntry
from portal.services import instance_delete, instance_save

pytestmark = pytest.mark.django_db


def _client(user):
    c = Client()
    c.force_login(user)
    return c


def test_inventory_change_is_audited_with_before_and_after(admin_user):
    # given a site created and renamed through the service
    site = instance_save(Site(name="lab-a"), user=admin_user)
    site.name = "lab-b"
    instance_save(site, user=admin_user)
    # then two entries, the update holding only the changed field
    create, update = AuditEntry.objects.order_by("id")
    assert (create.action, create.username, create.object_repr) == ("create", "ada", "lab-a")
    assert (update.action, update.before["name"], update.after["name"]) == ("update", "lab-a", "lab-b")
    assert set(update.before) == set(update.after) == {"name", "last_updated"}


def test_audit_page_lists_and_filters_for_admin(admin_user, operator_user):
    site = instance_save(Site(name="lab-a"), user=admin_user)
    instance_save(Site(name="lab-z"), user=operator_user)
    instance_delete(site, user=admin_user)
    c = _client(admin_user)
    # when the admin filters by user and action
    r = c.get("/audit/", {"user": "ada", "action": "delete"})
    # then only the deletion shows, with what was deleted
    assert r.status_code == 200
    body = r.content.decode()
    assert "1 result" in body
    assert "lab-a" in body and "lab-z" not in body
    # and the htmx request gets the table partial only
    r = c.get("/audit/", {"model": "inventory.site"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert b"<html" not in r.content
    assert b'id="object-table"' in r.content and b"3 results" in r.content


def test_audit_page_refused_to_operator_and_researcher(operator_user, researcher_user):
    for user in (operator_user, researcher_user):
        assert _client(user).get("/audit/").status_code == 403
    assert Client().get("/audit/").status_code == 302  # to the login page


def test_audit_api_filters_and_is_read_only(api, admin_user, operator_user):
    instance_save(Site(name="lab-a"), user=admin_user)
    instance_save(Site(name="lab-o"), user=operator_user)
    old = AuditEntry.objects.get(object_repr="lab-a")
    old.ts = timezone.now() - dt.timedelta(days=10)
    old.save()
    # filter by user
    r = api.get("/api/audit/", {"user": "otto"})
    assert r.status_code == 200
    assert [e["object_repr"] for e in r.json()["results"]] == ["lab-o"]
    assert r.json()["results"][0]["model"] == "inventory.site"
    assert r.json()["results"][0]["user"] == "otto"
    # filter by date range (date only = the whole day)
    day = (timezone.now() - dt.timedelta(days=10)).date().isoformat()
    r = api.get("/api/audit/", {"since": day, "until": day})
    assert [e["object_repr"] for e in r.json()["results"]] == ["lab-a"]
    r = api.get("/api/audit/", {"since": (timezone.now() - dt.timedelta(days=1)).isoformat()})
    assert [e["object_repr"] for e in r.json()["results"]] == ["lab-o"]
    # filter by object
    r = api.get("/api/audit/", {"model": "inventory.site", "object_id": str(old.object_id)})
    assert r.json()["count"] == 1
    # read-only: nobody holds add/delete on the audit log and the viewset has no write routes
    count = AuditEntry.objects.count()
    assert api.post("/api/audit/", {"action": "create"}, format="json").status_code == 403
    assert api.delete(f"/api/audit/{old.pk}/").status_code == 403
    assert AuditEntry.objects.count() == count


def test_audit_api_refused_without_view_permission(api_as, operator_user, researcher_user):
    for user in (operator_user, researcher_user):
        assert api_as(user).get("/api/audit/").status_code == 403
    assert api_as(None).get("/api/audit/").status_code in (401, 403)


def test_audit_api_query_count_does_not_grow(api, admin_user, django_assert_max_num_queries):
    for i in range(2):
        instance_save(Site(name=f"s{i}"), user=admin_user)
    api.get("/api/audit/")  # warm the permission and content-type caches
    with django_assert_max_num_queries(6) as small:
        api.get("/api/audit/")
    for i in range(2, 50):
        instance_save(Site(name=f"s{i}"), user=admin_user)
    with django_assert_max_num_queries(6) as big:
        api.get("/api/audit/")
    assert len(small.captured_queries) == len(big.captured_queries)
