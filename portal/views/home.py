from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from inventory import selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The cluster overview (made live by the monitoring and jobs apps)."""
    clusters = selectors.cluster_list()
    return render(request, "portal/home.html", {"clusters": clusters})
