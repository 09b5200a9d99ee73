"""Burn-in runs: start one (a row, the cards to ``burn_in``, a Slurm job submitted through the ordinary
submit action as the operator's own cluster account), advance it as its job runs (each card's telemetry
held against its model's acceptance criteria) and end it with a verdict per card that moves the card to
``accepted`` or ``rejected``.

The job holds every schedulable GPU of the node (``--nodelist`` and ``--gres=gpu:N``): Slurm cannot be
asked for one card by bus id, so the whole node's cards are held and the stress program is told which
cards it tests (``BURNIN_CARDS``, their PCI bus ids).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from inventory.choices import CARD_SCHEDULABLE, CardStatus
from inventory.lifecycle import card_transition
from inventory.links import port_keys
from inventory.models import Card, CardModel, Node
from jobs.burnin import criteria as c
from jobs.burnin.selectors import LABELS
from jobs.models import (
    ActionStatus,
    BurnInResult,
    BurnInRun,
    BurnInStatus,
    BurnInVerdict,
    Job,
)
from jobs.services import job_submit
from monitoring.selectors import card_window_events, card_window_telemetry
from portal.models import AuditEntry
from portal.services import audit_record

logger = logging.getLogger(__name__)

RUN_BURNIN = "jobs.run_burnin"
MAX_MINUTES = 7 * 24 * 60
#: minutes the job may run past the stress program (set-up, the last telemetry)
JOB_SLACK_MINUTES = 10
#: how often a running burn-in's interim figures are recomputed (a fifth of a short run)
INTERIM_EVERY = timedelta(minutes=5)
#: cards a burn-in may start from (a rejected card is re-tested after its lead is replaced)
STARTABLE = frozenset(
    {CardStatus.RECEIVED, CardStatus.BURN_IN, CardStatus.ACCEPTED, CardStatus.IN_SERVICE, CardStatus.REJECTED}
)
METRICS = (
    "power_w", "temperature_c", "throttle_reasons", "aiclk_mhz", "aiclk_max_mhz", "heartbeat",
    "ecc_corrected_total", "ecc_uncorrected_total", "link_up",
)  # fmt: skip

DEFAULT_PROGRAMS = {
    # DCGM's level-3 diagnostic first when the node has DCGM, then gpu-burn with tensor cores
    "NVIDIA": (
        'if command -v dcgmi >/dev/null 2>&1; then dcgmi diag -r 3 || exit $?; fi\ngpu_burn -tc "$BURNIN_SECONDS"'
    ),
    # tt-burnin runs its high-power workload until interrupted: stop it when the time is up
    "Tenstorrent": (
        'timeout --signal=INT "$BURNIN_SECONDS" tt-burnin\nstatus=$?\n[ "$status" -eq 124 ] && exit 0\nexit $status'
    ),
}


def default_program(card_model: CardModel) -> str:
    """The model's own stress program, else its vendor's default."""
    return card_model.burnin_program.strip() or DEFAULT_PROGRAMS.get(
        card_model.vendor, "echo 'no burn-in program for this vendor: set one on the card model'\nexit 2"
    )


def burnin_script(run: BurnInRun, node: Node, cards: Sequence[Card]) -> str:
    """The batch script: who and what it burns in, the simulator's run time, then the stress program."""
    seconds = run.duration_minutes * 60
    ids = ",".join(card.pci_bus_id or card.gpu_uuid or card.slot for card in cards)
    return (
        "#!/bin/bash\n"
        f"# Rackpilot burn-in #{run.pk} of {node.hostname}: {len(cards)} card(s) for {run.duration_minutes} min\n"
        f"# sim: duration={seconds}\n"
        f"export BURNIN_CARDS={ids}\n"
        f"export BURNIN_SECONDS={seconds}\n"
        'echo "burn-in of $BURNIN_CARDS on $(hostname) for $BURNIN_SECONDS s, GPUs held: '
        '${CUDA_VISIBLE_DEVICES:-none}"\n'
        f"{run.program}\n"
    )


