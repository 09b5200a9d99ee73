"""A sync that cannot read the cluster changes nothing (issue 20), on the lab's recorded output.

The SlurmBackend, its parsers and the sync run for real; only the commands' output is replayed
from what the loopback lab printed (tests/cluster/fixtures: a healthy listing, and the same
commands with slurmctld stopped). The live outage on the real lab is in test_outage_lab.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from inventory.models import Cluster, Node
from jobs.cluster import CommandResult, SlurmBackend
from jobs.models import Job, JobTransition, NodeState, Partition
from jobs.sync import cluster_sync
from tests.clusters import make_nodes

FIXTURES = Path(__file__).resolve().parents[1] / "cluster" / "fixtures"
pytestmark = pytest.mark.django_db

SINFO = ("sinfo", "--json")
SQUEUE = ("squeue", "--json")
PARTITIONS = ("scontrol", "show", "partition", "-o")


def _out(name: str) -> str:
    return (FIXTURES / name).read_text()


HEALTHY = {
    SINFO: (0, _out("sinfo_v0.0.38.json"), ""),
    SQUEUE: (0, _out("squeue_v0.0.38.json"), ""),
    PARTITIONS: (0, _out("scontrol_show_partition.txt"), ""),
}
#: what 22.05 printed with slurmctld stopped: exit 0, empty lists, "errors" beside them
SINFO_DOWN = (0, _out("sinfo_down_v0.0.38.json"), "")
SQUEUE_DOWN = (0, _out("squeue_down_v0.0.38.json"), "")
PARTITIONS_DOWN = (1, "", _out("scontrol_down.stderr"))


class Replay:
    """A Runner answering each argv with recorded output (and recording the calls)."""

    def __init__(self, outputs: Mapping[tuple[str, ...], tuple[int, str, str]]) -> None:
        self.outputs = dict(outputs)
        self.calls: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], *, timeout: float, **_: Any) -> CommandResult:
        key = tuple(argv)
        self.calls.append(key)
        code, out, err = self.outputs[key]
        return CommandResult(argv=key, exit_code=code, stdout=out, stderr=err, duration=0.0)

    def close(self) -> None:
        pass


def _backend(**changes: tuple[int, str, str]) -> tuple[SlurmBackend, Replay]:
    keys = {"sinfo": SINFO, "squeue": SQUEUE, "partitions": PARTITIONS}
    runner = Replay({**HEALTHY, **{keys[k]: v for k, v in changes.items()}})
    return SlurmBackend(runner), runner


def _snapshot(cluster: Cluster) -> dict[str, Any]:
    """Everything a sync writes, besides the cluster's sync status."""
    return {
        "jobs": sorted(Job.objects.filter(cluster=cluster).values_list()),
        "transitions": sorted(JobTransition.objects.filter(job__cluster=cluster).values_list()),
        "nodes": sorted(
            Node.objects.filter(cluster=cluster).values_list(
                "pk", "slurm_state", "slurm_reason", "slurm_state_since"
            )
        ),
        "node_states": sorted(NodeState.objects.filter(node__cluster=cluster).values_list()),
        "partitions": sorted(Partition.objects.filter(cluster=cluster).values_list()),
    }


@pytest.fixture
def lab_like(db: Any) -> Cluster:
    cluster = Cluster.objects.create(name="lab-like", backend=Cluster.Backend.SLURM_SSH)
    make_nodes(cluster, ["node1", "node2", "node3", "node4"], gpus=0)
    return cluster


