"""The acceptance criteria as pure functions: warm-up, the verdict rule, throttle reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobs.burnin import criteria as c

T0 = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
SPEC = c.Spec(
    tdp_w=300, temperature_limit_c=95, temperature_margin_c=10, power_min_pct=60, power_max_pct=105,
    power_variation_max_pct=8, throttle_max_pct=5, has_heartbeat=True, has_links=False,
)  # fmt: skip


def test_warm_up_is_a_tenth_of_the_run_between_30_s_and_5_min_and_never_half() -> None:
    assert c.warmup_of(timedelta(hours=24)) == timedelta(minutes=5)
    assert c.warmup_of(timedelta(minutes=20)) == timedelta(minutes=2)
    assert c.warmup_of(timedelta(minutes=3)) == timedelta(seconds=30)
    assert c.warmup_of(timedelta(seconds=40)) == timedelta(seconds=20)


def test_a_required_criterion_not_measured_fails_the_card_but_an_optional_one_does_not() -> None:
    measured = [c.Criterion(k, c.PASS) for k in ("stress_job", "power_band", "power_stable", "temperature")]
    assert c.verdict([*measured, c.Criterion("links", c.UNMEASURED)]) == "pass"
    assert c.verdict([*measured[:3], c.Criterion("temperature", c.UNMEASURED)]) == "fail"
    assert c.verdict([*measured, c.Criterion("errors", c.FAIL)]) == "fail"


def test_power_band_checks_the_mean_and_the_peak() -> None:
    assert c.power_band(SPEC, [250.0] * 10).status == c.PASS
    assert c.power_band(SPEC, [150.0] * 10).status == c.FAIL  # under 60 % of 300 W
    assert c.power_band(SPEC, [250.0] * 9 + [340.0]).status == c.FAIL  # a peak past 105 % + 5 %
    assert c.power_band(SPEC, []).status == c.UNMEASURED


def test_the_software_power_cap_is_the_stress_reaching_its_limit_not_throttling() -> None:
    reasons = [(T0 + timedelta(seconds=i), float(0x4)) for i in range(5)] + [
        (T0 + timedelta(seconds=5), 0x40)
    ]
    assert [flag for _ts, flag in c.throttled_flags(reasons, [], [])] == [False] * 5 + [True]
    aiclk = [(T0, 1350.0), (T0 + timedelta(seconds=1), 1100.0)]
    assert [flag for _ts, flag in c.throttled_flags([], aiclk, [(T0, 1350.0)])] == [False, True]
    assert c.throttled_flags([], aiclk, []) == []  # no limit known: not measured


def test_heartbeat_must_rise_at_every_sample() -> None:
    rising = c.Telemetry(heartbeat=[(T0 + timedelta(seconds=i), 100.0 + i) for i in range(5)])
    assert c.heartbeat(SPEC, rising).status == c.PASS
    stuck = c.Telemetry(heartbeat=[(T0, 100.0), (T0 + timedelta(seconds=1), 100.0)])
    assert (c.heartbeat(SPEC, stuck).status, c.heartbeat(SPEC, stuck).value) == (c.FAIL, 1)
