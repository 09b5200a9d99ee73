from django.contrib import admin

from jobs.models import Action, ClusterAccount, Job, JobTemplate, JobTransition, NodeState, Partition


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    list_display = ["username", "user", "cluster", "default_account"]
    list_filter = ["cluster"]
    search_fields = ["username", "user__username"]


@admin.register(Action)
class ActionAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "cluster", "node", "job", "status", "attempts", "requested_by", "created"]
    list_filter = ["kind", "status", "cluster"]
    readonly_fields = [f.name for f in Action._meta.fields]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["job_id", "cluster", "name", "user", "state", "partition", "nodes", "submit_time"]
    list_filter = ["cluster", "state", "partition"]
    search_fields = ["name", "user", "=job_id"]
    readonly_fields = [f.name for f in Job._meta.fields]


@admin.register(JobTransition)
class JobTransitionAdmin(admin.ModelAdmin):
    list_display = ["job", "from_state", "to_state", "reason", "at"]


@admin.register(NodeState)
class NodeStateAdmin(admin.ModelAdmin):
    list_display = ["node", "display_state", "reason", "gpus_total", "gpus_alloc", "last_seen"]


@admin.register(Partition)
class PartitionAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "state", "is_default", "max_time_minutes", "max_gpus_per_node"]


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "created_by", "last_updated"]
