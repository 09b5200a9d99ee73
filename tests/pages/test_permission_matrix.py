"""Who may do what, page by page: admin, operator, researcher, anonymous. A refused write changes nothing."""

from __future__ import annotations

import pytest

from jobs.models import Action, Job, JobTemplate
from portal.models import AuditEntry

pytestmark = pytest.mark.django_db

ROLES = ("admin", "operator", "researcher", None)

# (method, url, expected status per role in ROLES order); {job}, {node}, {tpl} are filled in.
MATRIX = [
    ("get", "/jobs/", (200, 200, 200, 302)),
    ("get", "/jobs/?scope=all", (200, 200, 200, 302)),
    ("get", "/jobs/{job}/", (200, 200, 404, 302)),  # the job belongs to another researcher
    ("get", "/jobs/submit/", (200, 200, 200, 302)),
    ("get", "/jobs/actions/", (200, 200, 200, 302)),
    ("get", "/jobs/nodes/", (200, 200, 403, 302)),
    ("get", "/jobs/templates/", (200, 200, 200, 302)),
    ("get", "/jobs/templates/add/", (200, 403, 403, 302)),
    ("get", "/audit/", (200, 403, 403, 302)),
    ("post", "/jobs/nodes/", (200, 200, 403, 302)),
    ("post", "/jobs/{job}/cancel/", (302, 302, 404, 302)),
    ("post", "/jobs/templates/add/", (302, 403, 403, 302)),
]


@pytest.fixture
def world(sim_cluster, make_user):
    users = {
        "admin": make_user("ada", "admin"),
        "operator": make_user("otto", "operator"),
        "researcher": make_user("alice", "researcher"),
        None: None,
    }
    carol = make_user("carol", "researcher")
    job = Job.objects.create(
        cluster=sim_cluster, job_id=7, name="x", user="carol", owner=carol, state="RUNNING"
    )
    node = sim_cluster.nodes.first()
    return users, {"job": job.pk, "node": node.pk}, node


def _post_data(url, node):
    if url == "/jobs/nodes/":
        return {"operation": "resume", "nodes": [node.pk]}
    if url == "/jobs/templates/add/":
        return {"name": "t", "script": "#!/bin/bash\n", "defaults": "{}"}
    return {}


@pytest.mark.parametrize(("method", "url", "expected"), MATRIX)
def test_permission_matrix(world, client_as, method, url, expected, django_capture_on_commit_callbacks):
    from django.test import Client

    users, ids, node = world
    for role, status in zip(ROLES, expected, strict=True):
        user = users[role]
        c = client_as(user) if user is not None else Client()
        before = (Action.objects.count(), JobTemplate.objects.count(), AuditEntry.objects.count())
        with django_capture_on_commit_callbacks(execute=True):
            r = getattr(c, method)(url.format(**ids), _post_data(url, node) if method == "post" else None)
        assert r.status_code == status, (role, url, r.status_code)
        refused = role is None or status in (403, 404)
        if method == "post" and refused:
            after = (Action.objects.count(), JobTemplate.objects.count(), AuditEntry.objects.count())
            assert after == before, (role, url)


def test_researcher_sees_only_own_jobs_unless_the_setting_allows(world, client_as, settings):
    users, ids, _node = world
    alice = users["researcher"]
    body = client_as(alice).get("/jobs/?scope=all").content.decode()
    assert f'id="job-{ids["job"]}"' not in body
    settings.PORTAL_RESEARCHERS_SEE_ALL_JOBS = True
    body = client_as(alice).get("/jobs/?scope=all").content.decode()
    assert f'id="job-{ids["job"]}"' in body
    assert client_as(alice).get(f"/jobs/{ids['job']}/").status_code == 200
    # seeing is not cancelling
    assert client_as(alice).post(f"/jobs/{ids['job']}/cancel/").status_code == 403
    assert Action.objects.count() == 0


def test_researcher_sees_the_shared_queue_summary(world, client_as):
    users, _ids, _node = world
    body = client_as(users["researcher"]).get("/jobs/").content.decode()
    assert "Shared queue" in body and "carol" not in body
