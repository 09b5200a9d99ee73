"""Alert and event messages: stored as parts, rendered for each reader in their language with units
and labels (pages, API, notifications); the English ``message`` stays for scripts."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core import mail
from django.utils import translation
from rest_framework.test import APIClient

from monitoring import messages
from monitoring.models import Alert, AlertRule, Event
from monitoring.services.alerts import alert_payload
from tests.monitoring.conftest import H100_UUIDS
from tests.monitoring.test_alerts import T0, _push
from tests.text import page_text

pytestmark = pytest.mark.django_db
RIG_CARD = "0000:01:00.0"


def _hot_card(inv: Any) -> Alert:
    node = inv.node("gpu01")
    inv.card(node, gpu_uuid=H100_UUIDS[0])
    for i, temp in enumerate((90, 91, 92.5)):
        _push("gpu01", "temperature_c", temp, i * 30)
    return Alert.objects.get()


def test_a_threshold_alert_keeps_its_limit_and_reads_with_units_in_each_language(inv: Any) -> None:
    alert = _hot_card(inv)
    assert alert.params == {"limit": 85.0}
    assert alert.message == "Temperature 92.5 °C above 85 °C for 1 min"
    with translation.override("zh-hans"):
        assert messages.alert_text(alert) == "温度 92.5 °C，高于 85 °C 持续 1 分钟"
        assert messages.alert_value(alert) == "92.5 °C"
    # when it cools, the resolution is kept as a part too, and rendered in the reader's language
    _push("gpu01", "temperature_c", 70, 120)
    alert.refresh_from_db()
    assert alert.params["resolution"] == {"key": "cleared", "value": 70.0}
    assert alert.message == "Temperature 92.5 °C above 85 °C for 1 min — condition cleared at 70 °C"
    with translation.override("zh-hans"):
        assert messages.alert_text(alert).endswith("— 条件已解除（70 °C）")


def test_a_link_down_names_the_port_and_the_link_coming_back_resolves_it(inv: Any) -> None:
    inv.node("rig01")
    _push("rig01", "link_up", 1, 0, card=RIG_CARD, labels={"port": "2"})
    _push("rig01", "link_up", 0, 10, card=RIG_CARD, labels={"port": "2"})
    alert = Alert.objects.get(rule__name="Link down")
    event = Event.objects.get(kind="link_down")
    assert alert.params["event"] == {"kind": "link_down", "data": {"labels": "port=2"}, "text": event.message}
    assert alert.message == "Link down (port 2)"
    with translation.override("zh-hans"):
        assert messages.alert_text(alert) == "链路断开（端口 2）"
        assert messages.event_message(event) == "链路断开（端口 2）"
    _push("rig01", "link_up", 1, 20, card=RIG_CARD, labels={"port": "2"})
    alert.refresh_from_db()
    assert alert.status == "resolved"
    assert alert.message == "Link down (port 2) — cleared: Link up (port 2)"


def test_a_tools_own_line_follows_the_summary() -> None:
    line = "eth channel 8 (chip 0): link DOWN, retrain: 3"
    assert messages.event_text("link_down", {"port": 8, "chip": "0", "line": 4}, line) == (
        f"Link down (port 8, chip 0): {line}"
    )
    assert messages.event_text("xid", {"xid": 79}, "Xid 79: GPU has fallen off the bus") == (
        "Xid 79: GPU has fallen off the bus"
    )


def test_the_alerts_page_shows_values_with_units_and_messages_in_the_readers_language(
    inv: Any, client: Any, operator_user: Any
) -> None:
    _hot_card(inv)
    client.force_login(operator_user)
    client.cookies["django_language"] = "zh-hans"
    text = page_text(client.get("/monitoring/alerts/"))
    assert "温度 92.5 °C，高于 85 °C 持续 1 分钟" in text
    assert "temperature_c" not in text
    client.cookies["django_language"] = "en"
    text = page_text(client.get("/monitoring/alerts/"))
    assert "92.5 °C Temperature 92.5 °C above 85 °C for 1 min" in text  # the Value column, then the message


def test_the_node_and_card_pages_list_alerts_and_events_for_operators_only(
    inv: Any, client: Any, operator_user: Any, researcher_user: Any
) -> None:
    alert = _hot_card(inv)
    client.force_login(operator_user)
    node_page = page_text(client.get(f"/inventory/nodes/{alert.node_id}/"))
    card_page = page_text(client.get(f"/inventory/cards/{alert.card_id}/"))
    for text in (node_page, card_page):
        assert "Alerts Firing GPU temperature above 85 °C" in text
        assert "Temperature 92.5 °C above 85 °C for 1 min" in text
    client.force_login(researcher_user)
    assert "above 85 °C for 1 min" not in page_text(client.get(f"/inventory/nodes/{alert.node_id}/"))


def test_the_api_keeps_english_and_adds_the_parts_and_the_readers_text(inv: Any, api: APIClient) -> None:
    alert = _hot_card(inv)
    body = api.get(f"/api/monitoring/alerts/{alert.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert body["message"] == "Temperature 92.5 °C above 85 °C for 1 min"
    assert body["text"] == "温度 92.5 °C，高于 85 °C 持续 1 分钟"
    assert (body["metric"], body["value"], body["value_text"]) == ("temperature_c", 92.5, "92.5 °C")
    assert body["params"] == {"limit": 85.0}


def test_notifications_speak_the_sites_language(
    inv: Any, settings: Any, django_capture_on_commit_callbacks: Any, celery_eager: Any
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.LANGUAGE_CODE = "zh-hans"
    AlertRule.objects.filter(name="GPU temperature above 85 °C").update(notify_emails="ops@example.org")
    with django_capture_on_commit_callbacks(execute=True):
        alert = _hot_card(inv)
    assert mail.outbox[0].subject == "[Rackpilot 严重] 告警中：gpu01 上的 GPU 温度高于 85 °C"
    assert mail.outbox[0].body.startswith("温度 92.5 °C，高于 85 °C 持续 1 分钟\n\n节点：gpu01\n")
    assert alert_payload(alert, "firing")["message"] == "Temperature 92.5 °C above 85 °C for 1 min"


def test_the_migration_gives_old_alerts_their_parts(inv: Any) -> None:
    # given alerts stored before the parts existed: English text with metric keys
    node = inv.node("rig01")
    temp = AlertRule.objects.get(name="GPU temperature above 85 °C")
    link = AlertRule.objects.get(name="Link down")
    hot = Alert.objects.create(
        rule=temp, target=f"n{node.pk}/{RIG_CARD}/", node=node, severity="critical", started_at=T0,
        status="resolved", value=91, message="temperature_c = 91 > 85 for 60 s — condition cleared at 80",
    )  # fmt: skip
    down = Alert.objects.create(
        rule=link, target=f"n{node.pk}/{RIG_CARD}/port=0", node=node, severity="warning", started_at=T0,
        value=0, message="link down (port=0)",
    )  # fmt: skip
    # when the migration's data step runs
    migration = importlib.import_module("monitoring.migrations.0009_alert_message_params")
    migration.fill(django_apps, None)
    hot.refresh_from_db()
    down.refresh_from_db()
    # then they read like new ones
    assert hot.params == {"limit": 85.0, "resolution": {"key": "cleared", "value": 80.0}}
    assert hot.message == "Temperature 91 °C above 85 °C for 1 min — condition cleared at 80 °C"
    assert down.params["event"]["data"] == {"labels": "port=0"}
    assert down.message == "Link down (port 0)"


def test_a_channels_link_down_names_the_qsfp_port_it_is_wired_to(db: Any) -> None:
    from inventory.links import P150_QSFP_CHANNELS
    from inventory.models import PortTemplate
    from tests.inventory.conftest import Builder

    build = Builder()
    model = build.card_model(ports=2)
    for t in PortTemplate.objects.filter(card_model=model):
        t.eth_channels = list(P150_QSFP_CHANNELS[t.name])
        t.save()
    build.card(node=build.node(hostname="rig01"), card_model=model, slot="A", pci_bus_id=RIG_CARD)
    # tt-smi numbers channels: channel 3 is the second of QSFP2's two
    _push("rig01", "link_up", 1, 0, card=RIG_CARD, labels={"port": "3"})
    _push("rig01", "link_up", 0, 10, card=RIG_CARD, labels={"port": "3"})
    event = Event.objects.get(kind="link_down")
    alert = Alert.objects.get(rule__name="Link down")
    assert event.data == {"labels": "port=3", "port_name": "QSFP2"}
    assert messages.event_message(event) == alert.message == "Link down (port QSFP2, channel 3)"
    with translation.override("zh-hans"):
        assert messages.alert_text(alert) == "链路断开（端口 QSFP2，通道 3）"
