from django.contrib import admin

from inventory import models as m


class PortTemplateInline(admin.TabularInline):
    model = m.PortTemplate
    extra = 0


@admin.register(m.CardModel)
class CardModelAdmin(admin.ModelAdmin):
    list_display = ["vendor", "name", "memory_gb", "tdp_w", "list_price", "cooling"]
    inlines = [PortTemplateInline]


@admin.register(m.Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["hostname", "cluster", "role", "status", "rack", "position", "slurm_state"]
    list_filter = ["cluster", "role", "status"]
    search_fields = ["hostname", "slurm_name"]


@admin.register(m.Card)
class CardAdmin(admin.ModelAdmin):
    list_display = ["__str__", "card_model", "serial", "pci_bus_id", "gpu_uuid", "status"]
    list_select_related = ["node", "card_model"]
    search_fields = ["serial", "pci_bus_id", "gpu_uuid"]


class TerminationInline(admin.TabularInline):
    model = m.CableTermination
    extra = 0
    raw_id_fields = ["port", "card"]


@admin.register(m.Cable)
class CableAdmin(admin.ModelAdmin):
    list_display = ["__str__", "kind", "status", "length_m"]
    inlines = [TerminationInline]


for model in (
    m.Site,
    m.Cluster,
    m.Rack,
    m.ChassisModel,
    m.Port,
    m.PowerFeed,
    m.PSU,
    m.PowerLead,
    m.PortTemplate,
):
    admin.site.register(model)


class FabricMemberInline(admin.TabularInline):
    model = m.FabricMember
    extra = 0
    raw_id_fields = ["card", "node"]


@admin.register(m.Fabric)
class FabricAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "template"]
    inlines = [FabricMemberInline]


@admin.register(m.ReadinessCheck)
class ReadinessCheckAdmin(admin.ModelAdmin):
    list_display = ["node", "key", "status", "source", "updated_at"]
    list_filter = ["status", "key", "source"]
    search_fields = ["node__hostname", "detail"]
