"""The three clusters of the field guides (shared/seeds), with real figures. Idempotent.

rig-01    - a converted Antminer S9 chassis with 4 Tenstorrent Blackhole p150a cards in the guide's
            6-cable QSFP-DD full mesh, fed by the 1600 W mining supply; a retired Dell R720 is the head node.
h100-pod  - 4 DGX H100 servers (8x H100 SXM 80GB), an InfiniBand switch, a login node and an NFS node.
gb10-desk - two GB10 desk boxes (240 W each).
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from django.db import transaction

from inventory.choices import Airflow, BMCKind, CableKind, Cooling, LeadKind, NodeRole, Phase, PortKind
from inventory.links import P150_QSFP_CHANNELS
from inventory.models import (
    PSU,
    Cable,
    CableTermination,
    Card,
    CardModel,
    ChassisModel,
    Cluster,
    Fabric,
    FabricMember,
    Node,
    Port,
    PortTemplate,
    PowerFeed,
    PowerLead,
    Rack,
    ReadinessCheck,
    Site,
)

UUID_NS = uuid.UUID("6f1c2a9e-1d1b-4c55-9a43-52a1c0ffee00")

# The first guide's port map: A1-B1, A2-C1, B2-D1, C2-D2, A3-D3 (diagonal), B3-C3.
RIG_MESH = [
    ("A", "QSFP1", "B", "QSFP1"),
    ("A", "QSFP2", "C", "QSFP1"),
    ("B", "QSFP2", "D", "QSFP1"),
    ("C", "QSFP2", "D", "QSFP2"),
    ("A", "QSFP3", "D", "QSFP3"),
    ("B", "QSFP3", "C", "QSFP3"),
]
H100_BUS_IDS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def gpu_uuid(hostname: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(UUID_NS, f'{hostname}/{index}')}"


def _upsert(model_cls: type[Any], lookup: dict[str, Any], /, **defaults: Any) -> Any:
    obj, _created = model_cls.objects.update_or_create(**lookup, defaults=defaults)
    return obj


def _card(node: Node, model: CardModel, slot: str, **fields: Any) -> Card:
    card = _upsert(Card, {"node": node, "slot": slot}, card_model=model, **fields)
    for t in model.port_templates.all():
        Port.objects.get_or_create(
            card=card, name=t.name, defaults={"node": node, "kind": t.kind, "speed_gbps": t.speed_gbps}
        )
    return card


def _cable(a: Port, b: Port, **fields: Any) -> Cable:
    term = CableTermination.objects.filter(port=a).select_related("cable").first()
    if term is not None:
        cable = term.cable
        for k, v in fields.items():
            setattr(cable, k, v)
        cable.save()
        return cable
    cable = Cable.objects.create(**fields)
    CableTermination.objects.create(cable=cable, end="a", port=a, card_id=a.card_id)
    CableTermination.objects.create(cable=cable, end="b", port=b, card_id=b.card_id)
    return cable


def card_models() -> dict[str, CardModel]:
    p150a = _upsert(
        CardModel,
        {"vendor": "Tenstorrent", "name": "Blackhole p150a"},
        memory_gb=32,
        memory_type="GDDR6",
        tflops_fp8=Decimal("774"),
        tflops_fp16=Decimal("387"),
        tdp_w=300,
        list_price=Decimal("1400"),
        cooling=Cooling.ACTIVE,
        min_airflow=Airflow.LIMITED,
        power_connector=LeadKind.HPWR_12V,
    )
    p150b = _upsert(
        CardModel,
        {"vendor": "Tenstorrent", "name": "Blackhole p150b"},
        memory_gb=32,
        memory_type="GDDR6",
        tflops_fp8=Decimal("774"),
        tflops_fp16=Decimal("387"),
        tdp_w=300,
        list_price=Decimal("1300"),
        cooling=Cooling.PASSIVE,
        min_airflow=Airflow.HIGH,
        power_connector=LeadKind.HPWR_12V,
    )
    h100 = _upsert(
        CardModel,
        {"vendor": "NVIDIA", "name": "H100 SXM 80GB"},
        memory_gb=80,
        memory_type="HBM3",
        tflops_fp8=Decimal("1979"),
        tflops_fp16=Decimal("989"),
        tflops_fp32=Decimal("67"),
        tdp_w=700,
        list_price=Decimal("30000"),
        cooling=Cooling.PASSIVE,
        min_airflow=Airflow.HIGH,
        power_connector="",
    )
    gb10 = _upsert(
        CardModel,
        {"vendor": "NVIDIA", "name": "GB10"},
        # the Grace Blackwell superchip shares 128 GB of LPDDR5X between its CPU and GPU
        memory_gb=128,
        memory_type="LPDDR5X",  # unified
        tflops_fp16=Decimal("200"),
        tdp_w=240,
        list_price=Decimal("4000"),
        cooling=Cooling.ACTIVE,
        min_airflow=Airflow.STANDARD,
        power_connector=LeadKind.DC_BARREL,
    )
    for model in (p150a, p150b):
        for name, channels in P150_QSFP_CHANNELS.items():
            _upsert(
                PortTemplate,
                {"card_model": model, "name": name},
                kind=PortKind.QSFP_DD,
                speed_gbps=800,
                eth_channels=list(channels),
            )
    return {"p150a": p150a, "p150b": p150b, "h100": h100, "gb10": gb10}


def chassis_models() -> dict[str, ChassisModel]:
    return {
        "s9": _upsert(
            ChassisModel,
            {"manufacturer": "Bitmain", "name": "Antminer S9 (converted)"},
            u_height=4,
            airflow=Airflow.LIMITED,
            base_power_w=60,
            card_slots=4,
            pcie_lanes_per_slot=1,
        ),
        "r720": _upsert(
            ChassisModel,
            {"manufacturer": "Dell", "name": "PowerEdge R720"},
            u_height=2,
            airflow=Airflow.STANDARD,
            base_power_w=350,
            card_slots=2,
            pcie_lanes_per_slot=16,
        ),
        "dgx": _upsert(
            ChassisModel,
            {"manufacturer": "NVIDIA", "name": "DGX H100"},
            u_height=8,
            airflow=Airflow.HIGH,
            base_power_w=4600,
            card_slots=8,
            pcie_lanes_per_slot=16,
        ),
        "qm9700": _upsert(
            ChassisModel,
            {"manufacturer": "NVIDIA", "name": "Quantum-2 QM9700"},
            u_height=1,
            airflow=Airflow.HIGH,
            base_power_w=1720,
        ),
        "r650": _upsert(
            ChassisModel,
            {"manufacturer": "Dell", "name": "PowerEdge R650"},
            u_height=1,
            airflow=Airflow.HIGH,
            base_power_w=450,
        ),
        "r750": _upsert(
            ChassisModel,
            {"manufacturer": "Dell", "name": "PowerEdge R750xd"},
            u_height=2,
            airflow=Airflow.HIGH,
            base_power_w=750,
        ),
        "gb10": _upsert(
            ChassisModel,
            {"manufacturer": "NVIDIA", "name": "GB10 desk box"},
            u_height=1,
            airflow=Airflow.STANDARD,
            base_power_w=0,
            card_slots=1,
        ),
    }


def seed_rig(models: dict[str, CardModel], chassis: dict[str, ChassisModel]) -> Cluster:
    site = _upsert(Site, {"name": "Workshop"}, description="Converted mining space")
    rack = _upsert(
        Rack,
        {"site": site, "name": "open-frame-1"},
        u_height=12,
        description="Open mining frame; limited airflow",
    )
    cluster = _upsert(
        Cluster,
        {"name": "rig-01"},
        site=site,
        backend=Cluster.Backend.SIMULATOR,
        description="4x Tenstorrent Blackhole p150a in a converted Antminer S9, QSFP-DD full mesh",
    )
    feed = _upsert(
        PowerFeed,
        {"site": site, "name": "workshop-c1"},
        rack=rack,
        voltage=230,
        amperage=16,
        phase=Phase.SINGLE,
        max_utilization_pct=80,
    )
    head = _upsert(
        Node,
        {"hostname": "r720"},
        cluster=cluster,
        role=NodeRole.HEAD,
        chassis=chassis["r720"],
        rack=rack,
        position=1,
        u_height=2,
        bmc_kind=BMCKind.IPMI,
        bmc_address="10.0.0.20",
        purchase_cost=Decimal("350"),
        slurm_name="",
    )
    rig = _upsert(
        Node,
        {"hostname": "rig01"},
        cluster=cluster,
        role=NodeRole.COMPUTE,
        chassis=chassis["s9"],
        rack=rack,
        position=4,
        u_height=4,
        slurm_name="rig01",
        purchase_cost=Decimal("150"),
        notes="BIOS: Above 4G decoding on, Resizable BAR on, PCIe AER OS-first",
    )
    head_psu = _upsert(PSU, {"node": head, "name": "PSU1"}, feed=feed, capacity_w=750, efficiency_pct=92)
    _upsert(PowerLead, {"psu": head_psu, "name": "C13"}, kind=LeadKind.C13, node=head)
    psu = _upsert(
        PSU,
        {"node": rig, "name": "APW3++"},
        feed=feed,
        capacity_w=1600,
        efficiency_pct=93,
        model="Bitmain APW3++ 1600 W",
    )
    cards: dict[str, Card] = {}
    for i, letter in enumerate("ABCD"):
        card = _card(
            rig,
            models["p150a"],
            letter,
            serial=f"BH150A-24{i + 1:04d}",
            pci_bus_id=f"0000:0{i + 1}:00.0",
            firmware_version="18.2.0",
        )
        cards[letter] = card
        for j in (1, 2):
            _upsert(
                PowerLead,
                {"psu": psu, "name": f"PCIe 8-pin #{2 * i + j}"},
                kind=LeadKind.PCIE_8PIN,
                card=card,
                wire_gauge_awg=16,
            )
    _upsert(PowerLead, {"psu": psu, "name": "Control board"}, kind=LeadKind.ATX, node=rig)
    for a, ap, b, bp in RIG_MESH:
        _cable(
            Port.objects.get(card=cards[a], name=ap),
            Port.objects.get(card=cards[b], name=bp),
            kind=CableKind.DAC,
            length_m=Decimal("0.5"),
            label=f"{a}{ap[-1]}-{b}{bp[-1]}",
        )
    seed_rig_fabric(cluster, cards)
    seed_rig_readiness(rig)
    seed_site_readiness(cluster)
    return cluster


def seed_pod(models: dict[str, CardModel], chassis: dict[str, ChassisModel]) -> Cluster:
    site = _upsert(Site, {"name": "Hall B"}, description="Colocation hall")
    rack = _upsert(Rack, {"site": site, "name": "B07"}, u_height=42)
    cluster = _upsert(
        Cluster,
        {"name": "h100-pod"},
        site=site,
        backend=Cluster.Backend.SIMULATOR,
        description="4x DGX H100 on InfiniBand NDR, Slurm, NFS",
    )
    feeds = [
        _upsert(
            PowerFeed,
            {"site": site, "name": f"B07-{side}"},
            rack=rack,
            voltage=400,
            amperage=63,
            phase=Phase.THREE,
            max_utilization_pct=80,
        )
        for side in ("A", "B")
    ]
    switch = _upsert(
        Node,
        {"hostname": "ib-sw01"},
        cluster=cluster,
        role=NodeRole.SWITCH,
        chassis=chassis["qm9700"],
        rack=rack,
        position=42,
        u_height=1,
        purchase_cost=Decimal("28000"),
    )
    login = _upsert(
        Node,
        {"hostname": "login01"},
        cluster=cluster,
        role=NodeRole.LOGIN,
        chassis=chassis["r650"],
        rack=rack,
        position=41,
        u_height=1,
        bmc_kind=BMCKind.REDFISH,
        bmc_address="10.1.0.41",
        purchase_cost=Decimal("9000"),
    )
    nfs = _upsert(
        Node,
        {"hostname": "nfs01"},
        cluster=cluster,
        role=NodeRole.STORAGE,
        chassis=chassis["r750"],
        rack=rack,
        position=38,
        u_height=2,
        bmc_kind=BMCKind.REDFISH,
        bmc_address="10.1.0.38",
        purchase_cost=Decimal("15000"),
    )
    for n, node in enumerate((switch, login, nfs)):
        for k, feed in enumerate(feeds):
            psu = _upsert(
                PSU,
                {"node": node, "name": f"PSU{k + 1}"},
                feed=feed,
                capacity_w=2000 if node is switch else 1400,
                redundant=True,
            )
            _upsert(PowerLead, {"psu": psu, "name": "C13"}, kind=LeadKind.C13, node=node)
        _ = n
    for i in range(1, 5):
        host = f"gpu{i:02d}"
        node = _upsert(
            Node,
            {"hostname": host},
            cluster=cluster,
            role=NodeRole.COMPUTE,
            chassis=chassis["dgx"],
            rack=rack,
            position=1 + (i - 1) * 8,
            u_height=8,
            slurm_name=host,
            bmc_kind=BMCKind.REDFISH,
            bmc_address=f"10.1.0.{10 + i}",
            purchase_cost=Decimal("300000"),
        )
        for g, bus in enumerate(H100_BUS_IDS):
            _card(
                node,
                models["h100"],
                str(g),
                serial=f"1654023{i:02d}{g:04d}",
                pci_bus_id=f"0000:{bus}:00.0",
                gpu_uuid=gpu_uuid(host, g),
                driver_version="550.54.15",
                firmware_version="96.00.61.00.01",  # the VBIOS nvidia-smi reports
            )
        for k in range(6):
            psu = _upsert(
                PSU,
                {"node": node, "name": f"PSU{k + 1}"},
                feed=feeds[k % 2],
                capacity_w=3300,
                redundant=True,
                efficiency_pct=94,
            )
            _upsert(PowerLead, {"psu": psu, "name": "C19"}, kind=LeadKind.C19, node=node)
        _dgx_ports(node, switch, i)
    for name in ("ib0",):
        for node in (login, nfs):
            nic, _c = Port.objects.get_or_create(
                node=node, card=None, name=name, defaults={"kind": PortKind.INFINIBAND, "speed_gbps": 400}
            )
            sw_port, _c = Port.objects.get_or_create(
                node=switch,
                card=None,
                name=f"p{33 if node is login else 34}",
                defaults={"kind": PortKind.INFINIBAND, "speed_gbps": 400},
            )
            _cable(
                nic, sw_port, kind=CableKind.INFINIBAND, length_m=Decimal("2"), label=f"{node.hostname}-ib"
            )
    seed_pod_fabric(cluster)
    seed_site_readiness(cluster)
    return cluster


def _dgx_ports(node: Node, switch: Node, index: int) -> None:
    """A DGX H100's network as shipped: eight single-port ConnectX-7 (400G NDR, one per GPU, behind four
    twin-port OSFP cages) cabled to the InfiniBand switch, two dual-port ConnectX-7 (QSFP112, 400G) for
    storage, a 10GbE management port and the BMC's RJ45 port."""
    for k in range(8):
        nic, _c = Port.objects.get_or_create(
            node=node, card=None, name=f"ib{k}", defaults={"kind": PortKind.INFINIBAND, "speed_gbps": 400}
        )
        sw_port, _c = Port.objects.get_or_create(
            node=switch,
            card=None,
            name=f"p{(index - 1) * 8 + k + 1}",
            defaults={"kind": PortKind.INFINIBAND, "speed_gbps": 400},
        )
        _cable(nic, sw_port, kind=CableKind.INFINIBAND, length_m=Decimal("3"), label=f"{node.hostname}-ib{k}")
    for k in range(4):
        Port.objects.get_or_create(
            node=node, card=None, name=f"storage{k}", defaults={"kind": PortKind.QSFP56, "speed_gbps": 400}
        )
    for name, speed in (("mgmt0", 10), ("bmc", 1)):
        Port.objects.get_or_create(
            node=node, card=None, name=name, defaults={"kind": PortKind.ETHERNET, "speed_gbps": speed}
        )


