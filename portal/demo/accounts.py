"""Demo users: an admin and a researcher with printed passwords (demo only), mapped to cluster accounts."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from inventory.models import Cluster
from jobs.models import ClusterAccount
from portal.roles import ADMIN, RESEARCHER, roles_sync, user_set_role

from .simulation import DEMO_ADMIN_ACCOUNT, DEMO_USERS


def _password() -> str:
    return secrets.token_urlsafe(9)


@transaction.atomic
def demo_users_ensure(credentials_file: Path) -> dict[str, str]:
    """Create (or re-use) ``admin`` and ``researcher``; returns {username: password}.

    Passwords are generated once and kept in ``credentials_file`` (mode 600) so a second run prints
    the same login. ``bob`` is a second researcher the simulation submits as; he cannot log in.
    """
    saved: dict[str, str] = {}
    if credentials_file.exists():
        saved = json.loads(credentials_file.read_text())
    roles_sync()
    users = get_user_model().objects
    creds = {"admin": saved.get("admin") or _password(), "researcher": saved.get("researcher") or _password()}
    for username, role in (("admin", ADMIN), ("researcher", RESEARCHER)):
        user, _created = users.get_or_create(username=username, defaults={"email": f"{username}@example.org"})
        user.is_staff = user.is_superuser = role == ADMIN
        user.set_password(creds[username])
        user.save()
        user_set_role(user, role)
    bob, created = users.get_or_create(username="bob", defaults={"email": "bob@example.org"})
    if created:
        bob.set_unusable_password()
        bob.save()
    user_set_role(bob, RESEARCHER)
    for username, cluster_user in (*DEMO_USERS, ("admin", DEMO_ADMIN_ACCOUNT)):
        user = users.get(username=username)
        for cluster in Cluster.objects.all():
            if not ClusterAccount.objects.filter(cluster=cluster, user=user).exists():
                ClusterAccount.objects.get_or_create(
                    cluster=cluster,
                    username=cluster_user,
                    defaults={"user": user, "default_account": "research"},
                )
    credentials_file.parent.mkdir(parents=True, exist_ok=True)
    credentials_file.touch(mode=0o600, exist_ok=True)
    credentials_file.write_text(json.dumps(creds))
    return creds
