"""Writes of the shared core: audit entries, tokens, and the generic validated save used by every app."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.models import APIToken, AuditEntry, token_hash

M = TypeVar("M", bound=models.Model)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


SECRET_FIELD_NAMES = {"bmc_password", "password", "key_hash", "secret"}


def model_snapshot(instance: models.Model) -> dict[str, Any]:
    """Concrete field values of a row, JSON-safe, secrets masked."""
    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        value = getattr(instance, field.attname)
        if field.name in SECRET_FIELD_NAMES:
            value = "********" if value else ""
        data[field.attname] = _jsonable(value)
    return data


def audit_record(
    *,
    user: Any,
    action: str,
    instance: models.Model | None = None,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    message: str = "",
) -> AuditEntry:
    entry = AuditEntry(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=getattr(user, "username", "") or "system",
        action=action,
        before=dict(before) if before is not None else None,
        after=dict(after) if after is not None else None,
        message=message,
    )
    if instance is not None:
        entry.content_type = ContentType.objects.get_for_model(type(instance))
        entry.object_id = str(instance.pk)
        entry.object_repr = str(instance)[:200]
    entry.save()
    return entry


def _diff(
    before: Mapping[str, Any] | None, after: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    if before is None:
        return {}, dict(after)
    keys = [k for k in after if before.get(k) != after.get(k)]
    return {k: before.get(k) for k in keys}, {k: after[k] for k in keys}


def integrity_error_as_validation(exc: IntegrityError) -> ValidationError:
    text = str(exc).splitlines()[0] if str(exc) else "constraint violated"
    return ValidationError({"__all__": [f"The database refused this change: {text}"]})


@transaction.atomic
def instance_save(instance: M, *, user: Any, exclude_validation: Iterable[str] = ()) -> M:
    """Validate (fields, uniques and check constraints) and save one row, with an audit entry.

    Raises django ValidationError with field errors; nothing is written when it does.
    """
    creating = instance._state.adding or instance.pk is None
    before = None
    if not creating:
        old = type(instance)._default_manager.filter(pk=instance.pk).first()
        before = model_snapshot(old) if old is not None else None
    instance.full_clean(exclude=list(exclude_validation) or None)
    try:
        with transaction.atomic():
            instance.save()
    except IntegrityError as exc:
        raise integrity_error_as_validation(exc) from exc
    after = model_snapshot(instance)
    b, a = _diff(before, after)
    if creating or a:
        audit_record(
            user=user,
            action=AuditEntry.Action.CREATE if creating else AuditEntry.Action.UPDATE,
            instance=instance,
            before=b or None,
            after=a,
        )
    return instance


@transaction.atomic
def instance_delete(instance: models.Model, *, user: Any) -> None:
    snapshot = model_snapshot(instance)
    pk, ct = instance.pk, ContentType.objects.get_for_model(type(instance))
    text = str(instance)[:200]
    try:
        with transaction.atomic():
            instance.delete()
    except models.ProtectedError as exc:
        names = ", ".join(sorted({str(o) for o in list(exc.protected_objects)[:5]}))
        raise ValidationError({"__all__": [f"Cannot delete {text}: still used by {names}."]}) from exc
    except IntegrityError as exc:
        raise integrity_error_as_validation(exc) from exc
    AuditEntry.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=getattr(user, "username", "") or "system",
        action=AuditEntry.Action.DELETE,
        content_type=ct,
        object_id=str(pk),
        object_repr=text,
        before=snapshot,
    )


def api_token_create(
    *, user: Any, name: str, expires: dt.datetime | None = None, write_enabled: bool = True
) -> tuple[APIToken, str]:
    """Create a token; returns the row and the clear key, which is never stored."""
    key = APIToken.generate_key()
    token = APIToken.objects.create(
        user=user,
        name=name,
        prefix=key[:8],
        key_hash=token_hash(key),
        expires=expires,
        write_enabled=write_enabled,
    )
    audit_record(user=user, action=AuditEntry.Action.AUTH, instance=token, message="API token created")
    return token, key


def api_token_revoke(*, token: APIToken, user: Any) -> None:
    audit_record(user=user, action=AuditEntry.Action.AUTH, instance=token, message="API token revoked")
    token.delete()


def api_token_authenticate(key: str) -> APIToken | None:
    token = APIToken.objects.select_related("user").filter(key_hash=token_hash(key)).first()
    if token is None or token.is_expired or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        APIToken.objects.filter(pk=token.pk).update(last_used=now)
    return token


def user_create(*, username: str, password: str, role: str, email: str = "", by: Any = None) -> Any:
    """Create a portal account with one role (portal.roles), its password checked by Django's validators.

    Raises ValidationError (nothing written) for a taken name, an unknown role or a weak password.
    """
    from django.contrib.auth import get_user_model
    from django.contrib.auth.password_validation import validate_password

    from portal.roles import ROLES, roles_sync, user_set_role

    user_model = get_user_model()
    if role not in ROLES:
        raise ValidationError(
            {
                "role": [
                    _("Unknown role %(role)s: one of %(roles)s.") % {"role": role, "roles": ", ".join(ROLES)}
                ]
            }
        )
    user = user_model(username=username, email=email)
    user.full_clean(exclude=["password"])
    validate_password(password, user)
    with transaction.atomic():
        user.set_password(password)
        user.save()
        roles_sync()
        user_set_role(user, role)
        audit_record(user=by, action=AuditEntry.Action.CREATE, instance=user, after={"role": role})
    return user
