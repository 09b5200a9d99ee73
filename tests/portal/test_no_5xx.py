"""No input makes the API answer 5xx: every route (collected from the URL resolver) under an HTML
Accept header, a deeply nested JSON body, and malformed bodies on every write route."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.models import Action, ClusterAccount
from portal.api.serializers import BriefRelatedField
from tests.portal.routes import route_path, safe_routes, unsafe_routes

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api(world: None, admin_user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def test_html_accept_header_is_never_a_5xx(admin_api: APIClient) -> None:
    routes = [(r, c) for r, c in safe_routes() if r.startswith("api/") and "docs" not in r]
    assert len(routes) >= 60
    statuses: dict[int, int] = {}
    for regex, cls in routes:
        path = route_path(regex, cls, missing_ok=True)
        res = admin_api.get(path, HTTP_ACCEPT="text/html")
        assert res.status_code < 500, (path, res.status_code)
        statuses[res.status_code] = statuses.get(res.status_code, 0) + 1
        # a browser's Accept (text/html first, */* after) gets the JSON
        browser = admin_api.get(path, HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
        assert browser.status_code < 500, (path, browser.status_code)
        if browser.status_code == 200 and "schema" not in regex:
            assert browser["Content-Type"] == "application/json", path
    # JSON only, deliberately: strict text/html is 406 (the routes that render their own format aside)
    assert statuses.get(406, 0) >= 50, statuses


def test_the_brief_field_has_hashable_choices(world: None) -> None:
    from inventory.models import Node

    field = BriefRelatedField(queryset=Node.objects.order_by("pk"))
    choices = field.get_choices(cutoff=3)
    first = Node.objects.order_by("pk").first()
    assert first is not None
    assert list(choices)[0] == first.pk and choices[first.pk] == str(first)
    assert len(choices) == 3


# routes that never read their body (the job and the runbook-run cancels among them)
IGNORE_BODY = ["acknowledge", "cancel", "cancel", "check", "continue", "plan", "resolve"]
NOT_JSON = ["remote-write"]  # snappy protobuf: a JSON body is a 415


@pytest.mark.parametrize("depth", [50_000, 2_000, 33])
def test_deeply_nested_json_is_a_400_on_every_write(admin_api: APIClient, depth: int) -> None:
    body = "[" * depth + "]" * depth
    routes = [(r, m, c) for r, m, c in unsafe_routes() if m != "DELETE"]
    refused = 0
    ignored: list[str] = []
    not_json: list[str] = []
    for regex, method, cls in routes:
        path = route_path(regex, cls)
        res = admin_api.generic(method, path, data=body, content_type="application/json")
        assert res.status_code < 500, (method, path, res.status_code, res.content[:300])
        if res.status_code == 400:
            assert "nested deeper than 32 levels" in res.content.decode(), (method, path, res.content[:300])
            refused += 1
        elif res.status_code == 415:
            not_json.append(regex)
        else:  # a route that never reads its body (a cancel, the fabric plan): it just acts
            assert res.status_code in (200, 201, 202), (method, path, res.status_code)
            ignored.append(regex)
    assert refused == len(routes) - len(ignored) - len(not_json)
    assert sorted(r.rsplit("/", 2)[-2] for r in ignored) == IGNORE_BODY
    assert sorted(r.rsplit("/", 2)[-2].replace("\\", "") for r in not_json) == NOT_JSON


def test_json_nested_within_the_limit_still_parses(admin_api: APIClient) -> None:
    res = admin_api.post(
        "/api/jobs/actions/",
        data=json.dumps({"kind": "drain", "params": {"a": [[[1]]]}}),
        content_type="application/json",
    )
    assert res.status_code == 400 and res.json() == {"node": ["A node is required."]}


BAD_BODIES: list[Any] = [
    {},
    [],
    [{}],
    "text",
    None,
    123,
    {"id": 2**70, "name": 2**70, "pk": "x"},
    {"name": "nul\u0000byte", "hostname": "nul\u0000", "description": "\u0000"},
    {"params": {"name": "j", "script": "#!/bin/sh\n", "environment": {"A": "\u0000"}}, "kind": "submit"},
    {"kind": "submit", "params": {"cluster": 1, "user": 2}},
    {"kind": "submit", "params": {"name": ["x"], "script": {"a": 1}}},
    {"kind": "drain", "node": {"id": {"id": 1}}},
    {"defaults": {"k": "\u0000"}, "locked_fields": ["\u0000"], "name": "t", "script": "#!/bin/sh"},
    {"cluster": "not-a-number", "site": [1], "rack": {"id": "x"}},
]


def test_malformed_bodies_on_every_write_route_are_4xx(admin_api: APIClient) -> None:
    routes = unsafe_routes()
    writes = [(r, m, c) for r, m, c in routes if m != "DELETE"]
    tried = 0
    for regex, method, cls in writes:
        path = route_path(regex, cls)
        for body in BAD_BODIES:
            res = admin_api.generic(method, path, data=json.dumps(body), content_type="application/json")
            assert res.status_code < 500, (method, path, body, res.status_code, res.content[:300])
            tried += 1
    for regex, method, cls in routes:
        if method == "DELETE":
            res = admin_api.delete(route_path(regex, cls))
            assert res.status_code < 500, (regex, res.status_code, res.content[:300])
    assert tried == len(writes) * len(BAD_BODIES)


def test_submit_without_a_job_name_is_a_400_with_field_errors(
    world: None, researcher_user: Any, api_as: Any
) -> None:
    from inventory.models import Cluster

    cluster = ClusterAccount.objects.get(user=researcher_user).cluster
    assert isinstance(cluster, Cluster)
    api = api_as(researcher_user)
    before = Action.objects.count()
    res = api.post(
        "/api/jobs/actions/",
        {"kind": "submit", "cluster": cluster.pk, "params": {"script": "#!/bin/sh\n"}},
        format="json",
    )
    assert res.status_code == 400
    assert res.json() == {"params": {"name": ["This field is required."]}}
    res = api.post(
        "/api/jobs/actions/", {"kind": "submit", "cluster": cluster.pk, "params": {}}, format="json"
    )
    assert res.json() == {
        "params": {"name": ["This field is required."], "script": ["This field is required."]}
    }
    res = api.post(
        "/api/jobs/actions/",
        {
            "kind": "submit",
            "cluster": cluster.pk,
            "params": {"name": "j", "script": "#!/bin/sh\n", "cluster": 1},
        },
        format="json",
    )
    assert res.status_code == 400
    assert res.json() == {"params": {"non_field_errors": ["Unknown job fields: cluster"]}}
    res = api.post(
        "/api/jobs/actions/",
        {
            "kind": "submit",
            "cluster": cluster.pk,
            "params": {"name": "j", "script": "#!/bin/sh\n", "gpus": "many"},
        },
        format="json",
    )
    assert res.json() == {"params": {"gpus": ["A valid integer is required."]}}
    assert Action.objects.count() == before


def test_the_service_refuses_missing_and_colliding_fields_too(world: None, researcher_user: Any) -> None:
    from django.core.exceptions import ValidationError

    from jobs.services import action_request

    cluster = ClusterAccount.objects.get(user=researcher_user).cluster
    with pytest.raises(ValidationError) as missing:
        action_request("submit", user=researcher_user, cluster=cluster, params={"script": "#!/bin/sh"})
    assert missing.value.message_dict == {"params": ["Required job fields: name"]}
    with pytest.raises(ValidationError) as colliding:
        action_request(
            "submit",
            user=researcher_user,
            cluster=cluster,
            params={"name": "j", "script": "#!/bin/sh", "user": 1},
        )
    assert colliding.value.message_dict == {"params": ["Unknown job fields: user"]}
