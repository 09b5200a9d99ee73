"""``__any``: membership in a list bound as one array parameter (portal/lookups.py)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from inventory.models import Card, Cluster, Node
from jobs.models import Action
from tests.clusters import make_nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(db) -> list[Node]:
    cluster = Cluster.objects.create(name="any")
    return make_nodes(cluster, [f"any{i}" for i in range(5)], gpus=2)


def test_any_selects_what_in_selects_with_one_parameter(nodes) -> None:
    # given the ids of three nodes (one twice, with a None) and of their cards
    ids = [nodes[0].pk, nodes[2].pk, nodes[2].pk, None, nodes[4].pk]
    # when they are filtered with __any and with __in
    with CaptureQueriesContext(connection) as ctx:
        by_any = set(Node.objects.filter(pk__any=ids).values_list("slurm_name", flat=True))
    by_in = set(Node.objects.filter(pk__in=ids).values_list("slurm_name", flat=True))
    # then both find the same rows, and on PostgreSQL the list went as one array: "= ANY(...)"
    assert by_any == by_in == {"any0", "any2", "any4"}
    sql = ctx.captured_queries[0]["sql"]
    if connection.vendor == "postgresql":
        assert " = ANY(" in sql and " IN (" not in sql
    else:  # the demo's SQLite: IN (...)
        assert " IN (" in sql
    # and through a foreign key, a text column and a subquery
    assert Card.objects.filter(node_id__any=ids).count() == 6
    assert Card.objects.filter(node__slurm_name__any={"any1", "nope"}).count() == 2
    assert Card.objects.filter(node__any=Node.objects.filter(slurm_name="any3").values("pk")).count() == 2


def test_any_of_nothing_selects_nothing_and_uuid_text_is_a_uuid(nodes) -> None:
    assert list(Node.objects.filter(pk__any=[])) == []
    assert list(Node.objects.filter(pk__any=[None])) == []
    assert list(Action.objects.filter(pk__any=[str(uuid.uuid4()), uuid.uuid4()])) == []


def test_plain_integer_ids_go_as_one_literal_and_select_the_same(nodes) -> None:
    # given plain integers (a set, as the live push hands them), one beyond a 32-bit id
    ids = {nodes[1].pk, nodes[3].pk, 2**40}
    with CaptureQueriesContext(connection) as ctx:
        found = set(Node.objects.filter(pk__any=ids).values_list("slurm_name", flat=True))
    assert found == {"any1", "any3"}
    assert set(Card.objects.filter(node_id__any=ids).values_list("node__slurm_name", flat=True)) == found
    if connection.vendor == "postgresql":  # one parameter, not one per id
        assert "::bigint[]" in ctx.captured_queries[0]["sql"]


def test_integers_for_a_text_column_are_prepared_as_text(nodes) -> None:
    # a text column given integers: Django's preparation turns them into text, as __in does
    Node.objects.filter(pk=nodes[0].pk).update(slurm_name="42")
    assert list(Node.objects.filter(slurm_name__any=[42, 7]).values_list("pk", flat=True)) == [nodes[0].pk]
