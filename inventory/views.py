"""Inventory pages: thin declarations over selectors, FilterSets, forms and services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db import models
from django.utils.translation import gettext_lazy as _

from inventory import filters, selectors
from inventory import forms as f
from inventory.choices import BMCKind
from inventory.models import (
    PSU,
    Cable,
    Card,
    CardModel,
    Cluster,
    Node,
    Port,
    PortTemplate,
    PowerFeed,
    PowerLead,
    Rack,
    Site,
)
from inventory.readiness import node_readiness
from inventory.services import cable_connect, cable_update, card_save
from inventory.views_topology import readiness_badge
from portal.roles import INFRASTRUCTURE_PERM
from portal.templatetags.portal_format import ago, decimal_plain, money, number, percent, watts
from portal.views.generic import Column, ObjectDeleteView, ObjectDetailView, ObjectEditView, ObjectListView

# -- sites, clusters, racks -------------------------------------------------------------------


class SiteListView(ObjectListView):
    model = Site
    queryset = selectors.site_list
    filterset_class = filters.SiteFilterSet
    columns = [
        Column(_("Name"), "name", link=True, order_by="name"),
        Column(_("Address"), "address"),
        Column(_("Racks"), "rack_count"),
    ]


class SiteView(ObjectDetailView):
    model = Site
    queryset = selectors.site_list
    fields = [
        Column(_("Name"), "name"),
        Column(_("Address"), "address"),
        Column(_("Description"), "description"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {"related": [(_("Racks"), obj.racks.all()), (_("Power feeds"), obj.power_feeds.all())]}


class ClusterListView(ObjectListView):
    model = Cluster
    queryset = selectors.cluster_list
    filterset_class = filters.ClusterFilterSet
    columns = [
        Column(_("Name"), "name", link=True, order_by="name"),
        Column(_("Site"), "site"),
        Column(_("Backend"), "backend"),
        Column(_("Login host"), "ssh_host", perm=INFRASTRUCTURE_PERM),
        Column(_("Nodes"), "node_count"),
        Column(_("Last sync"), "last_sync_ok_at", fmt=ago),
        Column(_("Sync error"), "last_sync_error", perm=INFRASTRUCTURE_PERM),
    ]


class ClusterView(ObjectDetailView):
    model = Cluster
    queryset = selectors.cluster_list
    template_name = "inventory/cluster.html"
    fields = [
        Column(_("Site"), "site"),
        Column(_("Backend"), "backend"),
        Column(_("Login host"), "ssh_host", perm=INFRASTRUCTURE_PERM),
        Column(_("SSH port"), "ssh_port", perm=INFRASTRUCTURE_PERM),
        Column(_("Service account"), "ssh_user", perm=INFRASTRUCTURE_PERM),
        Column(_("Host key pinned"), render=lambda c: bool(c.ssh_host_key), perm=INFRASTRUCTURE_PERM),
        Column(_("Key path"), "ssh_key_path", perm=INFRASTRUCTURE_PERM),
        Column(_("SLURM_CONF on the login host"), "slurm_conf", perm=INFRASTRUCTURE_PERM),
        Column(_("Last successful sync"), "last_sync_ok_at", fmt=ago),
        Column(_("Sync error"), "last_sync_error", perm=INFRASTRUCTURE_PERM),
        Column(_("Description"), "description"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {"nodes": selectors.node_list().filter(cluster=obj)}


class RackListView(ObjectListView):
    model = Rack
    queryset = selectors.rack_list
    filterset_class = filters.RackFilterSet
    columns = [
        Column(_("Name"), "name", link=True, order_by="name"),
        Column(_("Site"), "site"),
        Column(_("Height (U)"), "u_height"),
        Column(_("Nodes"), "node_count"),
    ]


class RackView(ObjectDetailView):
    model = Rack
    queryset = selectors.rack_list
    template_name = "inventory/rack.html"
    fields = [
        Column(_("Site"), "site"),
        Column(_("Height (U)"), "u_height"),
        Column(_("Description"), "description"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        nodes = list(selectors.node_list().filter(rack=obj, position__isnull=False))
        by_top: dict[int, Node] = {}
        node: Node | None
        for node in nodes:
            by_top[(node.position or 0) + node.u_height - 1] = node
        units: list[dict[str, Any]] = []
        u = obj.u_height
        while u >= 1:
            node = by_top.get(u)
            if node is not None:
                units.append({"u": u, "node": node, "height": node.u_height})
                u -= node.u_height
            else:
                units.append({"u": u, "node": None, "height": 1})
                u -= 1
        unplaced = selectors.node_list().filter(rack=obj, position__isnull=True)
        return {"units": units, "unplaced": unplaced}


# -- nodes and cards -----------------------------------------------------------------------------


def _bmc(node: Node) -> str | None:
    """ "IPMI admin 10.0.0.5" or nothing at all (no "BMC None")."""
    if node.bmc_kind == BMCKind.NONE and not node.bmc_address:
        return None
    return " ".join(p for p in (node.get_bmc_kind_display(), node.bmc_username, node.bmc_address) if p)


def _gigabytes(value: Any) -> str:
    return f"{number(value)} GB"


class NodeListView(ObjectListView):
    model = Node
    queryset = selectors.node_list_with_readiness
    filterset_class = filters.NodeFilterSet
    columns = [
        Column(_("Hostname"), "hostname", link=True, order_by="hostname"),
        Column(_("Readiness"), render=lambda n: readiness_badge(node_readiness(n))),
        Column(_("Cluster"), "cluster"),
        Column(_("Role"), "role", order_by="role"),
        Column(_("Status"), "status", order_by="status"),
        Column(_("Chassis"), "chassis"),
        Column(_("Rack"), "rack"),
        Column(_("U"), "position", order_by="position"),
        Column(_("Slurm state"), "slurm_state", order_by="slurm_state"),
        Column(_("Cards"), "card_count"),
    ]


class NodeView(ObjectDetailView):
    model = Node
    queryset = selectors.node_list_with_readiness
    template_name = "inventory/node.html"
    fields = [
        Column(_("Cluster"), "cluster"),
        Column(_("Role"), "role"),
        Column(_("Status"), "status"),
        Column(_("Chassis"), "chassis"),
        Column(_("Rack"), "rack"),
        Column(_("Position"), "position"),
        Column(_("Height (U)"), "u_height"),
        Column(_("Slurm name"), "effective_slurm_name"),
        Column(_("Slurm state"), "slurm_state"),
        Column(_("Slurm reason"), "slurm_reason"),
        Column(_("BMC"), render=_bmc, perm=INFRASTRUCTURE_PERM),
        Column(_("Purchase cost"), "purchase_cost", fmt=money),
        Column(_("Purchase date"), "purchase_date"),
        Column(_("Notes"), "notes"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {
            "cards": selectors.card_list().filter(node=obj),
            "nic_ports": selectors.port_list().filter(node=obj, card__isnull=True),
            "psus": selectors.psu_list().filter(node=obj),
            "readiness": readiness_badge(node_readiness(obj)),
        }


class CardModelListView(ObjectListView):
    model = CardModel
    queryset = selectors.card_model_list
    filterset_class = filters.CardModelFilterSet
    columns = [
        Column(_("Vendor"), "vendor", order_by="vendor"),
        Column(_("Model"), "name", link=True, order_by="name"),
        Column(_("Memory"), "memory_gb", fmt=_gigabytes),
        Column(_("Memory type"), "memory_type"),
        Column(_("FP8 TFLOPS"), "tflops_fp8"),
        Column(_("FP16 TFLOPS"), "tflops_fp16"),
        Column(_("TDP"), "tdp_w", order_by="tdp_w", fmt=watts),
        Column(_("Price"), "list_price", fmt=money),
        Column(_("Cooling"), "cooling"),
        Column(_("Cards"), "card_count"),
    ]


def _port_template_text(t: PortTemplate) -> str:
    text = f"{t.name} {t.get_kind_display()} {t.speed_gbps}G"
    if t.eth_channels:
        text += " " + _("(Ethernet channels %(channels)s)") % {
            "channels": ", ".join(map(str, t.eth_channels))
        }
    return text


class CardModelView(ObjectDetailView):
    model = CardModel
    queryset = selectors.card_model_list
    fields = [
        Column(_("Vendor"), "vendor"),
        Column(_("Memory"), render=lambda m: f"{_gigabytes(m.memory_gb)} {m.memory_type}"),
        Column(_("FP8 TFLOPS"), "tflops_fp8"),
        Column(_("FP16 TFLOPS"), "tflops_fp16"),
        Column(_("FP32 TFLOPS"), "tflops_fp32"),
        Column(_("TDP"), "tdp_w", fmt=watts),
        Column(_("List price"), "list_price", fmt=money),
        Column(_("Cooling"), "cooling"),
        Column(_("Minimum airflow"), "min_airflow"),
        Column(_("Power connector"), "power_connector"),
        Column(
            _("Ports"),
            render=lambda m: ", ".join(_port_template_text(t) for t in m.port_templates.all()),
        ),
    ]


class CardListView(ObjectListView):
    model = Card
    queryset = selectors.card_list
    filterset_class = filters.CardFilterSet
    columns = [
        Column(_("Card"), render=lambda c: c, link=True),
        Column(_("Model"), "card_model"),
        Column(_("Status"), "status"),
        Column(_("Serial"), "serial", order_by="serial"),
        Column(_("PCI bus id"), "pci_bus_id", order_by="pci_bus_id"),
        Column(_("GPU UUID"), "gpu_uuid"),
    ]


class CardView(ObjectDetailView):
    model = Card
    queryset = selectors.card_list
    template_name = "inventory/card.html"
    fields = [
        Column(_("Node"), "node"),
        Column(_("Model"), "card_model"),
        Column(_("Slot"), "slot"),
        Column(_("Status"), "status"),
        Column(_("Serial"), "serial"),
        Column(_("PCI bus id"), "pci_bus_id"),
        Column(_("GPU UUID"), "gpu_uuid"),
        Column(_("Firmware"), "firmware_version"),
        Column(_("Driver"), "driver_version"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {
            "ports": selectors.port_list().filter(card=obj),
            "leads": selectors.power_lead_list().filter(card=obj),
        }


# -- ports and cables ------------------------------------------------------------------------------


def _port_owner(port: Port) -> Any:
    return port.card if port.card_id else port.node


class PortListView(ObjectListView):
    model = Port
    queryset = selectors.port_list
    filterset_class = filters.PortFilterSet
    columns = [
        Column(_("Owner"), render=_port_owner),
        Column(_("Name"), "name", order_by="name"),
        Column(_("Kind"), "kind"),
        Column(_("Speed"), "speed_gbps", fmt=lambda v: f"{number(v)} Gbit/s"),
        Column(_("Cable"), render=lambda p: p.termination.cable if hasattr(p, "termination") else None),
    ]


class CableListView(ObjectListView):
    model = Cable
    queryset = selectors.cable_list
    filterset_class = filters.CableFilterSet
    columns = [
        Column(_("Cable"), render=lambda c: c, link=True),
        Column(_("A end"), render=lambda c: _end_label(c.a_port)),
        Column(_("B end"), render=lambda c: _end_label(c.b_port)),
        Column(_("Kind"), "kind"),
        Column(_("Status"), "status"),
        Column(_("Length"), "length_m", fmt=lambda v: f"{decimal_plain(v)} m"),
    ]


def _end_label(port: Port | None) -> str:
    if port is None:
        return "—"
    return f"{_port_owner(port)} {port.name}"


class CableView(ObjectDetailView):
    model = Cable
    queryset = selectors.cable_list
    template_name = "inventory/cable.html"
    fields = [
        Column(_("A end"), render=lambda c: _end_label(c.a_port)),
        Column(_("B end"), render=lambda c: _end_label(c.b_port)),
        Column(_("Kind"), "kind"),
        Column(_("Status"), "status"),
        Column(_("Length"), "length_m", fmt=lambda v: f"{decimal_plain(v)} m"),
        Column(_("Label"), "label"),
        Column(_("Description"), "description"),
    ]


# -- power ------------------------------------------------------------------------------------------


class PowerFeedListView(ObjectListView):
    model = PowerFeed
    queryset = selectors.power_feed_list
    filterset_class = filters.PowerFeedFilterSet
    columns = [
        Column(_("Name"), "name", link=True),
        Column(_("Site"), "site"),
        Column(_("Rack"), "rack"),
        Column(_("Voltage"), "voltage", fmt=lambda v: f"{number(v)} V"),
        Column(_("Amperage"), "amperage", fmt=lambda v: f"{number(v)} A"),
        Column(_("Phase"), "phase"),
        Column(_("Maximum utilisation"), "max_utilization_pct", fmt=percent),
        Column(_("Available"), "available_power_w", fmt=watts),
    ]


class PowerFeedView(ObjectDetailView):
    model = PowerFeed
    queryset = selectors.power_feed_list
    fields = PowerFeedListView.columns[1:]


class PSUListView(ObjectListView):
    model = PSU
    queryset = selectors.psu_list
    filterset_class = filters.PSUFilterSet
    columns = [
        Column(_("Name"), "name", link=True),
        Column(_("Node"), "node"),
        Column(_("Feed"), "feed"),
        Column(_("Capacity"), "capacity_w", fmt=watts),
        Column(_("Efficiency"), "efficiency_pct", fmt=percent),
        Column(_("Model"), "model"),
    ]


class PSUView(ObjectDetailView):
    model = PSU
    queryset = selectors.psu_list
    fields = PSUListView.columns[1:]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        return {"related": [(_("Leads"), selectors.power_lead_list().filter(psu=obj))]}


class PowerLeadListView(ObjectListView):
    model = PowerLead
    queryset = selectors.power_lead_list
    filterset_class = filters.PowerLeadFilterSet
    columns = [
        Column(_("PSU"), "psu"),
        Column(_("Connector"), "name", link=True),
        Column(_("Kind"), "kind"),
        Column(_("Rating"), "effective_rating_w", fmt=watts),
        Column(_("Card"), "card"),
        Column(_("Node"), "node"),
    ]


class PowerLeadView(ObjectDetailView):
    model = PowerLead
    queryset = selectors.power_lead_list
    fields = PowerLeadListView.columns


# -- edit views --------------------------------------------------------------------------------------


class CardEditView(ObjectEditView):
    model = Card
    form_class = f.CardForm

    def save(self, form: forms.ModelForm[Any]) -> models.Model:
        return card_save(form.instance, user=self.request.user)


class CableEditView(ObjectEditView):
    model = Cable
    form_class = f.CableForm

    def save(self, form: forms.ModelForm[Any]) -> models.Model:
        data = dict(form.cleaned_data)
        if form.instance.pk:
            return cable_update(form.instance, user=self.request.user, **data)
        return cable_connect(user=self.request.user, **data)


def edit_view(model_: type[models.Model], form: type[forms.ModelForm[Any]]) -> type[ObjectEditView]:
    return type(f"{model_.__name__}EditView", (ObjectEditView,), {"model": model_, "form_class": form})


def delete_view(model_: type[models.Model], url: str) -> type[ObjectDeleteView]:
    return type(f"{model_.__name__}DeleteView", (ObjectDeleteView,), {"model": model_, "success_url": url})
