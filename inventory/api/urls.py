from rest_framework.routers import DefaultRouter

from inventory.api import views

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

urlpatterns = router.urls
