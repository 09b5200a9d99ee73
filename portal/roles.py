"""Roles are Django groups with permissions. One table, enforced alike by pages, API and websockets.

- admin: everything (inventory writes, node operations, all jobs, audit log, alert rules).
- operator: node operations (drain/resume/reboot), all jobs (view, cancel), read inventory.
- researcher: submit and manage own jobs, read inventory, but not how the portal reaches the hardware
  (clusters' SSH host, account, keys and sync errors, nodes' BMC): `inventory.see_infrastructure`,
  which admins and operators hold (INFRASTRUCTURE_PERM below; API serializers and pages hide them alike).

Permission patterns are `app_label.codename` with `*` wildcards, resolved against the
permissions that exist after migrations (so apps add codenames in their models' Meta).
"""

from __future__ import annotations

import fnmatch
from typing import Any

ADMIN, OPERATOR, RESEARCHER = "admin", "operator", "researcher"
INFRASTRUCTURE_PERM = "inventory.see_infrastructure"
ROLES = (ADMIN, OPERATOR, RESEARCHER)

ROLE_PERMISSIONS: dict[str, list[str]] = {
    ADMIN: ["inventory.*", "jobs.*", "monitoring.*", "portal.view_auditentry"],
    OPERATOR: [
        "inventory.view_*",
        "inventory.see_infrastructure",
        "inventory.move_card",
        "jobs.view_*",
        "jobs.operate_nodes",
        "jobs.run_burnin",
        "jobs.run_runbook",
        "jobs.view_all_jobs",
        "jobs.cancel_any_job",
        "jobs.submit_job",
        "jobs.add_action",
        "monitoring.view_*",
        "monitoring.acknowledge_alert",
    ],
    RESEARCHER: [
        "inventory.view_*",
        "jobs.view_job",
        "jobs.view_jobtemplate",
        "jobs.view_action",
        "jobs.submit_job",
        "jobs.add_action",
        "monitoring.view_sample",
        "monitoring.view_latestvalue",
        "monitoring.view_jobenergy",
    ],
}


def roles_sync(**_: Any) -> None:
    """Create the role groups and give them their permissions (idempotent; runs after migrate)."""
    from django.contrib.auth.models import Group, Permission

    perms = list(Permission.objects.select_related("content_type"))
    for role, patterns in ROLE_PERMISSIONS.items():
        group, _created = Group.objects.get_or_create(name=role)
        wanted = [
            p
            for p in perms
            if any(fnmatch.fnmatch(f"{p.content_type.app_label}.{p.codename}", pat) for pat in patterns)
        ]
        group.permissions.set(wanted)


def user_role(user: Any) -> str | None:
    """The strongest role a user holds (superusers are admins)."""
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return ADMIN
    names = {g.name for g in user.groups.all()}
    for role in ROLES:
        if role in names:
            return role
    return None


def user_set_role(user: Any, role: str | None) -> None:
    from django.contrib.auth.models import Group

    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role:
        user.groups.add(Group.objects.get(name=role))
