"""The incident timeline of one node over 7 days (target: < 200 ms).

    .venv/bin/python benchmarks/timeline.py [--runs 20]

Uses its own database (rackpilot_bench_timeline or TEST_DATABASE_NAME, created and migrated if
missing) and fills it once: 32 nodes of 8 cards, 20,000 jobs (2,500 of them on the measured node,
3 Slurm transitions each), 50,000 telemetry events (20,000 on the node: AER, link, Xid), 600 node
transitions, 400 actions, 1,000 alerts firing and resolved, readiness changes in the audit log, all
spread over the last 7 days.

Prints median / p95 server time of ``timeline_list`` for the node (every source), of the page
(``GET /jobs/timeline/node/{id}/``) and of the API (``GET /api/inventory/nodes/{id}/timeline/``) through
the Django test client, with the query count, and as an in-run baseline one indexed read of the
node's newest 500 events.
"""

from __future__ import annotations

import datetime as dt
import random

from common import bench_db_name, bench_parser, measure, row, setup_django

NODES, CARDS, JOBS, EVENTS = 32, 8, 20_000, 50_000


def fill() -> int:
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from inventory.models import Card, CardModel, Cluster, Node
    from inventory.readiness import readiness_set
    from jobs.models import Action, Job, JobTransition, NodeTransition
    from monitoring.models import Alert, AlertRule, Event
    from portal.roles import roles_sync, user_set_role

    roles_sync()
    cluster, _ = Cluster.objects.get_or_create(name="bench-timeline", defaults={"backend": "simulator"})
    admin, created = User.objects.get_or_create(username="bench-admin")
    if created:
        user_set_role(admin, "admin")
    done = Node.objects.filter(cluster=cluster, hostname="tl000").first()
    if done is not None and Job.objects.filter(cluster=cluster).exists():
        return done.pk
    now = dt.datetime.now(dt.UTC)
    week = 7 * 86400
    rng = random.Random(3)

    def when() -> dt.datetime:
        return now - dt.timedelta(seconds=rng.uniform(0, week))

    model, _ = CardModel.objects.get_or_create(vendor="NVIDIA", name="H100 SXM 80GB", defaults={"tdp_w": 700})
    rule, _ = AlertRule.objects.get_or_create(
        name="bench: temperature",
        defaults={"metric": "temperature_c", "threshold": 85, "severity": "warning"},
    )
    with transaction.atomic():
        nodes = Node.objects.bulk_create(
            Node(hostname=f"tl{i:03d}", slurm_name=f"tl{i:03d}", cluster=cluster) for i in range(NODES)
        )
        cards = Card.objects.bulk_create(
            Card(node=n, card_model=model, slot=str(g), pci_bus_id=f"0000:{0x18 + g:02x}:00.0")
            for n in nodes
            for g in range(CARDS)
        )
        target = nodes[0]
        jobs = []
        for j in range(JOBS):
            node = target if j % 8 == 0 else nodes[1 + j % (NODES - 1)]
            start = when()
            jobs.append(
                Job(cluster=cluster, job_id=j + 1, name=f"train-{j}", user="bench", owner=admin, state="COMPLETED",
                    nodes=node.slurm_name, node_names=f",{node.slurm_name},", node_count=1, gpus=8,
                    start_time=start, end_time=start + dt.timedelta(minutes=30))
            )  # fmt: skip
        jobs = Job.objects.bulk_create(jobs, batch_size=5000)
        JobTransition.objects.bulk_create(
            (JobTransition(job=j, from_state=a, to_state=b, at=j.start_time + dt.timedelta(minutes=m))
             for j in jobs for a, b, m in (("", "PENDING", -1), ("PENDING", "RUNNING", 0), ("RUNNING", "COMPLETED", 30))),
            batch_size=5000,
        )  # fmt: skip
        kinds = ("pcie_aer", "link_down", "link_up", "xid", "link_retrain")
        Event.objects.bulk_create(
            (Event(ts=when(), node_id=c.node_id, card=c, card_ref=c.pci_bus_id, kind=(k := kinds[i % 5]),
                   severity="warning", message=f"{k} on {c.pci_bus_id}", data={})
             for i, c in enumerate(cards[:CARDS] * (20_000 // CARDS) + rng.choices(cards[CARDS:], k=EVENTS - 20_000))),
            batch_size=5000,
        )  # fmt: skip
        NodeTransition.objects.bulk_create(
            NodeTransition(
                node=nodes[i % 2], from_state="idle", to_state="alloc" if i % 3 else "down", at=when()
            )
            for i in range(600)
        )
        Action.objects.bulk_create(
            Action(kind="drain", cluster=cluster, node=nodes[i % 2], params={"target": nodes[i % 2].slurm_name,
                   "reason": "bench"}, status="succeeded", requested_by=admin, finished=now)
            for i in range(400)
        )  # fmt: skip
        Alert.objects.bulk_create(
            Alert(rule=rule, target=f"card:{i}", node_id=cards[i % (2 * CARDS)].node_id, card=cards[i % (2 * CARDS)],
                  status="resolved", severity="warning", started_at=(t := when()),
                  resolved_at=t + dt.timedelta(minutes=5), message="hot")
            for i in range(1000)
        )  # fmt: skip
        for k, status in enumerate(("fail", "pass", "warn", "pass") * 5):
            readiness_set(target, key="above_4g_decoding", status=status, detail=f"change {k}", user=admin)
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    return target.pk


def main() -> None:
    parser = bench_parser(__doc__, "rackpilot_bench_timeline")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    setup_django(bench_db_name("rackpilot_bench_timeline"))
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from inventory.models import Node
    from jobs.report import timeline as tl
    from monitoring.models import Event

    pk = fill()
    node = Node.objects.get(pk=pk)
    admin = User.objects.get(username="bench-admin")
    scope = tl.scope_for("node", node)
    entries = tl.timeline_list(scope, user=admin)
    by_source = {s: sum(1 for e in entries if e.source == s) for s in tl.SOURCES}
    print(f"node {node.hostname}, 7 days: {len(entries)} entries shown ({by_source}); "
          f"{Event.objects.filter(node=node).count()} events stored on it")  # fmt: skip
    with CaptureQueriesContext(connection) as q:
        tl.timeline_list(tl.scope_for("node", node), user=admin)

    def baseline() -> None:
        list(Event.objects.filter(node=node).order_by("-ts").values_list("ts", "kind", "message")[:500])

    row("baseline: the node's newest 500 events", measure(baseline, runs=args.runs))
    row("timeline_list (node, 7 days, every source)",
        measure(lambda: tl.timeline_list(tl.scope_for("node", node), user=admin), runs=args.runs),
        f"{len(q.captured_queries)} queries")  # fmt: skip
    client = Client()
    client.force_login(admin)
    for label, url in (("GET /jobs/timeline/node/{id}/ (page)", f"/jobs/timeline/node/{pk}/"),
                       ("GET /api/inventory/nodes/{id}/timeline/ (API)", f"/api/inventory/nodes/{pk}/timeline/")):  # fmt: skip
        assert client.get(url).status_code == 200
        row(label, measure(lambda url=url: client.get(url), runs=args.runs))


if __name__ == "__main__":
    main()