def _cards_for(node: Node, card_ids: Sequence[int] | None) -> list[Card]:
    qs = Card.objects.filter(node=node).select_related("card_model").order_by("slot")
    if card_ids:
        cards = list(qs.filter(pk__in=card_ids))
        if len(cards) != len(set(card_ids)):
            raise ValidationError({"cards": [_("Every card must be one of this node's cards.")]})
    else:
        cards = [card for card in qs if card.status in STARTABLE]
    if not cards:
        raise ValidationError({"cards": [_("This node has no card to burn in.")]})
    refused = [card for card in cards if card.status not in STARTABLE]
    if refused:
        names = ", ".join(f"{card.slot} ({card.get_status_display()})" for card in refused)
        raise ValidationError({"cards": [_("These cards cannot be burnt in now: %(s)s.") % {"s": names}]})
    if len({card.card_model.vendor for card in cards}) > 1:
        raise ValidationError({"cards": [_("Burn in one vendor's cards at a time.")]})
    return cards


@transaction.atomic
def burnin_start(
    *,
    user: Any,
    node: Node,
    card_ids: Sequence[int] | None = None,
    duration_minutes: int | None = None,
    program: str | None = None,
) -> BurnInRun:
    """Start a burn-in of ``card_ids`` (default: every card of the node that may be burnt in)."""
    if not user.has_perm(RUN_BURNIN):
        raise PermissionDenied(_("You may not start burn-in runs."))
    if node.cluster_id is None:
        raise ValidationError({"node": [_("This node belongs to no cluster.")]})
    cards = _cards_for(node, card_ids)
    model = cards[0].card_model
    if duration_minutes is None:
        duration_minutes = max(round(float(card.card_model.burnin_hours) * 60) for card in cards)
    if isinstance(duration_minutes, bool) or not 1 <= duration_minutes <= MAX_MINUTES:
        raise ValidationError(
            {"duration_minutes": [_("Between 1 minute and %(n)s minutes.") % {"n": MAX_MINUTES}]}
        )
    program = (program or "").strip() or default_program(model)
    if "\x00" in program:
        raise ValidationError({"program": [_("The program contains a NUL character.")]})
    run = BurnInRun(node=node, duration_minutes=duration_minutes, program=program, requested_by=user)
    try:
        with transaction.atomic():
            run.save(force_insert=True)
    except IntegrityError:
        raise ValidationError({"node": [_("This node already has a burn-in in progress.")]}) from None
    BurnInResult.objects.bulk_create(BurnInResult(run=run, card=card) for card in cards)
    reason = _("Burn-in #%(id)s") % {"id": run.pk}
    for card in cards:
        if card.status != CardStatus.BURN_IN:
            card_transition(card, to_status=CardStatus.BURN_IN, user=user, reason=reason)
    held = sum(1 for card in node.cards.all() if card.status in CARD_SCHEDULABLE)
    try:
        action = job_submit(
            user=user,
            cluster=node.cluster,  # type: ignore[arg-type]
            name=f"burnin-{node.effective_slurm_name}",
            script=burnin_script(run, node, cards),
            nodelist=[node.effective_slurm_name],
            nodes=1,
            gpus=held,
            time_limit_minutes=duration_minutes + JOB_SLACK_MINUTES,
        )
    except ValidationError as exc:
        if hasattr(exc, "error_dict") and "time_limit_minutes" in exc.error_dict:
            raise ValidationError({"duration_minutes": exc.error_dict["time_limit_minutes"]}) from None
        raise
    run.action = action
    run.save(update_fields=["action"])
    audit_record(
        user=user,
        action=AuditEntry.Action.ACTION,
        instance=run,
        after={"node": node.hostname, "cards": [card.pk for card in cards], "minutes": duration_minutes},
        message=f"burn-in of {node.hostname}",
    )
    return run


# ---------------------------------------------------------------------------- evaluation


