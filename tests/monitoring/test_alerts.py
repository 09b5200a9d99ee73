from __future__ import annotations

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core import mail
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from monitoring import services
from monitoring.models import Alert, AlertRule, AlertState, LatestValue
from tests.monitoring.conftest import H100_UUIDS
from tests.text import page_text

pytestmark = pytest.mark.django_db
T0 = timezone.now().replace(microsecond=0) - dt.timedelta(hours=1)


def _push(node: str, metric: str, value: float, seconds: int, card: str = H100_UUIDS[0], **kw: Any) -> Any:
    return services.telemetry_ingest_samples(
        [
            {
                "ts": (T0 + dt.timedelta(seconds=seconds)).isoformat(),
                "node": node,
                "card": card,
                "metric": metric,
                "value": value,
                **kw,
            }
        ]
    )


def test_temperature_alert_fires_only_after_its_duration_and_resolves(inv: Any) -> None:
    # given the default rule "temperature above 85 °C for 60 s" and a card at 90 °C
    node = inv.node("gpu01")
    card = inv.card(node, gpu_uuid=H100_UUIDS[0])
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    _push("gpu01", "temperature_c", 90, 0)
    _push("gpu01", "temperature_c", 91, 30)
    # then nothing fires before 60 s, but the pending state is kept
    assert Alert.objects.count() == 0
    assert AlertState.objects.get(rule=rule).pending_since == T0
    # when it is still hot at 60 s, one alert fires, started when the condition began
    report = _push("gpu01", "temperature_c", 92, 60)
    alert = Alert.objects.get()
    assert report.alert_ids == [alert.pk]
    assert (alert.status, alert.severity, alert.started_at, alert.value) == ("firing", "critical", T0, 92)
    assert alert.card_id == card.pk
    # and more hot samples keep the same single open alert
    _push("gpu01", "temperature_c", 93, 90)
    assert Alert.objects.count() == 1
    # when it cools down, the alert resolves and the state is cleared
    _push("gpu01", "temperature_c", 70, 120)
    alert.refresh_from_db()
    assert alert.status == "resolved"
    assert alert.resolved_at == T0 + dt.timedelta(seconds=120)
    assert AlertState.objects.count() == 0


def test_a_short_spike_does_not_fire(inv: Any) -> None:
    inv.node("gpu01")
    _push("gpu01", "temperature_c", 95, 0)
    _push("gpu01", "temperature_c", 60, 30)
    _push("gpu01", "temperature_c", 95, 50)
    _push("gpu01", "temperature_c", 95, 100)
    assert Alert.objects.count() == 0


def test_only_the_batch_targets_are_evaluated(inv: Any, django_assert_max_num_queries: Any) -> None:
    # given 50 cool cards, a batch for one card does a fixed small number of queries
    inv.node("gpu01")
    for i in range(50):
        _push("gpu01", "temperature_c", 40, 0, card=f"0000:{i + 1:02x}:00.0")
    with django_assert_max_num_queries(18):
        _push("gpu01", "temperature_c", 40, 10, card="0000:01:00.0")


