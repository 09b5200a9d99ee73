"""Fabric check speed on 512-card fabrics (issue 3).

Builds, in the database `rackpilot_bench_topology` (or TEST_DATABASE_NAME; rebuilt each run), a 512-card ring and a 16 × 32 grid
(the 2×4 Blackhole layout tiled), cables them with the plan service, then times:
- the pure check alone (plain data in, findings out),
- the whole check from the database (3 queries + check),
- the API endpoint in-process,
for a clean fabric and for one with a cable removed (which takes the slower exact-diameter path).

Run: .venv/bin/python benchmarks/topology_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import bench_args, bench_db_name, measure, row, setup_django  # noqa: E402

N = 512


def build(name: str, template: str, params: dict) -> object:
    from inventory.models import Card, CardModel, Fabric, Node, Port, PortTemplate
    from inventory.topology.services import MemberInput, fabric_plan_create, fabric_save

    model, _ = CardModel.objects.get_or_create(
        vendor="Tenstorrent", name="p150a-bench", defaults={"tdp_w": 300}
    )
    if not model.port_templates.exists():
        PortTemplate.objects.bulk_create(
            PortTemplate(card_model=model, name=f"QSFP{i}", kind="qsfp-dd", speed_gbps=800)
            for i in range(1, 5)
        )
    nodes = Node.objects.bulk_create(Node(hostname=f"{name}-{i:03d}") for i in range(N // 4))
    cards = Card.objects.bulk_create(
        Card(node=nodes[i // 4], card_model=model, slot=str(i % 4)) for i in range(N)
    )
    Port.objects.bulk_create(
        Port(node_id=c.node_id, card=c, name=f"QSFP{k}", kind="qsfp-dd", speed_gbps=800)
        for c in cards
        for k in range(1, 5)
    )
    fabric = fabric_save(
        Fabric(name=name, template=template, params=params),
        user=None,
        members=[MemberInput(card=c) for c in cards],
    )
    cables = fabric_plan_create(fabric, user=None)
    print(f"built {name}: {N} cards, {len(cables)} cables", flush=True)
    return fabric


def main() -> None:
    bench_args(__doc__, "rackpilot_bench_topology")
    setup_django(bench_db_name("rackpilot_bench_topology"))
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from inventory.models import Cable, Fabric, Node
    from inventory.topology.check import check
    from inventory.topology.data import fabric_check, fabric_data

    Cable.objects.all().delete()
    Fabric.objects.all().delete()
    Node.objects.filter(hostname__startswith="bench-").delete()
    admin, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True, "is_staff": True})
    client = Client()
    client.force_login(admin)
    fabrics = [build("bench-ring", "ring", {}), build("bench-grid", "bh-2x4", {"rows": 16, "cols": 32})]
    for fabric in fabrics:
        data = fabric_data(fabric)
        with CaptureQueriesContext(connection) as q:
            _d, result = fabric_check(fabric)
        label = f"{fabric.name} ({len(data.cables)} cables)"
        assert result.findings == [], result.findings[:3]
        row(
            f"{label}: pure check",
            measure(lambda d=data: check(d), runs=21),
            f"max hops {result.max_hops} (promised {result.promised_max_hops})",
        )
        row(f"{label}: DB + check", measure(lambda f=fabric: fabric_check(f), runs=21), f"{len(q)} queries")
        row(
            f"{label}: API /check/",
            measure(lambda f=fabric: client.get(f"/api/inventory/fabrics/{f.pk}/check/"), runs=11),
        )
        Cable.objects.filter(pk=data.cables[0].id).delete()
        broken = fabric_data(fabric)
        res = check(broken)
        row(
            f"{label}: pure check, one cable missing",
            measure(lambda d=broken: check(d), runs=11),
            f"max hops {res.max_hops}, {len(res.findings)} findings",
        )


if __name__ == "__main__":
    main()
