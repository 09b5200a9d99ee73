"""Alert messages rendered per reader: Alert.params holds their structured parts (the limit a value
was compared with, the last event, how the alert resolved); metric choices carry labels. Existing
alerts get their parts from their old English text and the events they reported, and their stored
``message`` is written again (in English) from those parts."""

import re

from django.db import migrations, models

THRESHOLD = re.compile(r" [<>] (?P<limit>-?[\d.]+(?:e[-+]?\d+)?) for \d+ s")
RESOLUTIONS = [
    (re.compile(r"^condition cleared at (?P<value>-?[\d.]+(?:e[-+]?\d+)?)$"), "cleared"),
    (re.compile(r"^the node no longer runs a job$"), "idle"),
    (re.compile(r"^no new event for (?P<duration_s>\d+) s$"), "quiet"),
    (re.compile(r"^resolved by (?P<user>.+)$"), "by_hand"),
    (re.compile(r"^cleared: (?P<text>.*)$"), "event"),
]


def _event(Event, alert, kind, before, text):  # type: ignore[no-untyped-def]
    from monitoring.messages import event_parts, target_labels

    ref = alert.target.split("/")[1] if alert.target.count("/") >= 2 else ""
    found = (
        Event.objects.filter(node_id=alert.node_id, kind=kind, card_ref=ref, ts__lte=before)
        .order_by("-ts", "-id")
        .first()
    )
    if found is not None and isinstance(found.data, dict):
        return event_parts(found.kind, found.data, found.message)
    labels = ",".join(f"{k}={v}" for k, v in target_labels(alert.target).items())
    return event_parts(kind, {"labels": labels} if labels else {}, text)


