"""Live consumers over the real Redis channel layer: auth, groups, role scoping, snapshot, coalescing."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from portal.live import groups, push

from .conftest import communicator

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro_fn: Any) -> Any:
    return async_to_sync(coro_fn)()


def test_anonymous_socket_is_rejected(rig: dict[str, Any]) -> None:
    from django.contrib.auth.models import AnonymousUser

    async def scenario() -> Any:
        comm = communicator("/ws/live/overview/", AnonymousUser())
        result = await comm.connect()
        await comm.disconnect()
        return result

    assert run(scenario) == (False, 4401)


def test_session_cookie_authenticates_through_the_asgi_application(
    rig: dict[str, Any], admin_user: Any
) -> None:
    from channels.testing.websocket import WebsocketCommunicator
    from django.test import Client

    from portal.asgi import application

    client = Client()
    client.force_login(admin_user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def scenario() -> tuple[bool, str]:
        comm = WebsocketCommunicator(
            application, "/ws/live/overview/", headers=[(b"cookie", cookie), (b"origin", b"http://127.0.0.1")]
        )
        connected, _ = await comm.connect()
        first = await comm.receive_from(timeout=5)
        await comm.disconnect()
        return connected, first

    connected, first = run(scenario)
    assert connected is True
    assert f'id="overview-cluster-{rig["cluster"].pk}"' in first


def test_overview_snapshot_on_connect_has_every_cluster(
    rig: dict[str, Any], admin_user: Any, ingest: Any
) -> None:
    ingest(rig["cards"][0], temperature=71.0, power=300.0)

    async def scenario() -> str:
        comm = communicator("/ws/live/overview/", admin_user)
        await comm.connect()
        snap = await comm.receive_from(timeout=5)
        await comm.disconnect()
        return snap

    snap = run(scenario)
    assert 'data-seq="snapshot"' in snap
    assert f'id="overview-cluster-{rig["cluster"].pk}"' in snap
    assert "300 W / 1.28 kW" in snap  # the PSU binds: 1600 W less 20 % headroom
    assert "gpu01/0" in snap and "temp-warm" in snap
    assert "alerts firing" in snap or "alert firing" in snap


def test_ingest_is_pushed_to_overview_and_rack_and_node_groups(
    rig: dict[str, Any], admin_user: Any, ingest: Any
) -> None:
    card = rig["cards"][1]

    async def scenario() -> tuple[str, str, str]:
        overview = communicator("/ws/live/overview/", admin_user)
        rack = communicator(f"/ws/live/rack/{rig['rack'].pk}/", admin_user)
        node = communicator(f"/ws/live/node/{card.node_id}/", admin_user)
        for c in (overview, rack, node):
            assert (await c.connect())[0]
            await c.receive_from(timeout=5)  # snapshot
        await database_sync_to_async(
            lambda: (ingest(card, temperature=95.0, power=420.0), push.flush_now())
        )()
        got = (await overview.receive_from(5), await rack.receive_from(5), await node.receive_from(5))
        for c in (overview, rack, node):
            assert await c.receive_nothing()
            await c.disconnect()
        return got

    overview, rack, node = run(scenario)
    assert "95 °C" in overview and "temp-critical" in overview
    assert re.search(rf'<span id="thermal-card-{card.pk}" class="tcard temp-critical"', rack)
    assert f'id="node-latest-{card.node_id}"' in node and "temp-critical" in node
    points = json.loads(html.unescape(re.search(r'data-points="([^"]*)"', node).group(1)))
    assert points["cards"][str(card.pk)] == {"temperature_c": 95.0, "power_w": 420.0}


def test_changes_are_coalesced_into_one_group_event_per_group(rig: dict[str, Any], admin_user: Any) -> None:
    node = rig["nodes"][0]
    for _ in range(50):
        push.mark_changed("node", [node.pk])
    push.mark_changed("card", [rig["cards"][0].pk, rig["cards"][1].pk])

    messages = push.route(*push.coalescer.take()[:1], seq="t-1", ts=1.0)

    assert sorted(messages) == sorted(
        [
            groups.node(node.pk),
            groups.cluster(rig["cluster"].pk),
            groups.rack(rig["rack"].pk),
            groups.OVERVIEW,
        ]
    )
    assert messages[groups.node(node.pk)]["ids"] == {
        "node": [node.pk],
        "card": [c.pk for c in rig["cards"][:2]],
    }
    assert messages[groups.OVERVIEW]["ids"] == {"cluster": [rig["cluster"].pk]}
    assert push.coalescer.take() == ({}, None)


def test_the_flush_renders_the_overview_once_and_sockets_forward_it(
    rig: dict[str, Any], admin_user: Any, researcher_user: Any, monkeypatch: Any
) -> None:
    from monitoring import live as monitoring_live

    flush_renders: list[Any] = []
    socket_renders: list[Any] = []
    real = monitoring_live.overview_html

    def render(ids: Any, variants: Any = None) -> Any:
        out = real(ids, variants)
        flush_renders.append((ids, sorted(out)))
        return out

    monkeypatch.setattr(monitoring_live, "overview_html", render)
    monkeypatch.setattr(monitoring_live, "render_overview", lambda *a, **k: socket_renders.append(a) or "")

    async def scenario() -> list[str]:
        socks = [communicator("/ws/live/overview/", u) for u in (admin_user, admin_user, researcher_user)]
        for s in socks:
            await s.connect()
            await s.receive_from(5)
        socket_renders.clear()
        for _ in range(20):
            push.mark_changed("node", [rig["nodes"][0].pk])
        await database_sync_to_async(push.flush_now)()
        frames = [await s.receive_from(5) for s in socks]
        for s in socks:
            assert await s.receive_nothing()
            await s.disconnect()
        return frames

    admin1, admin2, researcher = run(scenario)
    # once, and only in the variants that some socket watches (both roles in English, not Chinese)
    assert flush_renders == [([rig["cluster"].pk], ["alerts:en", "plain:en"])]
    assert socket_renders == []
    assert admin1 == admin2
    assert (
        admin1.startswith('<span id="live-status"') and f'id="overview-cluster-{rig["cluster"].pk}"' in admin1
    )
    assert "alerts firing" in admin1 and "alerts firing" not in researcher
    assert researcher.replace(" ", "") != admin1.replace(" ", "")


def test_an_overview_event_without_frames_is_rendered_once_per_process(
    rig: dict[str, Any], admin_user: Any, monkeypatch: Any
) -> None:
    from monitoring import live as monitoring_live

    calls: list[Any] = []
    real = monitoring_live.render_overview
    monkeypatch.setattr(
        monitoring_live,
        "render_overview",
        lambda ids, *, with_alerts: calls.append(ids) or real(ids, with_alerts=with_alerts),
    )

    async def scenario() -> list[str]:
        socks = [communicator("/ws/live/overview/", admin_user) for _ in range(3)]
        for s in socks:
            await s.connect()
            await s.receive_from(5)
        calls.clear()
        event = {"type": push.EVENT_TYPE, "seq": "x-1", "ts": 1.0, "ids": {"cluster": [rig["cluster"].pk]}}
        await get_channel_layer().group_send(groups.OVERVIEW, event)
        frames = [await s.receive_from(5) for s in socks]
        for s in socks:
            await s.disconnect()
        return frames

    frames = run(scenario)
    assert all(f'id="overview-cluster-{rig["cluster"].pk}"' in f for f in frames)
    assert calls == [[rig["cluster"].pk]]


def test_snapshot_renders_are_shared_only_when_started_after_the_sockets_joined() -> None:
    from portal.live import consumers

    calls: list[int] = []

    def render() -> str:
        calls.append(1)
        return f"render {len(calls)}"

    async def scenario() -> list[str]:
        consumers._snapshots.clear()
        since = consumers.time.monotonic()
        shared = [await consumers.shared_snapshot(("overview", True), since, render) for _ in range(3)]
        later = await consumers.shared_snapshot(("overview", True), consumers.time.monotonic() + 1, render)
        other = await consumers.shared_snapshot(("overview", False), since, render)
        return [*shared, later, other]

    assert run(scenario) == ["render 1", "render 1", "render 1", "render 2", "render 3"]


def _job(cluster: Any, owner: Any, job_id: int, state: str = "PENDING") -> Any:
    from jobs.models import Job

    return Job.objects.create(cluster=cluster, job_id=job_id, name=f"train-{job_id}", user=owner.username,
                              owner=owner, state=state, partition="gpu")  # fmt: skip


def test_researcher_never_receives_another_users_job(
    rig: dict[str, Any], researcher_user: Any, make_user: Any
) -> None:
    bob = make_user("bob", "researcher")
    mine = _job(rig["cluster"], researcher_user, 101)

    async def scenario() -> tuple[str, bool, list[str]]:
        comm = communicator("/ws/live/jobs/?scope=all", researcher_user)
        assert (await comm.connect())[0]
        snap = await comm.receive_from(5) + await comm.receive_from(5)
        other = await database_sync_to_async(lambda: _job(rig["cluster"], bob, 202))()
        await database_sync_to_async(lambda: (push.mark_changed("job", [other.pk]), push.flush_now()))()
        nothing = await comm.receive_nothing(timeout=0.5)
        await database_sync_to_async(lambda: (push.mark_changed("job", [mine.pk]), push.flush_now()))()
        frames = [await comm.receive_from(5), await comm.receive_from(5)]
        await comm.disconnect()
        return snap, nothing, frames

    snap, nothing, frames = run(scenario)
    assert f'id="job-{mine.pk}"' in snap and "train-202" not in snap
    assert nothing is True
    assert 'id="live-status"' in frames[0]
    assert f'<tr id="job-{mine.pk}"' in frames[1] and "train-202" not in frames[1]


def test_researcher_sockets_join_only_their_user_group_and_the_overview(
    rig: dict[str, Any], researcher_user: Any
) -> None:
    from jobs.models import Action

    routed = push.route({"job": [_job(rig["cluster"], researcher_user, 7).pk]}, seq="s", ts=0.0)
    assert groups.user(researcher_user.pk) in routed and groups.ALL_JOBS in routed

    async def scenario() -> tuple[list[str], list[str], str]:
        jobs = communicator("/ws/live/jobs/", researcher_user)
        overview = communicator("/ws/live/overview/", researcher_user)
        await jobs.connect()
        await overview.connect()
        snap = await overview.receive_from(5)
        joined = get_channel_layer()._get_layer().groups
        got = (
            sorted(g for g in joined if "jobs" in g or "user." in g),
            sorted(g for g in joined if "overview" in g),
        )
        await jobs.disconnect()
        await overview.disconnect()
        return *got, snap

    jobs_groups, overview_groups, snap = run(scenario)
    assert [g.split("__group__")[1] for g in jobs_groups] == [groups.user(researcher_user.pk)]
    # the overview, and the presence group of its variant (no alerts, English): never sent to
    assert [g.split("__group__")[1] for g in overview_groups] == [
        groups.OVERVIEW,
        groups.overview_variant("plain:en"),
    ]
    assert "alerts firing" not in snap and "alert firing" not in snap
    assert Action.objects.count() == 0


def test_operator_sees_every_users_job_rows_as_they_change(
    rig: dict[str, Any], operator_user: Any, researcher_user: Any
) -> None:
    from jobs.models import Job

    job = _job(rig["cluster"], researcher_user, 301)

    async def scenario() -> list[str]:
        comm = communicator("/ws/live/jobs/?scope=all", operator_user)
        await comm.connect()
        await comm.receive_from(5)
        await comm.receive_from(5)

        def change() -> None:
            Job.objects.filter(pk=job.pk).update(state="RUNNING")
            push.mark_changed("job", [job.pk])
            push.flush_now()
            new = _job(rig["cluster"], researcher_user, 302)
            push.mark_changed("job", [new.pk])
            push.flush_now()

        await database_sync_to_async(change)()
        frames = [await comm.receive_from(5) for _ in range(4)]
        await comm.disconnect()
        return frames

    frames = run(scenario)
    assert frames[1].startswith(f'<tr id="job-{job.pk}" class="state-running">')
    assert frames[3].startswith('<tbody hx-swap-oob="afterbegin:#job-rows"><tr id="job-')
    assert "302" in frames[3]


def test_action_progress_is_pushed_to_the_action_page(
    rig: dict[str, Any], operator_user: Any, monkeypatch: Any
) -> None:
    from jobs import services
    from jobs.models import Action, ActionStatus

    monkeypatch.setattr(services, "action_enqueue", lambda action_id: None)
    node = rig["nodes"][0]
    action = services.node_drain_request(node, user=operator_user, reason="fan noise")
    push.flush_now()  # the creation

    async def scenario() -> tuple[str, str]:
        comm = communicator(f"/ws/live/jobs/?view=action&id={action.pk}", operator_user)
        assert (await comm.connect())[0]
        await comm.receive_from(5)
        snap = await comm.receive_from(5)

        def finish() -> None:
            services._finish(Action.objects.get(pk=action.pk), ActionStatus.SUCCEEDED, output="Drained")
            push.flush_now()

        await database_sync_to_async(finish)()
        await comm.receive_from(5)
        card = await comm.receive_from(5)
        await comm.disconnect()
        return snap, card

    snap, card = run(scenario)
    assert f'id="action-{action.pk}"' in snap and "status-pending" in snap
    assert f'id="action-{action.pk}"' in card and "status-succeeded" in card and "Drained" in card


def test_another_users_action_page_is_refused(
    rig: dict[str, Any], operator_user: Any, researcher_user: Any, monkeypatch: Any
) -> None:
    from jobs import services

    monkeypatch.setattr(services, "action_enqueue", lambda action_id: None)
    action = services.node_drain_request(rig["nodes"][0], user=operator_user, reason="x")

    async def scenario() -> Any:
        comm = communicator(f"/ws/live/jobs/?view=action&id={action.pk}", researcher_user)
        result = await comm.connect()
        await comm.disconnect()
        return result

    assert run(scenario) == (False, 4403)


def test_node_page_snapshot_has_latest_values_and_activity(
    rig: dict[str, Any], operator_user: Any, ingest: Any
) -> None:
    card = rig["cards"][0]
    ingest(card, temperature=60.0, power=250.0)

    async def scenario() -> str:
        comm = communicator(f"/ws/live/node/{card.node_id}/", operator_user)
        assert (await comm.connect())[0]
        snap = await comm.receive_from(5)
        await comm.disconnect()
        return snap

    snap = run(scenario)
    assert f'id="node-latest-{card.node_id}"' in snap
    assert f'id="node-activity-{card.node_id}"' in snap
    assert "60 °C · 250 W" in snap


def test_unknown_node_or_rack_is_refused(rig: dict[str, Any], admin_user: Any) -> None:
    async def scenario() -> list[Any]:
        out = []
        for path in ("/ws/live/node/999999/", "/ws/live/rack/999999/"):
            comm = communicator(path, admin_user)
            out.append(await comm.connect())
            await comm.disconnect()
        return out

    assert run(scenario) == [(False, 4403), (False, 4403)]


def test_demo_in_memory_layer_pushes_through_the_server_loop(
    rig: dict[str, Any], admin_user: Any, settings: Any
) -> None:
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()

    async def scenario() -> str:
        comm = communicator("/ws/live/overview/", admin_user)
        assert (await comm.connect())[0]
        await comm.receive_from(5)
        push.mark_changed("cluster", [rig["cluster"].pk])
        await database_sync_to_async(push.flush_now)()  # a worker thread: sends via the server's loop
        frame = await comm.receive_from(5)
        await comm.disconnect()
        return frame

    assert f'id="overview-cluster-{rig["cluster"].pk}"' in run(scenario)


def test_the_overview_part_of_a_flush_runs_without_garbage_collection(
    rig: dict[str, Any], monkeypatch: Any
) -> None:
    import gc

    seen: list[tuple[bool, list[str]]] = []
    monkeypatch.setattr(
        push.coalescer, "send", lambda messages: seen.append((gc.isenabled(), sorted(messages)))
    )
    # as if every group had sockets
    monkeypatch.setattr(push.coalescer, "listened", lambda messages: messages)
    push.mark_changed("node", [rig["nodes"][0].pk])

    push.flush_now()

    assert seen[0] == (False, [groups.OVERVIEW])
    assert seen[1][0] is True and groups.node(rig["nodes"][0].pk) in seen[1][1]
    assert gc.isenabled() is True


def test_each_socket_gets_the_overview_in_its_pages_language(rig: dict[str, Any], admin_user: Any) -> None:
    from django.utils import translation

    async def scenario() -> list[str]:
        english = communicator("/ws/live/overview/", admin_user)
        chinese = communicator("/ws/live/overview/", admin_user)
        chinese.scope["headers"] = [(b"cookie", b"django_language=zh-hans")]
        browser = communicator("/ws/live/overview/", admin_user)
        browser.scope["headers"] = [(b"accept-language", b"zh-CN,zh;q=0.9,en;q=0.5")]
        socks = [english, chinese, browser]
        for s in socks:
            await s.connect()
        snapshots = [await s.receive_from(5) for s in socks]
        # the flushing thread runs in whatever language was active last: the frames must not care
        with translation.override("zh-hans"):
            push.mark_changed("node", [rig["nodes"][0].pk])
            await database_sync_to_async(push.flush_now)()
        pushed = [await s.receive_from(5) for s in socks]
        for s in socks:
            await s.disconnect()
        return snapshots + pushed

    en_snap, zh_snap, browser_snap, en_push, zh_push, browser_push = run(scenario)
    for frame in (en_snap, en_push):
        assert "alerts firing" in frame and "告警" not in frame
    for frame in (zh_snap, zh_push, browser_snap, browser_push):
        assert "告警" in frame and "alerts firing" not in frame


def test_a_flush_sends_only_to_the_groups_someone_listens_to(
    rig: dict[str, Any], admin_user: Any, monkeypatch: Any
) -> None:
    from monitoring import live as monitoring_live

    watched, unwatched = rig["nodes"]
    sent: list[str] = []
    renders: list[Any] = []
    real_send, real_render = push.coalescer.send, monitoring_live.overview_html
    monkeypatch.setattr(push.coalescer, "send", lambda messages: (sent.extend(messages), real_send(messages)))
    monkeypatch.setattr(
        monitoring_live,
        "overview_html",
        lambda ids, variants=None: renders.append(ids) or real_render(ids, variants),
    )

    async def scenario() -> tuple[str, set[str] | None]:
        # given one socket, on the first node's page (no overview, no page of the second node)
        page = communicator(f"/ws/live/node/{watched.pk}/", admin_user)
        assert (await page.connect())[0]
        await page.receive_from(timeout=5)  # snapshot
        heard = await push._listened(
            get_channel_layer(), [groups.node(watched.pk), groups.node(unwatched.pk)]
        )
        # when both nodes change
        await database_sync_to_async(
            lambda: (push.mark_changed("node", [watched.pk, unwatched.pk]), push.flush_now())
        )()
        frame = await page.receive_from(timeout=5)
        await page.disconnect()
        return frame, heard

    frame, heard = run(scenario)
    # then the watched node's page got its event; the other node's group, its rack's and cluster's and
    # the overview (nobody listens) were neither sent nor, for the overview, rendered
    assert f'id="node-latest-{watched.pk}"' in frame
    assert heard == {groups.node(watched.pk)}
    assert sent == [groups.node(watched.pk)]
    assert renders == []


def test_groups_are_marked_for_resync_when_redis_cannot_say_who_listens(
    rig: dict[str, Any], settings: Any, monkeypatch: Any
) -> None:
    from channels.layers import channel_layers

    # given a channel layer whose Redis does not answer
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [{"address": "redis://127.0.0.1:1/0"}], "prefix": "rp-nobody"},
        }
    }
    channel_layers.backends.clear()
    push.coalescer._loop = None
    sent: list[Any] = []
    monkeypatch.setattr(push.coalescer, "send", lambda messages: sent.append(messages))
    push.mark_changed("node", [rig["nodes"][0].pk])

    push.flush_now()

    # then nothing was sent and every group of the flush waits for its resync
    assert [m for m in sent if m] == []
    assert groups.OVERVIEW in push.coalescer.resync_pending()
    assert groups.node(rig["nodes"][0].pk) in push.coalescer.resync_pending()
    push.coalescer._resync.clear()
    push.coalescer._loop = None


def test_events_reach_the_sockets_without_a_hop_to_the_sync_thread_each(
    rig: dict[str, Any], admin_user: Any, monkeypatch: Any
) -> None:
    import channels.consumer

    hops: list[int] = []
    real = channels.consumer.aclose_old_connections

    async def counted() -> None:
        hops.append(1)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)

    async def scenario() -> list[str]:
        socks = [communicator("/ws/live/overview/", admin_user) for _ in range(3)]
        for s in socks:
            assert (await s.connect())[0]
            await s.receive_from(5)
        push.mark_changed("node", [rig["nodes"][0].pk])
        await database_sync_to_async(push.flush_now)()
        frames = [await s.receive_from(5) for s in socks]
        for s in socks:
            await s.disconnect()
        return frames

    frames = run(scenario)
    # three sockets connected, got their snapshot and one event each: channels' per-message hop to
    # the one sync thread (closing stale connections, which database_sync_to_async does itself) was
    # never taken
    assert all(f'id="overview-cluster-{rig["cluster"].pk}"' in f for f in frames)
    assert hops == []