def card_spec(card: Card) -> c.Spec:
    m = card.card_model
    return c.Spec(
        tdp_w=float(m.tdp_w),
        temperature_limit_c=float(m.temperature_limit_c) if m.temperature_limit_c is not None else None,
        temperature_margin_c=float(m.burnin_temperature_margin_c),
        power_min_pct=float(m.burnin_power_min_pct),
        power_max_pct=float(m.burnin_power_max_pct),
        power_variation_max_pct=float(m.burnin_power_variation_max_pct),
        throttle_max_pct=float(m.burnin_throttle_max_pct),
        has_heartbeat=m.vendor == "Tenstorrent",
        has_links=bool(cabled_link_labels(card)),
    )


def cabled_link_labels(card: Card) -> dict[str, int]:
    """What link telemetry calls the card's cabled ports (their names and the Ethernet channels the model
    wires to them, inventory.links, as the fabric drawing resolves them) -> the port's id."""
    cabled = [port.pk for port in card.ports.all() if hasattr(port, "termination")]
    return {name: pk for (_node, _card, name), pk in port_keys(cabled).items()} if cabled else {}


def _port_of(labels: str) -> str:
    return dict(kv.partition("=")[::2] for kv in labels.split(",") if kv).get("port", "").lower()


def _first(by_labels: dict[str, list[c.Point]] | None) -> list[c.Point]:
    if not by_labels:
        return []
    return by_labels.get("", next(iter(by_labels.values())))


def _link_up_by_port(by_labels: dict[str, list[c.Point]], links: dict[str, int]) -> dict[str, list[c.Point]]:
    """The cabled ports' link series, one per port (a QSFP-DD cage's channels together)."""
    out: dict[str, list[c.Point]] = {}
    for labels, points in by_labels.items():
        port = links.get(_port_of(labels))
        if port is not None:
            out.setdefault(str(port), []).extend(points)
    return out


def card_telemetry(
    raw: dict[str, dict[str, list[c.Point]]], events: list[tuple[Any, str]], links: dict[str, int]
) -> c.Telemetry:
    """What the selectors read, shaped for the criteria (links: only the cabled ports' series)."""
    return c.Telemetry(
        power=_first(raw.get("power_w")),
        temperature=_first(raw.get("temperature_c")),
        throttled=c.throttled_flags(
            _first(raw.get("throttle_reasons")),
            _first(raw.get("aiclk_mhz")),
            _first(raw.get("aiclk_max_mhz")),
        ),
        heartbeat=_first(raw.get("heartbeat")),
        ecc_corrected=[p for points in raw.get("ecc_corrected_total", {}).values() for p in points],
        ecc_uncorrected=[p for points in raw.get("ecc_uncorrected_total", {}).values() for p in points],
        link_up=_link_up_by_port(raw.get("link_up", {}), links),
        events=events,
    )


def _evaluate(run: BurnInRun, start: Any, end: Any, *, job: Job | None = None) -> list[BurnInResult]:
    """Hold each card's telemetry over [start, end] against its criteria; with the ended ``job``, the
    verdicts too."""
    results = list(
        run.results.select_related("card__card_model").prefetch_related("card__ports__termination")
    )
    ids = [r.card_id for r in results]
    raw = card_window_telemetry(ids, METRICS, start, end)
    events = card_window_events(ids, start, end)
    now = timezone.now()
    for result in results:
        found = c.evaluate(
            card_spec(result.card),
            card_telemetry(
                raw.get(result.card_id, {}), events.get(result.card_id, []), cabled_link_labels(result.card)
            ),
            start=start,
            end=end,
            job_state=job.state if job is not None else None,
            exit_code=job.exit_code if job is not None else None,
        )
        result.criteria = [x.as_dict() for x in found]
        result.samples = sum(len(p) for by in raw.get(result.card_id, {}).values() for p in by.values())
        result.evaluated_at = now
        if job is not None:
            result.verdict = BurnInVerdict.PASS if c.verdict(found) == "pass" else BurnInVerdict.FAIL
    BurnInResult.objects.bulk_update(results, ["criteria", "samples", "evaluated_at", "verdict"])
    return results