def test_one_open_alert_per_rule_and_target_is_a_database_constraint(inv: Any) -> None:
    node = inv.node("gpu01")
    rule = AlertRule.objects.get(name="Xid error")
    Alert.objects.create(rule=rule, target="t", node=node, severity="critical", started_at=T0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(rule=rule, target="t", node=node, severity="critical", started_at=T0)
    Alert.objects.filter(target="t").update(status="resolved")
    Alert.objects.create(rule=rule, target="t", node=node, severity="critical", started_at=T0)
    assert Alert.objects.count() == 2


def test_power_near_psu_limit_uses_the_nodes_psu_capacity(inv: Any) -> None:
    # given a node with two 1000 W PSUs in a redundant pair (usable 1000 W, alert above 900 W for 60 s)
    node = inv.node("gpu01")
    inv.psu(node, 1000, redundant=True)
    inv.psu(node, 1000, redundant=True)
    _push("gpu01", "node_power_w", 880, 0, card="")
    _push("gpu01", "node_power_w", 880, 120, card="")
    assert Alert.objects.count() == 0
    _push("gpu01", "node_power_w", 950, 130, card="")
    _push("gpu01", "node_power_w", 960, 190, card="")
    alert = Alert.objects.get()
    assert alert.rule.name == "Node power near PSU limit"
    assert alert.message == "Node power 960 W above 900 W (90 % of the PSU capacity) for 1 min"
    assert alert.params == {"limit": 900.0}


def test_heartbeat_stall_fires_when_the_counter_stops(inv: Any) -> None:
    inv.node("rig01")
    ref = "0000:01:00.0"
    for i, hb in enumerate([100, 110, 120, 120, 120, 120]):
        _push("rig01", "heartbeat", hb, i * 20, card=ref)
    # stuck at 120 since t=40; at t=100 it has been 60 s
    alert = Alert.objects.get(rule__name="Firmware heartbeat stalled")
    assert alert.started_at == T0 + dt.timedelta(seconds=40)
    _push("rig01", "heartbeat", 130, 120, card=ref)
    alert.refresh_from_db()
    assert alert.status == "resolved"


def test_link_retrain_event_opens_one_alert_and_quiet_period_resolves_it(inv: Any) -> None:
    inv.node("rig01")
    ref = "0000:01:00.0"
    _push("rig01", "link_retrain_total", 0, 0, card=ref, labels={"port": "2"})
    _push("rig01", "link_retrain_total", 1, 10, card=ref, labels={"port": "2"})
    _push("rig01", "link_retrain_total", 3, 20, card=ref, labels={"port": "2"})
    alert = Alert.objects.get(rule__name="Link retrained")
    assert alert.last_seen_at == T0 + dt.timedelta(seconds=20)
    assert services.alerts_resolve_quiet(now=T0 + dt.timedelta(minutes=30)) == 0
    assert services.alerts_resolve_quiet(now=T0 + dt.timedelta(seconds=20 + 3600)) == 1
    alert.refresh_from_db()
    assert alert.status == "resolved"


def test_acknowledge_and_resolve_need_the_permission(
    inv: Any, operator_user: Any, researcher_user: Any
) -> None:
    node = inv.node("gpu01")
    rule = AlertRule.objects.get(name="Xid error")
    alert = Alert.objects.create(rule=rule, target="t", node=node, severity="critical", started_at=T0)
    researcher = APIClient()
    researcher.force_authenticate(researcher_user)
    assert researcher.post(f"/api/monitoring/alerts/{alert.pk}/acknowledge/").status_code == 403
    alert.refresh_from_db()
    assert alert.acknowledged_at is None
    operator = APIClient()
    operator.force_authenticate(operator_user)
    resp = operator.post(f"/api/monitoring/alerts/{alert.pk}/acknowledge/")
    assert resp.status_code == 200
    assert resp.json()["acknowledged_by"]["display"] == "otto"
    assert resp.json()["status"] == "firing"
    resp = operator.post(f"/api/monitoring/alerts/{alert.pk}/resolve/")
    assert resp.json()["status"] == "resolved"


def test_alert_rules_are_editable_by_admins_only(api: APIClient, operator_user: Any) -> None:
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    operator = APIClient()
    operator.force_authenticate(operator_user)
    assert (
        operator.patch(
            f"/api/monitoring/alert-rules/{rule.pk}/", {"threshold": 80}, format="json"
        ).status_code
        == 403
    )
    resp = api.patch(f"/api/monitoring/alert-rules/{rule.pk}/", {"threshold": 80}, format="json")
    assert resp.status_code == 200
    rule.refresh_from_db()
    assert rule.threshold == 80
    bad = api.post(
        "/api/monitoring/alert-rules/", {"name": "x", "kind": "event", "severity": "info"}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json() == {"non_field_errors": ["An event rule needs an event kind."]}


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


def test_firing_notifies_webhook_and_email(
    inv: Any, settings: Any, django_capture_on_commit_callbacks: Any, celery_eager: Any
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        AlertRule.objects.filter(name="Xid error").update(
            notify_webhook=f"http://127.0.0.1:{server.server_port}/hook", notify_emails="ops@example.org"
        )
        inv.node("gpu01")
        _push("gpu01", "xid_last", 0, 0)
        with django_capture_on_commit_callbacks(execute=True):
            _push("gpu01", "xid_last", 79, 10)
    finally:
        server.shutdown()
    alert = Alert.objects.get()
    assert _Hook.received[-1]["transition"] == "firing"
    assert _Hook.received[-1]["rule"] == "Xid error"
    assert _Hook.received[-1]["card"] is None  # the card is not in the inventory
    assert mail.outbox[0].to == ["ops@example.org"]
    assert _Hook.received[-1]["message"] == "Xid 79: GPU has fallen off the bus"
    assert _Hook.received[-1]["text"] == "Xid 79: GPU has fallen off the bus"
    assert _Hook.received[-1]["params"]["event"]["kind"] == "xid"
    assert mail.outbox[0].subject == "[Rackpilot Critical] firing: Xid error on gpu01"
    assert mail.outbox[0].body.startswith(
        "Xid 79: GPU has fallen off the bus\n\nNode: gpu01\nCard: —\nValue: —\nStarted: "
    )
    alert.refresh_from_db()
    assert alert.notified_at is not None
    assert alert.notify_error == ""


def test_alert_pages_list_and_acknowledge(
    inv: Any, client: Any, operator_user: Any, researcher_user: Any
) -> None:
    node = inv.node("gpu01")
    alert = Alert.objects.create(
        rule=AlertRule.objects.get(name="Xid error"),
        target="t",
        node=node,
        severity="critical",
        started_at=T0,
        message="Xid 79",
    )
    client.force_login(researcher_user)
    assert client.post(f"/monitoring/alerts/{alert.pk}/acknowledge/").status_code == 403
    client.force_login(operator_user)
    page = client.get("/monitoring/alerts/")
    assert page.status_code == 200
    assert "Xid 79" in page.content.decode()
    resp = client.post(f"/monitoring/alerts/{alert.pk}/acknowledge/")
    assert resp.status_code == 204
    alert.refresh_from_db()
    assert alert.acknowledged_by == operator_user
    rules = page_text(client.get("/monitoring/alert-rules/"))
    names = list(AlertRule.objects.order_by("name").values_list("name", flat=True))
    assert rules.startswith(f"Alert rules {len(names)} results Name Kind Metric / event Scope Condition")
    assert [rules.find(f" {n} ") > 0 for n in names] == [True] * len(names)
    assert "GPU temperature above 85 °C Threshold Temperature Each card > 85 °C 60 Critical ✓" in rules


def test_a_rule_may_drain_the_node_through_the_cluster_layer(
    inv: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from inventory.models import Cluster
    from jobs.models import Action
    from monitoring.services.alerts import alert_notify

    # given a node in a cluster and the temperature rule set to drain
    node = inv.node("gpu01")
    node.cluster = Cluster.objects.create(name="pod", backend="simulator")
    node.save()
    inv.card(node, gpu_uuid=H100_UUIDS[0])
    AlertRule.objects.filter(name="GPU temperature above 85 °C").update(drain_node=True)
    with django_capture_on_commit_callbacks(execute=False):
        _push("gpu01", "temperature_c", 95, 0)
        _push("gpu01", "temperature_c", 96, 61)
        # when the firing alert is notified
        errors = alert_notify(Alert.objects.get().pk, "firing")
    # then a drain action is recorded for the node, by the portal itself, with the rule as reason
    assert errors == []
    action = Action.objects.get(node=node)
    assert (action.kind, action.status, action.requested_by) == ("drain", "pending", None)
    assert "GPU temperature above 85" in action.params["reason"]


def test_a_rule_edit_applies_to_the_next_batch(inv: Any) -> None:
    # given a card pending at 90 °C under the 85 °C rule
    inv.node("gpu01")
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    _push("gpu01", "temperature_c", 90, 0)
    assert AlertState.objects.filter(rule=rule).count() == 1
    # when an admin raises the threshold to 95 °C (the cached rule index is reset on save)
    rule.threshold = 95
    rule.save()
    _push("gpu01", "temperature_c", 92, 60)
    # then 92 °C no longer holds: nothing fires and the pending state is gone
    assert Alert.objects.count() == 0
    assert AlertState.objects.count() == 0
    # and a disabled rule is not evaluated at all
    rule.enabled = False
    rule.save()
    _push("gpu01", "temperature_c", 99, 70)
    _push("gpu01", "temperature_c", 99, 200)
    assert Alert.objects.count() == 0
    assert AlertState.objects.count() == 0


def test_a_warm_batch_of_cool_cards_reads_no_rules_and_no_alerts(
    inv: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # given cards this process has seen (series ids learnt on commit, rules cached)
    inv.node("gpu01")
    cards = [f"0000:{i + 1:02x}:00.0" for i in range(20)]
    with django_capture_on_commit_callbacks(execute=True):
        for card in cards:
            _push("gpu01", "temperature_c", 40, 0, card=card)
    # when a batch of cool readings arrives
    with CaptureQueriesContext(connection) as ctx:
        services.telemetry_ingest_samples(
            [
                {"ts": (T0 + dt.timedelta(seconds=10)).isoformat(), "node": "gpu01", "card": c}
                | {"metric": "temperature_c", "value": 41}
                for c in cards
            ]
        )
    sql = " ".join(q["sql"] for q in ctx.captured_queries)
    # then only the (empty) alert states are read: no rule, series, node or alert lookups
    assert "monitoring_alertstate" in sql
    for table in ("monitoring_alertrule", '"monitoring_alert"', "monitoring_series", "inventory_node"):
        assert table not in sql
    assert LatestValue.objects.filter(value=41).count() == 20


def test_quiet_bands_are_where_no_rule_of_the_metric_can_hold() -> None:
    from monitoring.services.alerts import alert_quiet_bands

    def rule(**kw: Any) -> AlertRule:
        return AlertRule(name="r", kind=kw.pop("kind", AlertRule.Kind.THRESHOLD), **kw)

    lowest, highest = alert_quiet_bands(
        {
            "temperature_c": [rule(op="gt", threshold=85), rule(op="gt", threshold=95, scope="node")],
            "disk_iops": [rule(op="lt", threshold=1000), rule(op="gt", threshold=90_000)],
            "heartbeat": [rule(kind=AlertRule.Kind.STALL, threshold=0)],
            "power_w": [rule(op="gt", threshold=90, relative_to=AlertRule.Relative.PSU_CAPACITY)],
        }
    )
    # the tightest limit of either scope bounds the band; a stall or relative rule empties it
    assert (lowest["temperature_c"], highest["temperature_c"]) == (float("-inf"), 85)
    assert (lowest["disk_iops"], highest["disk_iops"]) == (1000, 90_000)
    for metric in ("heartbeat", "power_w"):
        assert lowest[metric] > highest[metric]


def test_a_batch_with_a_hot_and_a_cool_point_of_one_card_is_evaluated_in_order(inv: Any) -> None:
    # given a card at 90 °C and then at 60 °C in one batch (a tool's backlog sent at once)
    inv.node("gpu01")
    rule = AlertRule.objects.get(name="GPU temperature above 85 °C")
    base = {"node": "gpu01", "card": H100_UUIDS[0], "metric": "temperature_c"}
    services.telemetry_ingest_samples(
        [
            {**base, "ts": T0.isoformat(), "value": 90},
            {**base, "ts": (T0 + dt.timedelta(seconds=30)).isoformat(), "value": 60},
            {
                "node": "gpu01",
                "card": H100_UUIDS[1],
                "metric": "temperature_c",
                "ts": T0.isoformat(),
                "value": 50,
            },
        ]
    )
    # then the cool point ended what the hot one began: no state row is left
    assert not AlertState.objects.filter(rule=rule).exists()
    # and a later hot batch starts pending again; a quiet batch while pending keeps nothing
    _push("gpu01", "temperature_c", 91, 60)
    assert AlertState.objects.get(rule=rule).pending_since == T0 + dt.timedelta(seconds=60)
    _push("gpu01", "temperature_c", 40, 70)
    assert not AlertState.objects.filter(rule=rule).exists() and not Alert.objects.exists()
