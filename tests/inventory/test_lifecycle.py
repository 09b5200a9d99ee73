"""Card lifecycle: the allowed transitions, refusals that write nothing, the history per card and serial,
moves between nodes and owners, the same rules through the API, and rejected cards kept out of service."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from inventory.choices import CARD_TRANSITIONS, CardStatus
from inventory.lifecycle import allowed_transitions, card_event_list, card_transition
from inventory.models import Card, CardEvent, ReadinessCheck
from inventory.readiness import readiness_evaluate
from inventory.services import card_save
from jobs.backends import simulator_nodes
from portal.models import AuditEntry

ALL = list(CardStatus.values)


@pytest.mark.parametrize("start", ALL)
def test_every_state_allows_exactly_its_listed_moves(build: Any, admin_user: Any, start: str) -> None:
    for to in ALL:
        card = build.card(status=start)
        before = CardEvent.objects.filter(card=card).count()
        if to in CARD_TRANSITIONS[start]:
            card_transition(card, to_status=to, user=admin_user, reason="test")
            assert Card.objects.get(pk=card.pk).status == to
            assert CardEvent.objects.filter(card=card).count() == before + 1
        else:
            with pytest.raises(ValidationError) as exc:
                card_transition(card, to_status=to, user=admin_user, reason="test")
            assert "to_status" in exc.value.message_dict
            assert Card.objects.get(pk=card.pk).status == start
            assert CardEvent.objects.filter(card=card).count() == before


def test_the_lifecycle_reaches_service_only_through_burn_in_and_acceptance() -> None:
    assert allowed_transitions(CardStatus.ORDERED) == [CardStatus.RECEIVED]
    assert CardStatus.IN_SERVICE not in CARD_TRANSITIONS[CardStatus.RECEIVED]
    assert CardStatus.IN_SERVICE not in CARD_TRANSITIONS[CardStatus.REJECTED]
    sources = {s for s, targets in CARD_TRANSITIONS.items() if CardStatus.IN_SERVICE in targets}
    assert sources == {CardStatus.ACCEPTED}
    assert CARD_TRANSITIONS[CardStatus.RETIRED] == frozenset()


def test_transition_needs_a_reason_and_the_permission(
    build: Any, researcher_user: Any, admin_user: Any
) -> None:
    card = build.card(status=CardStatus.RECEIVED)
    with pytest.raises(ValidationError) as exc:
        card_transition(card, to_status=CardStatus.BURN_IN, user=admin_user, reason="  ")
    assert "reason" in exc.value.message_dict
    with pytest.raises(PermissionDenied):
        card_transition(card, to_status=CardStatus.BURN_IN, user=researcher_user, reason="mine now")
    assert Card.objects.get(pk=card.pk).status == CardStatus.RECEIVED
    assert not CardEvent.objects.filter(card=card, from_status=CardStatus.RECEIVED).exists()


def test_history_keeps_who_when_where_and_why(build: Any, operator_user: Any) -> None:
    first, second = build.node(hostname="bench01"), build.node(hostname="rig07")
    card = build.card(node=first, status=CardStatus.RECEIVED, serial="BH150A-0042", owner="ebay lot 7")
    card_transition(card, to_status=CardStatus.BURN_IN, user=operator_user, reason="24 h burn-in")
    card.node, card.owner = second, "training team"
    card_save(card, user=operator_user, reason="moved to the rig after burn-in")
    events = list(card_event_list(card))
    assert [
        (e.from_status, e.to_status, e.from_node, e.to_node, e.from_owner, e.to_owner) for e in events
    ] == [
        ("", CardStatus.BURN_IN, "bench01", "rig07", "ebay lot 7", "training team"),
        (CardStatus.RECEIVED, CardStatus.BURN_IN, "bench01", "bench01", "ebay lot 7", "ebay lot 7"),
        ("", CardStatus.RECEIVED, "", "bench01", "", "ebay lot 7"),
    ]
    assert [e.reason for e in events[:2]] == ["moved to the rig after burn-in", "24 h burn-in"]
    assert {e.username for e in events[:2]} == {"otto"} and events[2].username == "system"
    assert AuditEntry.objects.filter(object_id=str(card.pk), message="24 h burn-in").exists()


def test_history_follows_the_serial_after_the_row_is_deleted(build: Any, admin_user: Any) -> None:
    card = build.card(status=CardStatus.RECEIVED, serial="SN-77")
    card_transition(card, to_status=CardStatus.RMA, user=admin_user, reason="dead on arrival")
    model, node = card.card_model, card.node
    card.ports.all().delete()
    card.delete()
    again = build.card(node=node, card_model=model, serial="SN-77", status=CardStatus.RECEIVED)
    reasons = [e.reason for e in card_event_list(again)]
    assert reasons == ["", "dead on arrival", ""]  # the new row added, the old one sent back, then added


def test_an_edit_cannot_change_the_lifecycle(build: Any, admin_user: Any) -> None:
    card = build.card(status=CardStatus.RECEIVED)
    card.status = CardStatus.IN_SERVICE
    with pytest.raises(ValidationError) as exc:
        card_save(card, user=admin_user)
    assert "status" in exc.value.message_dict
    assert Card.objects.get(pk=card.pk).status == CardStatus.RECEIVED


def test_rejected_card_fails_readiness_and_leaves_the_simulated_gres(build: Any, admin_user: Any) -> None:
    cluster = build.cluster()
    node = build.node(cluster=cluster, slurm_name="rig9")
    good = build.card(node=node, slot="A", status=CardStatus.IN_SERVICE)
    bad = build.card(node=node, slot="B", status=CardStatus.BURN_IN)
    readiness_evaluate(node)
    row = ReadinessCheck.objects.get(node=node, key="card_lifecycle")
    assert row.status == "warn" and "B (Burn-in)" in row.detail
    card_transition(bad, to_status=CardStatus.REJECTED, user=admin_user, reason="power dips on lead 2")
    row.refresh_from_db()
    assert row.status == "fail" and "B (Rejected)" in row.detail
    assert [(n.name, n.gpus) for n in simulator_nodes(cluster)] == [("rig9", 1)]
    card_transition(bad, to_status=CardStatus.RMA, user=admin_user, reason="sent back")
    row.refresh_from_db()  # on its way back to the seller: no longer in the node
    assert (row.status, Card.objects.get(pk=good.pk).status) == ("pass", CardStatus.IN_SERVICE)
    assert [(n.name, n.gpus) for n in simulator_nodes(cluster)] == [("rig9", 1)]


def test_api_transition_history_and_refusals(
    build: Any, api_as: Any, admin_user: Any, researcher_user: Any
) -> None:
    card = build.card(status=CardStatus.RECEIVED, serial="API-1")
    url = f"/api/inventory/cards/{card.pk}/"
    denied = api_as(researcher_user).post(
        f"{url}transition/", {"to_status": "burn_in", "reason": "x"}, format="json"
    )
    assert denied.status_code == 403
    admin = api_as(admin_user)
    bad = admin.post(f"{url}transition/", {"to_status": "in_service", "reason": "skip it"}, format="json")
    assert bad.status_code == 400 and "to_status" in bad.json()
    ok = admin.post(f"{url}transition/", {"to_status": "burn_in", "reason": "start"}, format="json")
    assert ok.status_code == 200 and ok.json()["status"] == "burn_in"
    edit = admin.patch(url, {"status": "accepted"}, format="json")
    assert edit.status_code == 400 and "status" in edit.json()
    history = admin.get(f"{url}history/").json()
    assert [(h["from_status"], h["to_status"], h["reason"]) for h in history] == [
        ("received", "burn_in", "start"),
        ("", "received", ""),
    ]
    assert Card.objects.get(pk=card.pk).status == CardStatus.BURN_IN
    assert api_as(researcher_user).get(f"{url}history/").status_code == 200


def test_node_page_warns_while_a_rejected_card_is_still_in_it(
    build: Any, client: Any, operator_user: Any
) -> None:
    node = build.node(hostname="bench9")
    card = build.card(node=node, slot="B", status=CardStatus.BURN_IN)
    client.force_login(operator_user)
    warning = "Card B is Rejected and still in this node"
    assert warning not in client.get(f"/inventory/nodes/{node.pk}/").content.decode()
    card_transition(card, to_status=CardStatus.REJECTED, user=operator_user, reason="dips on lead #3")
    page = client.get(f"/inventory/nodes/{node.pk}/").content.decode()
    assert warning in page and f'id="card-out-of-service-{card.pk}"' in page