def fill(apps, schema_editor):  # type: ignore[no-untyped-def]
    from monitoring.messages import alert_message_en

    Alert = apps.get_model("monitoring", "Alert")
    Event = apps.get_model("monitoring", "Event")
    for alert in Alert.objects.select_related("rule").iterator():
        rule = alert.rule
        base, _sep, note = alert.message.partition(" — ")
        params = {}
        seen = alert.last_seen_at or alert.started_at
        if rule.kind == "event":
            params["event"] = _event(Event, alert, rule.event_kind, seen, base)
        elif rule.kind == "threshold":
            found = THRESHOLD.search(base)
            params["limit"] = float(found["limit"]) if found else rule.threshold
        for pattern, key in RESOLUTIONS if note else ():
            found = pattern.match(note)
            if found:
                how = {"key": key, **found.groupdict()}
                if key == "cleared":
                    how["value"] = float(how["value"])
                elif key == "quiet":
                    how["duration_s"] = int(how["duration_s"])
                elif key == "event":
                    clear = "link_up" if rule.event_kind == "link_down" else rule.event_kind
                    how["event"] = _event(Event, alert, clear, alert.resolved_at or seen, how.pop("text"))
                params["resolution"] = how
                break
        alert.params = params
        alert.message = alert_message_en(alert)
        alert.save(update_fields=["params", "message"])


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0008_prometheus"),
    ]

    operations = [
        migrations.AddField(
            model_name="alert",
            name="params",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The message's structured parts: limit, the last event (kind, data, text), resolution",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="alert",
            name="message",
            field=models.TextField(
                blank=True, help_text="English, for scripts (monitoring.messages)", verbose_name="message"
            ),
        ),
        migrations.AlterField(
            model_name="alertrule",
            name="metric",
            field=models.CharField(
                blank=True,
                choices=[
                    ("aiclk_max_mhz", "AI clock limit"),
                    ("aiclk_mhz", "AI clock"),
                    ("asic_power_w", "ASIC power"),
                    ("current_a", "Current"),
                    ("current_limit_a", "Current limit"),
                    ("disk_iops", "Disk IOPS"),
                    ("disk_reads_total", "Disk reads"),
                    ("disk_writes_total", "Disk writes"),
                    ("dram_active_pct", "DRAM active"),
                    ("dram_ok", "DRAM trained"),
                    ("ecc_corrected_total", "Corrected ECC errors"),
                    ("ecc_uncorrected_total", "Uncorrected ECC errors"),
                    ("energy_j", "Energy"),
                    ("enforced_power_limit_w", "Enforced power limit"),
                    ("fan_pct", "Fan duty"),
                    ("fan_rpm", "Fan speed"),
                    ("graphics_clock_mhz", "Graphics clock"),
                    ("graphics_engine_active_pct", "Graphics engine active"),
                    ("heartbeat", "Firmware heartbeat"),
                    ("inlet_temperature_c", "Inlet temperature"),
                    ("link_retrain_total", "Link retrains"),
                    ("link_up", "Link up"),
                    ("mem_clock_mhz", "Memory clock"),
                    ("memory_free_bytes", "Memory free"),
                    ("memory_temperature_c", "Memory temperature"),
                    ("memory_total_bytes", "Memory total"),
                    ("memory_used_bytes", "Memory used"),
                    ("memory_utilization_pct", "Memory utilisation"),
                    ("net_rx_bytes_total", "Bytes received"),
                    ("net_speed_bytes_per_s", "Link speed"),
                    ("net_tx_bytes_total", "Bytes sent"),
                    ("net_util_pct", "Network utilisation"),
                    ("node_power_capacity_w", "Node power capacity"),
                    ("node_power_w", "Node power"),
                    ("nvlink_bandwidth_total", "NVLink bandwidth counter"),
                    ("nvlink_crc_data_errors_total", "NVLink CRC data errors"),
                    ("nvlink_crc_flit_errors_total", "NVLink CRC flit errors"),
                    ("nvlink_recovery_errors_total", "NVLink recovery errors"),
                    ("nvlink_replay_errors_total", "NVLink replay errors"),
                    ("pcie_link_gen", "PCIe generation"),
                    ("pcie_link_gen_max", "Maximum PCIe generation"),
                    ("pcie_link_width", "PCIe link width"),
                    ("pcie_link_width_max", "Maximum PCIe link width"),
                    ("pcie_replay_total", "PCIe replays"),
                    ("power_instant_w", "Instantaneous card power"),
                    ("power_limit_w", "Power limit"),
                    ("power_w", "Card power"),
                    ("pstate", "Performance state"),
                    ("psu_capacity_w", "PSU capacity"),
                    ("psu_input_power_w", "PSU input power"),
                    ("psu_output_power_w", "PSU output power"),
                    ("reset_required", "Reset required"),
                    ("sm_active_pct", "SM active"),
                    ("sm_clock_mhz", "SM clock"),
                    ("temperature_c", "Temperature"),
                    ("tensor_active_pct", "Tensor pipes active"),
                    ("thermal_limit_c", "Thermal limit"),
                    ("throttle_applications_clocks_setting", "Clocks lowered: application clocks setting"),
                    ("throttle_display_clock_setting", "Clocks lowered: display clock setting"),
                    ("throttle_gpu_idle", "Clocks lowered: GPU idle"),
                    ("throttle_hw_power_brake_slowdown", "Clocks lowered: hardware power brake"),
                    ("throttle_hw_slowdown", "Clocks lowered: hardware slowdown"),
                    ("throttle_hw_thermal_slowdown", "Clocks lowered: hardware thermal slowdown"),
                    ("throttle_reasons", "Clock event reasons"),
                    ("throttle_sw_power_cap", "Clocks lowered: software power cap"),
                    ("throttle_sw_thermal_slowdown", "Clocks lowered: software thermal slowdown"),
                    ("throttle_sync_boost", "Clocks lowered: sync boost"),
                    ("utilization_pct", "Utilisation"),
                    ("voltage_v", "Voltage"),
                    ("xid_errors_total", "Xid errors"),
                    ("xid_last", "Last Xid"),
                ],
                max_length=64,
                verbose_name="metric",
            ),
        ),
    ]
