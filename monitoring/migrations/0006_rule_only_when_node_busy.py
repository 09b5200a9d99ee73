"""Rules that count only while a job runs; the node_exporter metrics; the default rules added with them
(network above 80%, disk IOPS below 1000, training process gone), inserted only where absent."""

from django.db import migrations, models

NEW_RULES = [
    "Network above 80% for 10 minutes",
    "Disk IOPS below 1000 for 10 minutes",
    "Training process gone",
]


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    from monitoring.defaults import alert_rules_ensure_defaults

    alert_rules_ensure_defaults(apps.get_model("monitoring", "AlertRule"), names=NEW_RULES)


def remove(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("monitoring", "AlertRule").objects.filter(name__in=NEW_RULES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0005_latestvalue_fillfactor"),
    ]

    operations = [
        migrations.AddField(
            model_name="alertrule",
            name="only_when_node_busy",
            field=models.BooleanField(
                default=False,
                help_text="The condition counts only while Slurm says the node runs a job (alloc, mixed, draining, completing; with GPUs allocated where Slurm tracks them).",
                verbose_name="only while a job runs",
            ),
        ),
        migrations.AlterField(
            model_name="alertrule",
            name="metric",
            field=models.CharField(
                blank=True,
                choices=[
                    ("aiclk_max_mhz", "aiclk_max_mhz"),
                    ("aiclk_mhz", "aiclk_mhz"),
                    ("asic_power_w", "asic_power_w"),
                    ("current_a", "current_a"),
                    ("current_limit_a", "current_limit_a"),
                    ("disk_iops", "disk_iops"),
                    ("disk_reads_total", "disk_reads_total"),
                    ("disk_writes_total", "disk_writes_total"),
                    ("dram_active_pct", "dram_active_pct"),
                    ("dram_ok", "dram_ok"),
                    ("ecc_corrected_total", "ecc_corrected_total"),
                    ("ecc_uncorrected_total", "ecc_uncorrected_total"),
                    ("energy_j", "energy_j"),
                    ("enforced_power_limit_w", "enforced_power_limit_w"),
                    ("fan_pct", "fan_pct"),
                    ("fan_rpm", "fan_rpm"),
                    ("graphics_clock_mhz", "graphics_clock_mhz"),
                    ("graphics_engine_active_pct", "graphics_engine_active_pct"),
                    ("heartbeat", "heartbeat"),
                    ("inlet_temperature_c", "inlet_temperature_c"),
                    ("link_retrain_total", "link_retrain_total"),
                    ("link_up", "link_up"),
                    ("mem_clock_mhz", "mem_clock_mhz"),
                    ("memory_free_bytes", "memory_free_bytes"),
                    ("memory_temperature_c", "memory_temperature_c"),
                    ("memory_total_bytes", "memory_total_bytes"),
                    ("memory_used_bytes", "memory_used_bytes"),
                    ("memory_utilization_pct", "memory_utilization_pct"),
                    ("net_rx_bytes_total", "net_rx_bytes_total"),
                    ("net_speed_bytes_per_s", "net_speed_bytes_per_s"),
                    ("net_tx_bytes_total", "net_tx_bytes_total"),
                    ("net_util_pct", "net_util_pct"),
                    ("node_power_capacity_w", "node_power_capacity_w"),
                    ("node_power_w", "node_power_w"),
                    ("nvlink_bandwidth_total", "nvlink_bandwidth_total"),
                    ("nvlink_crc_data_errors_total", "nvlink_crc_data_errors_total"),
                    ("nvlink_crc_flit_errors_total", "nvlink_crc_flit_errors_total"),
                    ("nvlink_recovery_errors_total", "nvlink_recovery_errors_total"),
                    ("nvlink_replay_errors_total", "nvlink_replay_errors_total"),
                    ("pcie_link_gen", "pcie_link_gen"),
                    ("pcie_link_gen_max", "pcie_link_gen_max"),
                    ("pcie_link_width", "pcie_link_width"),
                    ("pcie_link_width_max", "pcie_link_width_max"),
                    ("pcie_replay_total", "pcie_replay_total"),
                    ("power_instant_w", "power_instant_w"),
                    ("power_limit_w", "power_limit_w"),
                    ("power_w", "power_w"),
                    ("pstate", "pstate"),
                    ("psu_capacity_w", "psu_capacity_w"),
                    ("psu_input_power_w", "psu_input_power_w"),
                    ("psu_output_power_w", "psu_output_power_w"),
                    ("reset_required", "reset_required"),
                    ("sm_active_pct", "sm_active_pct"),
                    ("sm_clock_mhz", "sm_clock_mhz"),
                    ("temperature_c", "temperature_c"),
                    ("tensor_active_pct", "tensor_active_pct"),
                    ("thermal_limit_c", "thermal_limit_c"),
                    ("throttle_applications_clocks_setting", "throttle_applications_clocks_setting"),
                    ("throttle_display_clock_setting", "throttle_display_clock_setting"),
                    ("throttle_gpu_idle", "throttle_gpu_idle"),
                    ("throttle_hw_power_brake_slowdown", "throttle_hw_power_brake_slowdown"),
                    ("throttle_hw_slowdown", "throttle_hw_slowdown"),
                    ("throttle_hw_thermal_slowdown", "throttle_hw_thermal_slowdown"),
                    ("throttle_reasons", "throttle_reasons"),
                    ("throttle_sw_power_cap", "throttle_sw_power_cap"),
                    ("throttle_sw_thermal_slowdown", "throttle_sw_thermal_slowdown"),
                    ("throttle_sync_boost", "throttle_sync_boost"),
                    ("utilization_pct", "utilization_pct"),
                    ("voltage_v", "voltage_v"),
                    ("xid_errors_total", "xid_errors_total"),
                    ("xid_last", "xid_last"),
                ],
                max_length=64,
                verbose_name="metric",
            ),
        ),
        migrations.RunPython(create, remove),
    ]
