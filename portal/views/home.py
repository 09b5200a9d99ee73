from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from monitoring.overview import cluster_overview_list


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The cluster overview: rendered complete, then kept current over /ws/live/overview/."""
    with_alerts = request.user.has_perm("monitoring.view_alert")
    overviews = cluster_overview_list(with_alerts=with_alerts)
    return render(request, "portal/home.html", {"overviews": overviews, "with_alerts": with_alerts})
