"""A world with a row behind every API route: the demo inventory, templates, a job, an account, an alert."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from inventory.models import Node
from inventory.seed import seed_demo
from jobs.models import Action, ClusterAccount, Job, RunbookRun
from jobs.runbooks import runbook_ensure_default
from jobs.seed import jobs_seed_templates
from monitoring.models import Alert, AlertRule, HealthCheck, NodeHealth, PrometheusSource


@pytest.fixture
def world(admin_user: Any, operator_user: Any, researcher_user: Any) -> None:
    clusters = seed_demo()
    jobs_seed_templates(user=admin_user)
    cluster = clusters[0]
    node = Node.objects.filter(cluster=cluster).order_by("pk").first()
    assert node is not None
    ClusterAccount.objects.create(user=researcher_user, cluster=cluster, username="alice")
    Job.objects.create(cluster=cluster, job_id=7, state="RUNNING", user="alice", owner=researcher_user)
    Alert.objects.create(
        rule=AlertRule.objects.order_by("pk").first(),
        target=f"node:{node.pk}",
        node=node,
        severity="warning",
        started_at=timezone.now(),
    )
    Action.objects.create(kind="resume", cluster=cluster, node=node, params={"target": node.hostname})
    check = HealthCheck.objects.create(name="disk", kind="disk_free", params={"path": "/"})
    NodeHealth.objects.create(health_check=check, node=node, status="failing", message="/: 2.0% free")
    RunbookRun.objects.create(runbook=runbook_ensure_default(), node=node, status="waiting", step="wait_idle")
    # a Prometheus source, off: the cluster's charts still read the store (no server runs here)
    PrometheusSource.objects.create(
        cluster=cluster, base_url="http://127.0.0.1:9", enabled=False, timeout_s=1
    )
