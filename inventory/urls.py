from django.urls import path

from inventory import forms as f
from inventory import models as m
from inventory import views as v
from inventory import views_lifecycle as vl
from inventory import views_topology as vt

app_name = "inventory"


def crud(prefix: str, name: str, list_view, detail_view, edit_view, model) -> list:  # type: ignore[no-untyped-def]
    return [
        path(f"{prefix}/", list_view.as_view(), name=f"{name}_list"),
        path(f"{prefix}/add/", edit_view.as_view(), name=f"{name}_add"),
        path(f"{prefix}/<int:pk>/", detail_view.as_view(), name=name),
        path(f"{prefix}/<int:pk>/edit/", edit_view.as_view(), name=f"{name}_edit"),
        path(
            f"{prefix}/<int:pk>/delete/",
            v.delete_view(model, f"/inventory/{prefix}/").as_view(),
            name=f"{name}_delete",
        ),
    ]


urlpatterns = [
    *crud("sites", "site", v.SiteListView, v.SiteView, v.edit_view(m.Site, f.SiteForm), m.Site),
    *crud(
        "clusters",
        "cluster",
        v.ClusterListView,
        v.ClusterView,
        v.edit_view(m.Cluster, f.ClusterForm),
        m.Cluster,
    ),
    *crud("racks", "rack", v.RackListView, v.RackView, v.edit_view(m.Rack, f.RackForm), m.Rack),
    *crud("nodes", "node", v.NodeListView, v.NodeView, v.edit_view(m.Node, f.NodeForm), m.Node),
    *crud(
        "card-models",
        "cardmodel",
        v.CardModelListView,
        v.CardModelView,
        v.edit_view(m.CardModel, f.CardModelForm),
        m.CardModel,
    ),
    *crud("cards", "card", v.CardListView, v.CardView, v.CardEditView, m.Card),
    *crud("cables", "cable", v.CableListView, v.CableView, v.CableEditView, m.Cable),
    *crud(
        "power-feeds",
        "powerfeed",
        v.PowerFeedListView,
        v.PowerFeedView,
        v.edit_view(m.PowerFeed, f.PowerFeedForm),
        m.PowerFeed,
    ),
    *crud("psus", "psu", v.PSUListView, v.PSUView, v.edit_view(m.PSU, f.PSUForm), m.PSU),
    *crud(
        "power-leads",
        "powerlead",
        v.PowerLeadListView,
        v.PowerLeadView,
        v.edit_view(m.PowerLead, f.PowerLeadForm),
        m.PowerLead,
    ),
    path("ports/", v.PortListView.as_view(), name="port_list"),
    path("ports/add/", v.edit_view(m.Port, f.PortForm).as_view(), name="port_add"),
    *crud("fabrics", "fabric", vt.FabricListView, vt.FabricView, vt.FabricEditView, m.Fabric),
    path("fabrics/<int:pk>/plan/", vt.FabricPlanView.as_view(), name="fabric_plan"),
    path("fabrics/<int:pk>/wiring/", vt.FabricWiringView.as_view(), name="fabric_wiring"),
    path("psus/<int:pk>/budget/", vt.PSUBudgetPageView.as_view(), name="psu_budget"),
    path("power-feeds/<int:pk>/budget/", vt.FeedBudgetPageView.as_view(), name="powerfeed_budget"),
    path("nodes/<int:pk>/power/", vt.NodePowerPageView.as_view(), name="node_power"),
    path("nodes/<int:pk>/readiness/", vt.NodeReadinessPageView.as_view(), name="node_readiness"),
    path("cards/<int:pk>/transition/", vl.card_transition_view, name="card_transition"),
    path("cards/<int:pk>/acceptance/", vl.card_acceptance_view, name="card_acceptance"),
]
