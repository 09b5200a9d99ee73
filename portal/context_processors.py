from typing import Any

from django.http import HttpRequest

from portal.roles import user_role


def portal(request: HttpRequest) -> dict[str, Any]:
    return {"portal_role": user_role(getattr(request, "user", None))}
