from django.urls import path
from rest_framework.routers import DefaultRouter

from inventory.api import topology, views

app_name = "inventory"

router = DefaultRouter()
router.register("sites", views.SiteViewSet, basename="site")
router.register("clusters", views.ClusterViewSet, basename="cluster")
router.register("racks", views.RackViewSet, basename="rack")
router.register("chassis-models", views.ChassisModelViewSet, basename="chassismodel")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("card-models", views.CardModelViewSet, basename="cardmodel")
router.register("port-templates", views.PortTemplateViewSet, basename="porttemplate")
router.register("cards", views.CardViewSet, basename="card")
router.register("ports", views.PortViewSet, basename="port")
router.register("cables", views.CableViewSet, basename="cable")
router.register("power-feeds", views.PowerFeedViewSet, basename="powerfeed")
router.register("psus", views.PSUViewSet, basename="psu")
router.register("power-leads", views.PowerLeadViewSet, basename="powerlead")
router.register("fabrics", topology.FabricViewSet, basename="fabric")

urlpatterns = [
    *router.urls,
    path("psus/<int:pk>/budget/", topology.PSUBudgetView.as_view(), name="psu-budget"),
    path("power-feeds/<int:pk>/budget/", topology.FeedBudgetView.as_view(), name="powerfeed-budget"),
    path("nodes/<int:pk>/power/", topology.NodePowerView.as_view(), name="node-power"),
    path("nodes/<int:pk>/what-if/", topology.WhatIfView.as_view(), name="node-what-if"),
    path("nodes/<int:pk>/readiness/", topology.NodeReadinessView.as_view(), name="node-readiness"),
    path(
        "nodes/<int:pk>/readiness/evaluate/",
        topology.NodeReadinessEvaluateView.as_view(),
        name="node-readiness-evaluate",
    ),
]
