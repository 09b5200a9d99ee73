"""Inventory API and page speed on a large inventory (issue 2).

Loads 1,000 nodes, 8,000 cards, 32,000 ports and 16,000 cables into the database `rackpilot_bench_inventory`
(once; reused on later runs), then measures server time in-process (Django test client: everything but the
network) and the queries each request issues. TEST_DATABASE_NAME overrides the database name.

    .venv/bin/python benchmarks/inventory_api.py            # BENCH_DATABASE_URL=postgres://…@host:port
    .venv/bin/python benchmarks/inventory_api.py --scale 10 # also 10x the inventory, in its own database,
                                                            # and the ratio of each list's time to 1x
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_db_name, bench_parser, measure, row, setup_django  # noqa: E402

NODES, CARDS_PER_NODE, PORTS_PER_CARD = 1000, 8, 4


def load(scale: int = 1) -> None:
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

    nodes_wanted = NODES * scale
    if Node.objects.count() >= nodes_wanted:
        return
    print("loading the inventory (once)…", flush=True)
    with transaction.atomic():
        site = Site.objects.create(name="bench")
        cluster = Cluster.objects.create(name="bench")
        racks = Rack.objects.bulk_create(
            Rack(site=site, name=f"r{i}", u_height=42) for i in range(nodes_wanted // 40 + 1)
        )
        model = CardModel.objects.create(vendor="Tenstorrent", name="p150a", tdp_w=300)
        for i in range(1, PORTS_PER_CARD + 1):
            PortTemplate.objects.create(
                card_model=model, name=f"QSFP{i}", kind=PortKind.QSFP_DD, speed_gbps=800
            )
        nodes = Node.objects.bulk_create(
            Node(hostname=f"n{i:05d}", cluster=cluster, rack=racks[i // 40], position=1 + i % 40)
            for i in range(nodes_wanted)
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


# the lists whose cost must not grow with the inventory (issue 18): compared at 1x and at --scale
SCALED = ("GET /api/inventory/nodes/?limit=100", "nodes list page (100 rows)")


def run(scale: int, only_scaled: bool) -> dict[str, dict[str, float]]:
    setup_django(bench_db_name("rackpilot_bench_inventory") + (f"_x{scale}" if scale > 1 else ""))
    load(scale)
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.roles import roles_sync

    roles_sync()
    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(user)
    out: dict[str, dict[str, float]] = {}

    def bench(label: str, url: str, runs: int = 15) -> None:
        if only_scaled and label not in SCALED:
            return

        def get() -> None:
            res = client.get(url)
            assert res.status_code == 200, (url, res.status_code)

        figures = measure(get, runs=runs)
        with CaptureQueriesContext(connection) as ctx:
            get()
        out[label] = {**figures, "queries": len(ctx.captured_queries)}
        if not only_scaled:
            row(label, figures, f"{len(ctx.captured_queries)} queries")

    if not only_scaled:
        print("Inventory API, server time in-process (Django test client), PostgreSQL", flush=True)
    bench("GET /api/inventory/nodes/?limit=100", "/api/inventory/nodes/?limit=100")
    bench("GET /api/inventory/nodes/?limit=1000", "/api/inventory/nodes/?limit=1000")
    bench("nodes list page (100 rows)", "/inventory/nodes/?per_page=100")
    bench("GET /api/inventory/cards/?limit=1000", "/api/inventory/cards/?limit=1000")
    bench("GET /api/inventory/ports/?limit=1000", "/api/inventory/ports/?limit=1000")
    bench("GET /api/inventory/cables/?limit=1000", "/api/inventory/cables/?limit=1000")
    bench("GET /api/inventory/cables/?limit=100", "/api/inventory/cables/?limit=100")
    bench("GET /api/inventory/nodes/?limit=1000&brief=1", "/api/inventory/nodes/?limit=1000&brief=1")
    return out


def main() -> None:
    parser = bench_parser(__doc__, "rackpilot_bench_inventory")
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        help="also measure the 100-row lists at this multiple of the inventory",
    )
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)  # one scale, JSON out
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run(args.child, only_scaled=True)), flush=True)
        return
    base = run(1, only_scaled=False)
    if args.scale <= 1:
        return
    print(f"\nthe same lists at {args.scale}x the inventory (its own database; loaded once)", flush=True)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(args.scale)], capture_output=True, text=True, check=True
    )
    for line in proc.stdout.splitlines():
        if not line.startswith("RESULT "):
            print(line, flush=True)
            continue
        scaled = json.loads(line.removeprefix("RESULT "))
        for label in SCALED:
            one, big = base[label], scaled[label]
            row(
                f"{label} @{args.scale}x",
                big,
                f"{int(big['queries'])} queries; {big['median_ms'] / one['median_ms']:.2f}x the 1x median",
            )


if __name__ == "__main__":
    main()
