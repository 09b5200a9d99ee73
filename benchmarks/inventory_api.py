"""Inventory API and page speed on a large inventory (issue 2).

Loads 1,000 nodes, 8,000 cards, 32,000 ports and 16,000 cables into the database `rackpilot_bench_inventory` (or TEST_DATABASE_NAME)
(once; reused on later runs), then measures server time in-process (Django test client: everything but the
network) and the queries each request issues.

    .venv/bin/python benchmarks/inventory_api.py            # BENCH_DATABASE_URL=postgres://…@host:port
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_args, measure, row, setup_django  # noqa: E402

NODES, CARDS_PER_NODE, PORTS_PER_CARD = 1000, 8, 4


def load() -> None:
    from django.db import transaction

    from inventory.choices import CableKind, PortKind
    from inventory.models import (
        Cable,
        CableTermination,
        Card,
        CardModel,
        Cluster,
        Node,
        Port,
        PortTemplate,
        Rack,
        Site,
    )

    if Node.objects.count() >= NODES:
        return
    print("loading the inventory (once)…", flush=True)
    with transaction.atomic():
        site = Site.objects.create(name="bench")
        cluster = Cluster.objects.create(name="bench")
        racks = Rack.objects.bulk_create(
            Rack(site=site, name=f"r{i}", u_height=42) for i in range(NODES // 40 + 1)
        )
        model = CardModel.objects.create(vendor="Tenstorrent", name="p150a", tdp_w=300)
        for i in range(1, PORTS_PER_CARD + 1):
            PortTemplate.objects.create(
                card_model=model, name=f"QSFP{i}", kind=PortKind.QSFP_DD, speed_gbps=800
            )
        nodes = Node.objects.bulk_create(
            Node(hostname=f"n{i:04d}", cluster=cluster, rack=racks[i // 40], position=1 + i % 40)
            for i in range(NODES)
        )
        cards = Card.objects.bulk_create(
            Card(
                node=n,
                card_model=model,
                slot=str(s),
                pci_bus_id=f"0000:{s + 1:02x}:00.0",
                serial=f"{n.hostname}-{s}",
            )
            for n in nodes
            for s in range(CARDS_PER_NODE)
        )
        ports = Port.objects.bulk_create(
            Port(node_id=c.node_id, card=c, name=f"QSFP{p}", kind=PortKind.QSFP_DD, speed_gbps=800)
            for c in cards
            for p in range(1, PORTS_PER_CARD + 1)
        )
        # a ring per node: card k port 1 <-> card k+1 port 2, and port 3 <-> port 4 of the next card
        pairs = []
        by_card: dict[int, list[Port]] = {}
        for p in ports:
            by_card.setdefault(p.card_id, []).append(p)
        card_ids = [c.pk for c in cards]
        for idx in range(0, len(card_ids), CARDS_PER_NODE):
            group = card_ids[idx : idx + CARDS_PER_NODE]
            for k, cid in enumerate(group):
                nxt = group[(k + 1) % len(group)]
                pairs.append((by_card[cid][0], by_card[nxt][1]))
                pairs.append((by_card[cid][2], by_card[nxt][3]))
        cables = Cable.objects.bulk_create(Cable(kind=CableKind.DAC) for _ in pairs)
        CableTermination.objects.bulk_create(
            t
            for cable, (a, b) in zip(cables, pairs, strict=True)
            for t in (
                CableTermination(cable=cable, end="a", port=a, card_id=a.card_id),
                CableTermination(cable=cable, end="b", port=b, card_id=b.card_id),
            )
        )
    print(
        f"loaded {Node.objects.count()} nodes, {Card.objects.count()} cards, {Port.objects.count()} ports, "
        f"{Cable.objects.count()} cables",
        flush=True,
    )


def main() -> None:
    bench_args(__doc__, "rackpilot_bench_inventory")
    setup_django("rackpilot_bench_inventory")
    load()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.roles import roles_sync

    roles_sync()
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(user)

    def bench(label: str, url: str, runs: int = 15) -> None:
        def get() -> None:
            res = client.get(url)
            assert res.status_code == 200, (url, res.status_code)

        figures = measure(get, runs=runs)
        with CaptureQueriesContext(connection) as ctx:
            get()
        row(label, figures, f"{len(ctx.captured_queries)} queries")

    print("Inventory API, server time in-process (Django test client), PostgreSQL", flush=True)
    bench("GET /api/inventory/nodes/?limit=100", "/api/inventory/nodes/?limit=100")
    bench("GET /api/inventory/nodes/?limit=1000", "/api/inventory/nodes/?limit=1000")
    bench("nodes list page (100 rows)", "/inventory/nodes/?per_page=100")
    bench("GET /api/inventory/cards/?limit=1000", "/api/inventory/cards/?limit=1000")
    bench("GET /api/inventory/ports/?limit=1000", "/api/inventory/ports/?limit=1000")
    bench("GET /api/inventory/cables/?limit=1000", "/api/inventory/cables/?limit=1000")
    bench("GET /api/inventory/cables/?limit=100", "/api/inventory/cables/?limit=100")
    bench("GET /api/inventory/nodes/?limit=1000&brief=1", "/api/inventory/nodes/?limit=1000&brief=1")


if __name__ == "__main__":
    main()
