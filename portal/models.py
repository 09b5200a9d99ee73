"""Shared core models: API tokens and the audit trail."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class ChangeLoggedModel(models.Model):
    """Abstract base: creation and update timestamps."""

    created = models.DateTimeField(auto_now_add=True)
    last_updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class APIToken(models.Model):
    """A revocable API token. Only its hash is stored; the key is shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(max_length=8, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(_("expires"), null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    write_enabled = models.BooleanField(_("write enabled"), default=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = _("API token")

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def generate_key() -> str:
        return secrets.token_hex(20)

    @property
    def is_expired(self) -> bool:
        return self.expires is not None and self.expires <= timezone.now()


class AuditEntry(models.Model):
    """One change or action: who, when, what, before and after. Written by services only."""

    class Action(models.TextChoices):
        CREATE = "create", _("Created")
        UPDATE = "update", _("Updated")
        DELETE = "delete", _("Deleted")
        ACTION = "action", _("Action requested")
        SUBMIT = "submit", _("Job submitted")
        CANCEL = "cancel", _("Job cancelled")
        AUTH = "auth", _("Authentication")

    ts = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=16, choices=Action.choices)
    content_type = models.ForeignKey(ContentType, null=True, blank=True, on_delete=models.SET_NULL)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    message = models.TextField(blank=True)

    class Meta:
        ordering = ["-ts", "-id"]
        indexes = [
            models.Index(fields=["content_type", "object_id"]),
            models.Index(fields=["username", "ts"]),
        ]
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit entries")

    def __str__(self) -> str:
        return f"{self.ts:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.object_repr}"
