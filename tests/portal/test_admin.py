from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.management import call_command
from django.urls import reverse


def test_every_admin_changelist_renders(client: Any, django_user_model: Any) -> None:
    # given the seed data and a superuser
    call_command("seed_demo")
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.org", "pw"))
    # then every registered model's list opens in the Django admin
    for model in admin.site._registry:
        meta = model._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        assert client.get(url).status_code == 200, url
