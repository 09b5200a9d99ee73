"""The compose feeder posts raw tool output to the real ingest endpoint with per-node tokens."""

from __future__ import annotations

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seeded():
    from inventory.seed import seed_demo
    from monitoring.services.ingest import series_cache_clear

    series_cache_clear()
    seed_demo()


def _client_sender(client):
    def send(url, body, headers):
        path = url.split("://", 1)[1].split("/", 1)[1]
        resp = client.post(
            "/" + path,
            data=body,
            content_type=headers["Content-Type"],
            HTTP_AUTHORIZATION=headers["Authorization"],
        )
        return resp.status_code, resp.content.decode()

    return send


def test_a_round_posts_every_node_with_its_own_token(seeded, client):
    from monitoring.models import LatestValue, NodeToken
    from portal.demo.feeder import TOKEN_NAME, Feeder

    # given a feeder with one token per simulated node
    feeder = Feeder("http://portal.test", send=_client_sender(client))
    feeder.setup()
    assert NodeToken.objects.filter(name=TOKEN_NAME).count() == len(feeder.nodes) == 8
    # when it posts a round
    statuses = feeder.round(10)
    # then every node's output was accepted and stored against that node
    assert statuses == {n.hostname: 202 for n in feeder.nodes}
    hosts = set(
        LatestValue.objects.filter(series__metric="temperature_c").values_list(
            "series__node__hostname", flat=True
        )
    )
    assert hosts == {"bench01", "gb10-a", "gb10-b", "gpu01", "gpu02", "gpu03", "gpu04", "rig01"}


def test_a_second_feeder_replaces_the_old_tokens(seeded, client):
    from monitoring.models import NodeToken
    from portal.demo.feeder import TOKEN_NAME, Feeder

    first = Feeder("http://portal.test", send=_client_sender(client))
    first.setup()
    second = Feeder("http://portal.test", send=_client_sender(client))
    second.setup()
    assert NodeToken.objects.filter(name=TOKEN_NAME).count() == 8
    # the first feeder's keys no longer work: nothing it sends is stored
    statuses = first.round(10)
    assert set(statuses.values()) == {401}


def test_a_token_cannot_post_for_another_node(seeded, client):
    from monitoring.models import LatestValue
    from portal.demo.feeder import Feeder

    feeder = Feeder("http://portal.test", send=_client_sender(client))
    feeder.setup()
    rig = next(n for n in feeder.nodes if n.hostname == "rig01")
    gpu01 = next(n for n in feeder.nodes if n.hostname == "gpu01")
    feeder.tokens[rig.node_id] = feeder.tokens[gpu01.node_id]  # rig01 posts with gpu01's key
    statuses = feeder.round(10)
    assert statuses["rig01"] == 400
    assert not LatestValue.objects.filter(series__node__hostname="rig01").exists()


def test_run_feeder_once_over_real_http(seeded, live_server, capsys):
    from monitoring.models import LatestValue

    call_command("run_feeder", "--url", live_server.url, "--once")
    assert "posted 8/8" in capsys.readouterr().out
    assert LatestValue.objects.filter(series__node__hostname="gpu04", series__metric="power_w").count() == 8