def test_a_sync_during_an_outage_changes_nothing_and_the_next_good_one_carries_on(lab_like) -> None:
    # given a cluster synced from the lab's healthy listing (10 jobs, 4 running or pending)
    backend, _ = _backend()
    first = cluster_sync(lab_like, backend=backend)
    assert (first.ok, first.created_jobs) == (True, 10)
    active = set(Job.objects.filter(cluster=lab_like, state__in=("RUNNING", "PENDING")).values_list("job_id"))
    assert len(active) == 4
    before = _snapshot(lab_like)
    lab_like.refresh_from_db()
    ok_at = lab_like.last_sync_ok_at
    assert (lab_like.sync_failing_since, lab_like.last_sync_error) == (None, "")

    # when slurmctld is down: sinfo exits 0 with an empty node list and "Unspecified error"
    backend, runner = _backend(sinfo=SINFO_DOWN, squeue=SQUEUE_DOWN, partitions=PARTITIONS_DOWN)
    down = cluster_sync(lab_like, backend=backend)
    # then the sync failed with Slurm's error, read nothing further, and changed no row
    assert (down.ok, down.error) == (False, "sinfo: Slurm reported: Unspecified error")
    assert (down.node_ids, down.job_ids, down.transitions) == ([], [], 0)
    assert runner.calls == [SINFO]
    assert _snapshot(lab_like) == before
    lab_like.refresh_from_db()
    since = lab_like.last_sync_at
    assert (lab_like.sync_failing_since, lab_like.last_sync_ok_at) == (since, ok_at)
    assert lab_like.last_sync_error == "sinfo: Slurm reported: Unspecified error"

    # when a later sync gets nodes but squeue still reports the outage (empty jobs list)
    backend, runner = _backend(squeue=SQUEUE_DOWN)
    again = cluster_sync(lab_like, backend=backend)
    # then still nothing changed, and the outage keeps its first failure as its start
    assert (again.ok, again.error) == (
        False,
        "squeue: Slurm reported: Failed while looking for jobs: Unspecified error",
    )
    assert runner.calls == [SINFO, SQUEUE]
    assert _snapshot(lab_like) == before
    lab_like.refresh_from_db()
    assert lab_like.sync_failing_since == since < lab_like.last_sync_at

    # when the controller is back: the next good sync carries on as if nothing happened
    backend, _ = _backend()
    back = cluster_sync(lab_like, backend=backend)
    assert (back.ok, back.node_ids, back.job_ids, back.transitions) == (True, [], [], 0)
    after = _snapshot(lab_like)
    assert after["transitions"] == before["transitions"]
    assert after["nodes"] == before["nodes"] and after["partitions"] == before["partitions"]
    assert (
        set(Job.objects.filter(cluster=lab_like, state__in=("RUNNING", "PENDING")).values_list("job_id"))
        == active
    )
    lab_like.refresh_from_db()
    assert (lab_like.sync_failing_since, lab_like.last_sync_error) == (None, "")
    assert lab_like.last_sync_ok_at == lab_like.last_sync_at > since


def test_text_from_a_down_controller_is_not_an_empty_cluster(lab_like) -> None:
    backend, _ = _backend()
    assert cluster_sync(lab_like, backend=backend).ok
    before = _snapshot(lab_like)
    text = (0, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", "")
    backend, _ = _backend(squeue=text)
    result = cluster_sync(lab_like, backend=backend)
    assert (result.ok, result.error) == (
        False,
        "squeue: slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
    )
    assert _snapshot(lab_like) == before


def test_slurm_warnings_are_kept_and_shown_but_do_not_fail_the_sync(lab_like, admin_user, client) -> None:
    import json

    doc = json.loads(_out("sinfo_v0.0.38.json"))
    doc["warnings"] = [{"description": "Node node9 in no partition", "source": "sinfo"}]
    backend, _ = _backend(sinfo=(0, json.dumps(doc), ""))
    result = cluster_sync(lab_like, backend=backend)
    assert result.ok
    lab_like.refresh_from_db()
    assert lab_like.last_sync_warnings == "sinfo: Node node9 in no partition"
    client.force_login(admin_user)
    page = client.get(reverse("inventory:cluster", args=[lab_like.pk])).content.decode()
    assert (
        '<h2>Slurm warnings</h2>\n<ul class="warnings"><li>sinfo: Node node9 in no partition</li></ul>'
        in page
    )


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize("role", ["operator", "researcher"])
def test_the_outage_is_shown_on_the_overview_and_the_cluster_page(
    lab_like, make_user, client, language, role
) -> None:
    # given a cluster whose syncs have failed for 12 minutes
    since = timezone.now() - timedelta(minutes=12)
    Cluster.objects.filter(pk=lab_like.pk).update(
        sync_failing_since=since,
        last_sync_at=timezone.now(),
        last_sync_error="sinfo: Slurm reported: Unspecified error",
    )
    client.force_login(make_user("u", role))
    client.cookies["django_language"] = language
    local = timezone.localtime(since)
    iso, exact = local.isoformat(timespec="seconds"), local.strftime("%Y-%m-%d %H:%M:%S")
    if language == "zh-hans":
        exact = f"{local.year}年{local.month}月{local.day}日 {local:%H:%M:%S}"
    ago = (
        f'<time datetime="{iso}" title="{exact}">'
        + {"en": "12\xa0minutes ago", "zh-hans": "12\xa0分钟前"}[language]
    )
    expected = {
        "en": f"Stale data: Slurm unreachable since {exact} ({ago}</time>)",
        "zh-hans": f"数据已过期： Slurm 自 {exact} 起无法访问（{ago}</time>）",
    }[language]
    # the error text names hosts and accounts: operators read it, researchers read that they can
    error = {
        "operator": ': <span class="sync-error">sinfo: Slurm reported: Unspecified error</span>',
        "researcher": {"en": "; operators see why.", "zh-hans": "; 运维人员可查看原因。"}[language],
    }[role]
    for url in (reverse("home"), reverse("inventory:cluster", args=[lab_like.pk])):
        page = client.get(url).content.decode()
        assert f"{expected}{error}</p>" in page, url
        assert ("Unspecified error" in page) is (role == "operator"), url