def seed_desk(models: dict[str, CardModel], chassis: dict[str, ChassisModel]) -> Cluster:
    site = _upsert(Site, {"name": "Office"}, description="Desk-side boxes")
    cluster = _upsert(
        Cluster,
        {"name": "gb10-desk"},
        site=site,
        backend=Cluster.Backend.SIMULATOR,
        description="Two GB10 desk boxes",
    )
    feed = _upsert(
        PowerFeed,
        {"site": site, "name": "office-socket"},
        voltage=230,
        amperage=10,
        phase=Phase.SINGLE,
        max_utilization_pct=80,
    )
    for i, letter in enumerate("ab"):
        host = f"gb10-{letter}"
        node = _upsert(
            Node,
            {"hostname": host},
            cluster=cluster,
            role=NodeRole.COMPUTE,
            chassis=chassis["gb10"],
            slurm_name=host,
            purchase_cost=Decimal("4000"),
        )
        card = _card(
            node,
            models["gb10"],
            "0",
            serial=f"GB10-00{i + 1}",
            pci_bus_id="000f:01:00.0",
            gpu_uuid=gpu_uuid(host, 0),
            driver_version="580.95.05",
            firmware_version="DGX OS 7 (SoC firmware bundle)",
        )
        psu = _upsert(PSU, {"node": node, "name": "adapter"}, feed=feed, capacity_w=240, efficiency_pct=90)
        _upsert(PowerLead, {"psu": psu, "name": "USB-C PD"}, kind=LeadKind.DC_BARREL, card=card)
    seed_site_readiness(cluster)
    return cluster


