from rest_framework.routers import DefaultRouter

from jobs.api import runbooks, views

app_name = "jobs"

router = DefaultRouter()
router.register("actions", views.ActionViewSet, basename="action")
router.register("jobs", views.JobViewSet, basename="job")
router.register("cluster-accounts", views.ClusterAccountViewSet, basename="clusteraccount")
router.register("node-states", views.NodeStateViewSet, basename="nodestate")
router.register("partitions", views.PartitionViewSet, basename="partition")
router.register("templates", views.JobTemplateViewSet, basename="jobtemplate")
router.register("burnin-runs", views.BurnInRunViewSet, basename="burninrun")
router.register("runbooks", runbooks.RunbookViewSet, basename="runbook")
router.register("runbook-runs", runbooks.RunbookRunViewSet, basename="runbookrun")

urlpatterns = router.urls
