"""Where a link report lands: a card's Ethernet channel (tt-smi, the kernel) or port name -> Port -> Cable.

Telemetry names links by what the reporting tool knows: tt-smi and tt-umd number a Tenstorrent card's
Ethernet channels (``eth channel 8 ... link DOWN``, one ``ETH_LIVE_STATUS`` bit per channel), a NIC
agent names its port (``ib0``, ``QSFP1``). The inventory names ports. A card model's port templates
carry the channels wired to each port (``PortTemplate.eth_channels``), so both kinds of report land
on the port, and through its termination on the cable.

Blackhole p150a / p150b default (ASSUMPTION: Tenstorrent does not publish the channel -> QSFP-DD cage
map): each 800G QSFP-DD cage carries two 400G Ethernet channels, QSFP1 = channels 0-1, QSFP2 = 2-3,
QSFP3 = 4-5, QSFP4 = 6-7; the other cores are not on a cage. Edit a model's port templates (API
``/api/inventory/port-templates/``, admin) where a card's board wires them otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable

from inventory.models import Cable, CableTermination, Port, PortTemplate

#: the Blackhole p150 default above: port template name -> Ethernet channels
P150_QSFP_CHANNELS: dict[str, tuple[int, ...]] = {
    "QSFP1": (0, 1),
    "QSFP2": (2, 3),
    "QSFP3": (4, 5),
    "QSFP4": (6, 7),
}

#: (node id, card id or None, what a report calls the port, lower case) -> port id
PortKeys = dict[tuple[int, int | None, str], int]


def port_keys(port_ids: Iterable[int]) -> PortKeys:
    """Every name a link report may use for each of ``port_ids``: the port's own name and, for a
    card's port, the Ethernet channels its model wires to it (``"0"``, ``"1"``)."""
    rows = list(
        Port.objects.filter(pk__in=list(port_ids)).values_list(
            "pk", "node_id", "card_id", "card__card_model_id", "name"
        )
    )
    models = {model_id for *_rest, model_id, _name in rows if model_id is not None}
    channels: dict[tuple[int, str], list[int]] = {
        (model_id, name.lower()): list(chs or ())
        for model_id, name, chs in PortTemplate.objects.filter(card_model_id__in=models).values_list(
            "card_model_id", "name", "eth_channels"
        )
    }
    keys: PortKeys = {}
    for pk, node_id, card_id, model_id, name in rows:
        keys[(node_id, card_id, name.lower())] = pk
        for channel in channels.get((model_id, name.lower()), ()) if model_id is not None else ():
            keys.setdefault((node_id, card_id, str(channel)), pk)
    return keys


def port_for_link(node_id: int, card_id: int | None, label: str | int) -> Port | None:
    """The port a link report names: ``label`` is a port name or, on a card, an Ethernet channel."""
    on = {"card_id": card_id} if card_id is not None else {"card__isnull": True}
    ports = Port.objects.filter(node_id=node_id, **on).values_list("pk", flat=True)
    pk = port_keys(ports).get((node_id, card_id, str(label).strip().lower()))
    return Port.objects.select_related("node", "card").get(pk=pk) if pk is not None else None


def cable_for_port(port_id: int) -> Cable | None:
    term = CableTermination.objects.filter(port_id=port_id).select_related("cable").first()
    return term.cable if term is not None else None


def cable_for_link(node_id: int, card_id: int | None, label: str | int) -> Cable | None:
    """The cable on the port a link report names (None when the port is unknown or not cabled)."""
    port = port_for_link(node_id, card_id, label)
    return cable_for_port(port.pk) if port is not None else None