def _fabric(
    name: str,
    cluster: Cluster,
    template: str,
    members: list[tuple[str, str, Card | None, Node | None]],
    **fields: Any,
) -> Fabric:
    fabric = _upsert(Fabric, {"name": name}, cluster=cluster, template=template, **fields)
    for position, (label, role, card, node) in enumerate(members):
        _upsert(
            FabricMember,
            {"fabric": fabric, "position": position},
            label=label,
            role=role,
            card=card,
            node=node,
        )
    FabricMember.objects.filter(fabric=fabric, position__gte=len(members)).delete()
    return fabric


def seed_rig_fabric(cluster: Cluster, cards: dict[str, Card]) -> Fabric:
    """rig-01's QSFP-DD full mesh, checked against the guide's port map."""
    return _fabric(
        "rig-01-mesh",
        cluster,
        "mesh4",
        [(k, "card", cards[k], None) for k in "ABCD"],
        description="The first guide's 6-cable full mesh",
    )


def seed_rig_readiness(rig: Node) -> None:
    """The BIOS switches the rig's notes record, the cards' firmware, and the derived checks."""
    from inventory.readiness import readiness_evaluate

    manual = [
        ("above_4g_decoding", "pass", "Enabled (per the rig's notes)"),
        ("resizable_bar", "pass", "Enabled (per the rig's notes)"),
        ("pcie_aer_os_first", "pass", "OS First (required by the Tenstorrent driver)"),
        ("firmware_version", "pass", "18.2.0 on all four cards"),
        ("driver_version", "unknown", "tt-kmd version not recorded yet"),
    ]
    for key, status, detail in manual:
        _upsert(ReadinessCheck, {"node": rig, "key": key}, status=status, detail=detail, source="manual")
    readiness_evaluate(rig)


