"""Which cable a link event lands on: the one place that decides it.

An event names its node and card, and what the tool said of the link: a port name (``QSFP2``), an
Ethernet channel (tt-smi's ``port=8``), an interface or a module number. In that order of trust:

1. the event names a port of its card (or node), or a channel its card model wires to a port
   (:func:`inventory.links.port_keys`), that a cable ends on: that cable;
2. two cards that a cable joins both report a link event within :data:`PAIR_WINDOW`: that cable
   (a flap shows on both ends: a kernel line without a channel or port still finds its cable);
3. the card has a single cable: that cable.

Otherwise the event stays on its card (the report names the card, not a cable).
"""

from __future__ import annotations

import datetime as dt
from bisect import bisect_left
from dataclasses import replace

from inventory.links import port_keys
from inventory.models import CableTermination
from jobs.report.findings import LINK_KINDS, CableRef, EventFact

PAIR_WINDOW = dt.timedelta(seconds=60)


def _end_label(term: CableTermination) -> str:
    port = term.port
    card = port.card
    owner = f"{card.node.hostname}/{card.slot}" if card is not None else port.node.hostname
    return f"{owner} {port.name}"


class CableIndex:
    """The cables ending on a set of cards, indexed for :meth:`resolve`."""

    def __init__(self, terminations: list[CableTermination]) -> None:
        by_cable: dict[int, list[CableTermination]] = {}
        for t in terminations:
            by_cable.setdefault(t.cable_id, []).append(t)
        self.refs: dict[int, CableRef] = {}
        cable_of_port = {t.port_id: t.cable_id for t in terminations}
        #: (node id, card id, what a report calls the port) -> cable
        self.by_port = {key: cable_of_port[port] for key, port in port_keys(cable_of_port).items()}
        self.by_card: dict[int, set[int]] = {}
        self.cards_of: dict[int, frozenset[int]] = {}
        for cable_id, terms in by_cable.items():
            terms.sort(key=lambda t: t.end)
            cable = terms[0].cable
            ends = [_end_label(t) for t in terms]
            self.refs[cable_id] = CableRef(
                id=cable_id, label=str(cable), a_end=ends[0], b_end=ends[1] if len(ends) > 1 else "—"
            )
            for t in terms:
                if t.port.card_id:
                    self.by_card.setdefault(t.port.card_id, set()).add(cable_id)
            self.cards_of[cable_id] = frozenset(t.port.card_id for t in terms if t.port.card_id)

    def _named_port(self, e: EventFact) -> int | None:
        names = []
        labels = str(e.data.get("labels") or "")
        for pair in labels.split(","):
            k, _sep, v = pair.partition("=")
            if k == "port" and v:
                names.append(v)
        for key in ("port", "interface"):
            if isinstance(e.data.get(key), str):
                names.append(str(e.data[key]))
        for name in names:
            cable = self.by_port.get((e.node_id, e.card_id, name.strip().lower()))
            if cable is not None:
                return cable
        return None

    def resolve(self, events: list[EventFact]) -> list[EventFact]:
        """The events, each link event with the cable it lands on where one can be told."""
        times: dict[int, list[dt.datetime]] = {}  # card id -> its link events' times, in order
        for e in events:
            if e.kind in LINK_KINDS and e.card_id is not None:
                times.setdefault(e.card_id, []).append(e.ts)
        for ts in times.values():
            ts.sort()
        out = []
        for e in events:
            cable = None
            if e.kind in LINK_KINDS:
                cable = self._named_port(e)
                if cable is None and e.card_id is not None:
                    cable = self._paired(e, times) or self._only(e.card_id)
            out.append(replace(e, cable=self.refs[cable]) if cable is not None else e)
        return out

    def _paired(self, e: EventFact, times: dict[int, list[dt.datetime]]) -> int | None:
        """The one cable of ``e``'s card whose other end saw a link event within PAIR_WINDOW."""
        joint = []
        for cable in self.by_card.get(e.card_id or 0, set()):
            for other in self.cards_of[cable] - {e.card_id}:
                seen = times.get(other, [])
                i = bisect_left(seen, e.ts - PAIR_WINDOW)
                if i < len(seen) and seen[i] <= e.ts + PAIR_WINDOW:
                    joint.append(cable)
        return joint[0] if len(joint) == 1 else None

    def _only(self, card_id: int) -> int | None:
        mine = self.by_card.get(card_id, set())
        return next(iter(mine)) if len(mine) == 1 else None
