from rest_framework.routers import DefaultRouter

from jobs.api import views

app_name = "jobs"

router = DefaultRouter()
router.register("actions", views.ActionViewSet, basename="action")
router.register("jobs", views.JobViewSet, basename="job")
router.register("cluster-accounts", views.ClusterAccountViewSet, basename="clusteraccount")
router.register("node-states", views.NodeStateViewSet, basename="nodestate")
router.register("partitions", views.PartitionViewSet, basename="partition")
router.register("templates", views.JobTemplateViewSet, basename="jobtemplate")
router.register("burnin-runs", views.BurnInRunViewSet, basename="burninrun")

urlpatterns = router.urls