def _end_without_verdict(run: BurnInRun, error: str) -> BurnInRun:
    run.status, run.error, run.finished = BurnInStatus.ERROR, error[:2000], timezone.now()
    run.save(update_fields=["job", "started", "status", "error", "finished"])
    reason = _("Burn-in #%(id)s did not run") % {"id": run.pk}
    for result in run.results.select_related("card"):
        if result.card.status == CardStatus.BURN_IN:
            card_transition(result.card, to_status=CardStatus.RECEIVED, user=None, reason=reason)
    return run


def failed_keys(criteria: Sequence[dict[str, Any]]) -> list[str]:
    """The criteria that made a card fail (failed, or required and not measured)."""
    return [
        x["key"]
        for x in criteria
        if x["status"] == c.FAIL or (x["key"] in c.REQUIRED and x["status"] != c.PASS)
    ]


def _finish(run: BurnInRun, job: Job) -> BurnInRun:
    results = _evaluate(run, job.start_time, job.end_time or timezone.now(), job=job)
    for result in results:
        if result.verdict == BurnInVerdict.PASS:
            to, why = CardStatus.ACCEPTED, _("Burn-in #%(id)s passed") % {"id": run.pk}
        else:
            keys = ", ".join(str(LABELS[key]) for key in failed_keys(result.criteria))
            to, why = (
                CardStatus.REJECTED,
                _("Burn-in #%(id)s failed: %(keys)s") % {"id": run.pk, "keys": keys},
            )
        card = Card.objects.get(pk=result.card_id)
        if card.status == CardStatus.BURN_IN:
            card_transition(card, to_status=to, user=None, reason=why)
    passed = all(r.verdict == BurnInVerdict.PASS for r in results)
    run.status = BurnInStatus.PASSED if passed else BurnInStatus.FAILED
    run.finished = job.end_time or timezone.now()
    run.save(update_fields=["job", "started", "status", "finished"])
    return run


@transaction.atomic
def burnin_advance(run_id: int) -> BurnInRun | None:
    """Move one run on from what its submit action and Slurm job say: running (interim figures), then
    a verdict per card when the job has ended. Harmless to call again (a finished run is left alone)."""
    run = (
        BurnInRun.objects.select_for_update(of=("self",))
        .select_related("action", "job")
        .filter(pk=run_id)
        .first()
    )
    if run is None or not run.is_active:
        return run
    action = run.action
    if run.job is None and action is not None and action.job_id is not None:
        run.job = action.job
    job = run.job
    if job is None:
        if action is None or action.status == ActionStatus.FAILED:
            return _end_without_verdict(
                run, (action.error or action.output) if action else _("Nothing was submitted.")
            )
        return run
    if job.start_time is None:
        if not job.is_active:
            return _end_without_verdict(
                run,
                _("Job %(id)s ended without running (%(state)s).") % {"id": job.slurm_id, "state": job.state},
            )
        run.save(update_fields=["job"])
        return run
    run.started = job.start_time
    if job.state == "CANCELLED":
        return _end_without_verdict(run, _("Job %(id)s was cancelled.") % {"id": job.slurm_id})
    if not job.is_active:
        return _finish(run, job)
    run.status = BurnInStatus.RUNNING
    run.save(update_fields=["job", "started", "status"])
    last = run.results.aggregate(at=Max("evaluated_at"))["at"]
    every = min(INTERIM_EVERY, timedelta(minutes=run.duration_minutes) / 5)
    if last is None or timezone.now() - last >= every:  # a 24 h run's window is large: now and then
        _evaluate(run, job.start_time, timezone.now())
    return run


def burnin_advance_all() -> list[int]:
    """Advance every run in progress (beat); returns their ids."""
    ids = list(
        BurnInRun.objects.filter(status__in=[BurnInStatus.PENDING, BurnInStatus.RUNNING]).values_list(
            "pk", flat=True
        )
    )
    for run_id in ids:
        try:
            burnin_advance(run_id)
        except Exception:  # one broken run must not stop the others
            logger.exception("burn-in %s could not be advanced", run_id)
    return ids
