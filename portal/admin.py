from django.contrib import admin

from portal.models import APIToken, AuditEntry


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created", "expires", "last_used", "write_enabled"]
    readonly_fields = ["prefix", "key_hash", "last_used"]


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["ts", "username", "action", "content_type", "object_repr"]
    list_filter = ["action", "content_type"]
    search_fields = ["username", "object_repr", "message"]

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
