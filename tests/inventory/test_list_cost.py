"""Lists cost what their page holds, not what the inventory holds: no aggregate over every node's cards
before LIMIT, and a count that reads only the listed table (benchmarks/inventory_api.py --scale 10)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def _node_queries(client: Any, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        res = client.get(url)
    assert res.status_code == 200
    return [q["sql"] for q in ctx.captured_queries if 'FROM "inventory_node"' in q["sql"]]


@pytest.mark.parametrize("url", ["/api/inventory/nodes/?limit=2", "/inventory/nodes/?per_page=2"])
def test_node_lists_count_cards_per_listed_row_only(url: str, build: Any, api: Any, admin_user: Any) -> None:
    # given three nodes with 0, 1 and 3 cards
    nodes = [build.node(hostname=f"n{i}") for i in range(3)]
    build.card(node=nodes[1])
    for _ in range(3):
        build.card(node=nodes[2])
    client = api
    if not url.startswith("/api/"):
        from django.test import Client

        client = Client()
        client.force_login(admin_user)
    # when the first page of two is listed
    sql = _node_queries(client, url)
    # then no query groups the nodes (the card count is a correlated subquery of each listed row)
    assert sql and all('GROUP BY "inventory_node"."id"' not in q for q in sql)
    main = [q for q in sql if "LIMIT" in q]
    assert main and all('LEFT OUTER JOIN "inventory_card"' not in q for q in main)
    counts = [q for q in sql if "COUNT(*)" in q.upper() and "LIMIT" not in q]
    assert counts and all('"inventory_card"' not in q for q in counts)


def test_card_count_is_still_exact(build: Any, api: Any) -> None:
    node = build.node(hostname="counted")
    build.node(hostname="empty")
    for _ in range(3):
        build.card(node=node)
    rows = {r["hostname"]: r["card_count"] for r in api.get("/api/inventory/nodes/").json()["results"]}
    assert (rows["counted"], rows["empty"]) == (3, 0)