def seed_site_readiness(cluster: Cluster) -> None:
    """What a site records at install for every node: the BIOS switches (vendor defaults on a DGX; not
    applicable to a GB10's integrated GPU or a host without accelerators) and the driver/firmware found
    on the cards; then the derived checks."""
    from inventory.readiness import readiness_evaluate

    for node in Node.objects.filter(cluster=cluster).prefetch_related("cards__card_model"):
        if ReadinessCheck.objects.filter(node=node, source="manual").exists():
            continue  # recorded already (the rig's own notes, or an earlier seed)
        cards = list(node.cards.all())
        drivers = sorted({c.driver_version for c in cards if c.driver_version})
        firmware = sorted({c.firmware_version for c in cards if c.firmware_version})
        integrated = bool(cards) and all(c.card_model.name.endswith("GB10") for c in cards)
        if not cards:
            bios = "Not applicable: no accelerator cards"
        elif integrated:
            bios = "Not applicable: integrated GPU (no PCIe BAR)"
        else:
            bios = "Enabled (vendor BIOS default, checked at install)"
        manual = [
            ("above_4g_decoding", "pass", bios),
            ("resizable_bar", "pass", bios),
            ("pcie_aer_os_first", "pass", bios if not cards or integrated else "OS First (vendor default)"),
            (
                "driver_version",
                "pass" if drivers or not cards else "unknown",
                ", ".join(drivers)
                if drivers
                else ("Not applicable: no accelerator cards" if not cards else ""),
            ),
            (
                "firmware_version",
                "pass" if firmware or not cards else "unknown",
                ", ".join(firmware)
                if firmware
                else ("Not applicable: no accelerator cards" if not cards else "not recorded yet"),
            ),
        ]
        for key, status, detail in manual:
            _upsert(ReadinessCheck, {"node": node, "key": key}, status=status, detail=detail, source="manual")
        readiness_evaluate(node)


def seed_pod_fabric(cluster: Cluster) -> Fabric:
    """h100-pod's InfiniBand star: every host on ib-sw01."""
    nodes = {n.hostname: n for n in Node.objects.filter(cluster=cluster)}
    hosts = ["gpu01", "gpu02", "gpu03", "gpu04", "login01", "nfs01"]
    members: list[tuple[str, str, Card | None, Node | None]] = [("ib-sw01", "switch", None, nodes["ib-sw01"])]
    members += [(h, "host", None, nodes[h]) for h in hosts]
    return _fabric(
        "h100-pod-ib",
        cluster,
        "star",
        members,
        params={"oversubscription": 1, "host_links": {f"gpu{i:02d}": 8 for i in range(1, 5)}},
        description="InfiniBand NDR star around the QM9700 (eight compute rails per DGX)",
    )


@transaction.atomic
def seed_demo() -> list[Cluster]:
    models = card_models()
    chassis = chassis_models()
    return [seed_rig(models, chassis), seed_pod(models, chassis), seed_desk(models, chassis)]
