"""The consumers' role checks through the real ASGI application (session cookie, auth
middleware), not a ``scope["user"]`` set by the test: who may open which live socket, per role."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ("admin", "operator", "researcher", "nobody", None)
OK = "accepted"

# path (filled from the rig), then what each role in ROLES gets: OK (snapshot sent) or the close code
MATRIX = [
    ("/ws/live/overview/", (OK, OK, OK, OK, 4401)),
    ("/ws/live/rack/{rack}/", (OK, OK, OK, 4403, 4401)),
    ("/ws/live/node/{node}/", (OK, OK, OK, 4403, 4401)),
    ("/ws/live/jobs/", (OK, OK, OK, 4403, 4401)),
    ("/ws/live/jobs/?scope=all", (OK, OK, OK, 4403, 4401)),
    ("/ws/live/jobs/?view=action&id={action}", (OK, OK, 4403, 4403, 4401)),  # the operator's action
    ("/ws/live/jobs/?view=nonsense", (4403, 4403, 4403, 4403, 4401)),
    ("/ws/live/fabric/{fabric}/", (OK, OK, OK, 4403, 4401)),
    ("/ws/live/rack/999999/", (4403, 4403, 4403, 4403, 4401)),
]


@pytest.fixture
def world(rig: dict[str, Any], make_user: Any, monkeypatch: Any) -> tuple[dict[Any, Any], dict[str, Any]]:
    from jobs import services
    from tests.inventory.conftest import Builder

    users = {
        "admin": make_user("ada", "admin"),
        "operator": make_user("otto", "operator"),
        "researcher": make_user("alice", "researcher"),
        "nobody": make_user("nobody"),
        None: None,
    }
    monkeypatch.setattr(services, "action_enqueue", lambda action_id: None)
    action = services.node_drain_request(rig["nodes"][0], user=users["operator"], reason="fan")
    from inventory.models import Fabric
    from inventory.topology.services import MemberInput, fabric_save

    build = Builder()
    model = build.card_model(ports=2)
    cards = [build.card(node=build.node(hostname=f"bh{i}"), card_model=model) for i in (1, 2)]
    fabric = fabric_save(
        Fabric(name="pair", template="bh-1x2"), user=None, members=[MemberInput(card=c) for c in cards]
    )
    ids = {"rack": rig["rack"].pk, "node": rig["nodes"][0].pk, "action": action.pk, "fabric": fabric.pk}
    return users, ids


def _cookie(user: Any) -> list[tuple[bytes, bytes]]:
    from django.test import Client

    headers = [(b"origin", b"http://127.0.0.1")]
    if user is None:
        return headers
    client = Client()
    client.force_login(user)
    return [*headers, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def _open(path: str, headers: list[tuple[bytes, bytes]]) -> tuple[Any, str]:
    from channels.testing.websocket import WebsocketCommunicator

    from portal.asgi import application

    async def scenario() -> tuple[Any, str]:
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await comm.connect(timeout=10)
        first = await comm.receive_from(timeout=10) if connected else ""
        await comm.disconnect()
        return (OK if connected else code), first

    return async_to_sync(scenario)()


@pytest.mark.parametrize(("path", "expected"), MATRIX, ids=[m[0] for m in MATRIX])
def test_who_may_open_which_socket_through_the_asgi_application(world, path: str, expected) -> None:
    users, ids = world
    got = {}
    for role in ROLES:
        result, first = _open(path.format(**ids), _cookie(users[role]))
        got[role] = result
        if result == OK:  # an accepted socket starts with its snapshot
            assert 'data-seq="snapshot"' in first, (role, path)
    assert got == dict(zip(ROLES, expected, strict=True))


def test_the_overview_socket_shows_alerts_only_to_roles_that_may_see_them(world) -> None:
    users, _ids = world
    snaps = {
        role: _open("/ws/live/overview/", _cookie(users[role]))[1] for role in ("operator", "researcher")
    }
    assert "alerts firing" in snaps["operator"] or "alert firing" in snaps["operator"]
    assert "alert firing" not in snaps["researcher"] and "alerts firing" not in snaps["researcher"]
