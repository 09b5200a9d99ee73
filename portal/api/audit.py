"""`/api/audit/`: the audit log, read-only, for holders of portal.view_auditentry (admins)."""

from __future__ import annotations

from rest_framework import serializers, viewsets
from rest_framework.routers import DefaultRouter

from portal.api.permissions import ModelPermissions
from portal.filters import AuditEntryFilterSet
from portal.models import AuditEntry
from portal.views.audit import audit_entry_list


class AuditEntrySerializer(serializers.ModelSerializer):
    model = serializers.SerializerMethodField()
    user = serializers.CharField(source="username", read_only=True)

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "ts",
            "user",
            "action",
            "model",
            "object_id",
            "object_repr",
            "before",
            "after",
            "message",
        ]
        read_only_fields = fields

    def get_model(self, obj: AuditEntry) -> str | None:
        ct = obj.content_type
        return f"{ct.app_label}.{ct.model}" if ct is not None else None


class AuditEntryViewSet(viewsets.ReadOnlyModelViewSet):
    """Filters: `user`, `action`, `model` (`inventory.node`), `object_id`, `since`, `until`, `q`."""

    queryset = audit_entry_list()
    serializer_class = AuditEntrySerializer
    permission_classes = [ModelPermissions]
    filterset_class = AuditEntryFilterSet
    ordering_fields = ["ts", "username", "action"]


router = DefaultRouter()
router.include_root_view = False
router.register("audit", AuditEntryViewSet, basename="auditentry")
urlpatterns = router.urls
