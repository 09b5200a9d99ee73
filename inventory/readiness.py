"""Node readiness: the rules (pure functions of plain figures), the evaluation service that writes the
derived ("auto") rows, the service that sets manual rows, and the summary annotation for lists.

Derived checks: cards enumerated against the inventory (given the bus ids / UUIDs a host reported),
PCIe link width (chassis lanes per slot against each card model's lanes; a mining board's x1 riser is
allowed but flagged as bandwidth-limited), cooling (chassis airflow against each card's minimum).
Manual checks (an admin on the page, or a provisioning script through the API): Above 4G decoding,
Resizable BAR, PCIe AER OS-first (required by the Tenstorrent driver), driver and firmware versions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, Count, IntegerField, Max, OuterRef, QuerySet, Subquery, Value, When
from django.utils.translation import gettext as _

from inventory.choices import CARD_NOT_INSTALLED, CARD_OUT_OF_SERVICE, Airflow, CardStatus, Cooling
from inventory.models import (
    Card,
    Node,
    ReadinessCheck,
    ReadinessKey,
    ReadinessStatus,
)
from inventory.models.devices import normalise_bus_id
from inventory.models.readiness import AUTO_KEYS, MANUAL_KEYS, STATUS_RANK
from portal.services import instance_save

PASS, WARN, FAIL, UNKNOWN = (
    ReadinessStatus.PASS,
    ReadinessStatus.WARN,
    ReadinessStatus.FAIL,
    ReadinessStatus.UNKNOWN,
)
AIRFLOW_ORDER = [Airflow.LIMITED, Airflow.STANDARD, Airflow.HIGH, Airflow.LIQUID]
RANK_TO_STATUS = {rank: status for status, rank in STATUS_RANK.items()}


@dataclass(frozen=True)
class Verdict:
    key: str
    status: str
    detail: str


# -- rules (pure) ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CardFacts:
    slot: str
    model: str
    pcie_lanes: int
    min_airflow: str
    cooling: str
    bus_id: str = ""
    gpu_uuid: str = ""
    vendor: str = ""
    status: str = CardStatus.IN_SERVICE


def rule_link_width(lanes_per_slot: int | None, cards: Sequence[CardFacts]) -> Verdict:
    key = ReadinessKey.LINK_WIDTH
    if not cards:
        return Verdict(key, PASS, _("No cards."))
    if lanes_per_slot is None:
        return Verdict(key, UNKNOWN, _("No chassis model recorded: the slot width is unknown."))
    narrow = [c for c in cards if lanes_per_slot < c.pcie_lanes]
    if not narrow:
        return Verdict(key, PASS, _("Every card gets its full x%(lanes)s.") % {"lanes": cards[0].pcie_lanes})
    slots = ", ".join(f"{c.slot} (x{lanes_per_slot} of x{c.pcie_lanes})" for c in narrow)
    if lanes_per_slot == 1:
        return Verdict(
            key,
            WARN,
            _("Bandwidth-limited: x1 risers (allowed; host transfers are slow): %(s)s.") % {"s": slots},
        )
    return Verdict(key, WARN, _("Narrower slots than the cards: %(s)s.") % {"s": slots})


def rule_cooling(chassis_airflow: str | None, cards: Sequence[CardFacts]) -> Verdict:
    key = ReadinessKey.COOLING
    if not cards:
        return Verdict(key, PASS, _("No cards."))
    if chassis_airflow is None:
        return Verdict(key, UNKNOWN, _("No chassis model recorded: its airflow is unknown."))
    have = AIRFLOW_ORDER.index(Airflow(chassis_airflow))
    liquid = [c for c in cards if c.cooling == Cooling.LIQUID and chassis_airflow != Airflow.LIQUID]
    if liquid:
        return Verdict(
            key,
            FAIL,
            _("Liquid-cooled cards in a chassis without liquid cooling: %(s)s.")
            % {"s": ", ".join(c.slot for c in liquid)},
        )
    short = [c for c in cards if AIRFLOW_ORDER.index(Airflow(c.min_airflow)) > have]
    if short:
        names = ", ".join(f"{c.slot} ({c.model} needs {Airflow(c.min_airflow).label})" for c in short)
        return Verdict(
            key,
            WARN,
            _("Chassis airflow is %(have)s: %(s)s.") % {"have": Airflow(chassis_airflow).label, "s": names},
        )
    return Verdict(key, PASS, _("Chassis airflow suits every card."))


def rule_cards_enumerated(cards: Sequence[CardFacts], seen: Iterable[str] | None) -> Verdict:
    key = ReadinessKey.CARDS_ENUMERATED
    if seen is None:
        return Verdict(key, UNKNOWN, _("No device list reported by the host yet."))
    seen_ids = {
        normalise_bus_id(s) if ":" in s and not s.upper().startswith(("GPU-", "MIG-")) else s.strip()
        for s in seen
        if s and s.strip()
    }
    missing = [c for c in cards if not ({c.bus_id, c.gpu_uuid} - {""}) & seen_ids]
    known = {i for c in cards for i in (c.bus_id, c.gpu_uuid) if i}
    unknown = sorted(seen_ids - known)
    if missing:
        names = ", ".join(f"{c.slot} ({c.bus_id or c.gpu_uuid or _('no id recorded')})" for c in missing)
        return Verdict(
            key,
            FAIL,
            _("%(n)s of %(total)s cards not enumerated: %(s)s.")
            % {"n": len(missing), "total": len(cards), "s": names},
        )
    if unknown:
        return Verdict(
            key,
            WARN,
            _("All %(total)s cards enumerated; devices not in the inventory: %(s)s.")
            % {"total": len(cards), "s": ", ".join(unknown)},
        )
    return Verdict(key, PASS, _("All %(total)s cards enumerated.") % {"total": len(cards)})


def rule_card_lifecycle(cards: Sequence[CardFacts]) -> Verdict:
    """Rejected cards are kept out of service: a node still holding one is not ready (Slurm would hand the
    card to jobs); cards still on their way through burn-in only warn. RMA and retired cards have left the
    machine (``CARD_NOT_INSTALLED``) and are not counted."""
    key = ReadinessKey.CARD_LIFECYCLE
    out = [c for c in cards if c.status in CARD_OUT_OF_SERVICE]
    if out:
        names = ", ".join(f"{c.slot} ({CardStatus(c.status).label})" for c in out)
        return Verdict(
            key,
            FAIL,
            _("Cards kept out of service are still in the node: %(s)s. Remove them before jobs run here.")
            % {"s": names},
        )
    pending = [c for c in cards if c.status in (CardStatus.RECEIVED, CardStatus.BURN_IN)]
    if pending:
        names = ", ".join(f"{c.slot} ({CardStatus(c.status).label})" for c in pending)
        return Verdict(key, WARN, _("Cards not yet accepted: %(s)s.") % {"s": names})
    return Verdict(key, PASS, _("Every card is accepted or in service."))


def evaluate_rules(node: Node, cards: Sequence[CardFacts], seen: Iterable[str] | None) -> list[Verdict]:
    chassis = node.chassis
    return [
        rule_card_lifecycle(cards),
        rule_cards_enumerated(cards, seen),
        rule_link_width(chassis.pcie_lanes_per_slot if chassis is not None else None, cards),
        rule_cooling(chassis.airflow if chassis is not None else None, cards),
    ]


def card_facts(cards: Iterable[Card]) -> list[CardFacts]:
    return [
        CardFacts(
            c.slot,
            str(c.card_model),
            c.card_model.pcie_lanes,
            c.card_model.min_airflow,
            c.card_model.cooling,
            c.pci_bus_id,
            c.gpu_uuid,
            c.card_model.vendor,
            c.status,
        )
        for c in cards
    ]


# -- services ---------------------------------------------------------------------------------------------


def _upsert(node: Node, verdict: Verdict, *, source: str, user: Any) -> ReadinessCheck:
    row = ReadinessCheck.objects.select_for_update().filter(node=node, key=verdict.key).first()
    if row is None:
        row = ReadinessCheck(node=node, key=verdict.key)
    elif row.status == verdict.status and row.detail == verdict.detail and row.source == source:
        return row
    row.status, row.detail, row.source = verdict.status, verdict.detail[:500], source
    row.updated_by = user if getattr(user, "is_authenticated", False) else None
    return instance_save(row, user=user)


@transaction.atomic
def readiness_evaluate(
    node: Node, *, user: Any = None, seen: Iterable[str] | None = None
) -> list[ReadinessCheck]:
    """Compute the derived checks and write them as auto rows (unchanged rows are left alone).

    `seen`: the bus ids / GPU UUIDs the host reported (the telemetry issue passes them); None = not reported,
    which keeps a previous enumeration verdict rather than forgetting it.
    """
    cards = card_facts(
        Card.objects.filter(node=node).exclude(status__in=CARD_NOT_INSTALLED).select_related("card_model")
    )
    rows = []
    for verdict in evaluate_rules(node, cards, seen):
        if (
            verdict.key == ReadinessKey.CARDS_ENUMERATED
            and seen is None
            and ReadinessCheck.objects.filter(node=node, key=verdict.key).exists()
        ):
            continue
        rows.append(_upsert(node, verdict, source=ReadinessCheck.Source.AUTO, user=user))
    aer = ReadinessCheck.objects.filter(node=node, key=ReadinessKey.AER_OS_FIRST).first()
    if not any(c.vendor == "Tenstorrent" for c in cards) and (aer is None or aer.source == "auto"):
        verdict = Verdict(ReadinessKey.AER_OS_FIRST, PASS, _("Not required: no Tenstorrent cards."))
        rows.append(_upsert(node, verdict, source=ReadinessCheck.Source.AUTO, user=user))
    return rows


@transaction.atomic
def readiness_set(
    node: Node,
    *,
    key: str,
    status: str,
    detail: str = "",
    user: Any,
    source: str = ReadinessCheck.Source.MANUAL,
) -> ReadinessCheck:
    """Set one manual check (BIOS switches, driver/firmware versions); derived checks are refused."""
    if key not in ReadinessKey.values:
        raise ValidationError({"key": [_("Unknown check %(key)s.") % {"key": key}]})
    if key in AUTO_KEYS:
        raise ValidationError(
            {"key": [_("%(key)s is derived by Rackpilot; re-evaluate instead.") % {"key": key}]}
        )
    if status not in ReadinessStatus.values:
        raise ValidationError(
            {"status": [_("Status must be one of %(s)s.") % {"s": ", ".join(ReadinessStatus.values)}]}
        )
    if key in (ReadinessKey.DRIVER, ReadinessKey.FIRMWARE) and status == PASS and not detail.strip():
        raise ValidationError({"detail": [_("Record the version in the detail.")]})
    return _upsert(node, Verdict(key, status, detail.strip()), source=source, user=user)


# -- reads ------------------------------------------------------------------------------------------------


def readiness_list(node: Node) -> list[dict[str, Any]]:
    """Every check of the node in a fixed order, with a placeholder for those never recorded."""
    rows = {r.key: r for r in ReadinessCheck.objects.filter(node=node).select_related("updated_by")}
    out = []
    for key in (*MANUAL_KEYS, *AUTO_KEYS):
        row = rows.get(key)
        out.append(
            {
                "key": key.value,
                "label": key.label,
                "manual": key in MANUAL_KEYS,
                "status": row.status if row else UNKNOWN.value,
                # derived checks store their verdict in English: shown in the reader's language
                "detail": _(row.detail) if row and row.detail else "",
                "source": row.source if row else None,
                "updated_by": row.updated_by.username if row and row.updated_by else None,
                "updated_at": row.updated_at if row else None,
            }
        )
    return out


def readiness_summary(statuses: Iterable[str]) -> str:
    """The worst status; a node with nothing recorded is unknown."""
    rank = max((STATUS_RANK[ReadinessStatus(s)] for s in statuses), default=STATUS_RANK[UNKNOWN])
    return RANK_TO_STATUS[rank].value


ALL_KEYS = len(MANUAL_KEYS) + len(AUTO_KEYS)


def with_readiness(qs: QuerySet[Node]) -> QuerySet[Node]:
    """Annotate `readiness_rank` (worst recorded: 0 pass, 1 unknown, 2 warn, 3 fail) and `readiness_count`
    (checks recorded) with two subqueries; `node_readiness(node)` turns them into the summary status."""
    rows = ReadinessCheck.objects.filter(node=OuterRef("pk")).values("node")
    ranked = rows.annotate(
        worst=Max(
            Case(
                *(When(status=s, then=Value(r)) for s, r in STATUS_RANK.items()), output_field=IntegerField()
            )
        )
    ).values("worst")
    counted = rows.annotate(n=Count("id")).values("n")
    return qs.annotate(
        readiness_rank=Subquery(ranked, output_field=IntegerField()),
        readiness_count=Subquery(counted, output_field=IntegerField()),
    )


def rank_status(rank: int | None, count: int | None) -> str:
    """A check never recorded counts as unknown, so a node is only "pass" when all of them pass."""
    worst = rank if rank is not None else STATUS_RANK[UNKNOWN]
    if (count or 0) < ALL_KEYS:
        worst = max(worst, STATUS_RANK[UNKNOWN])
    return RANK_TO_STATUS[worst].value


def node_readiness(node: Node) -> str:
    """The summary of a node annotated by `with_readiness`."""
    return rank_status(getattr(node, "readiness_rank", None), getattr(node, "readiness_count", None))
