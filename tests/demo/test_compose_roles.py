"""What the compose containers run, tested here without Docker: the web service's preparation
(stack_prepare, cluster_from_lab_env --map-nodes), the admin's user_create, and the liveness files
the worker, beat and feeder health checks read (docker/healthcheck.sh)."""

from __future__ import annotations

import time

import pytest
from django.core.management import CommandError, call_command

LAB_ENV = """export SLURM_LAB_DIR='/lab'
export SLURM_CONF='/lab/etc/slurm.conf'
export SLURM_LAB_SSH_HOST='slurm'
export SLURM_LAB_SSH_PORT='2222'
export SLURM_LAB_SSH_USER='rackpilot'
export SLURM_LAB_SSH_KEY='/lab/ssh/rackpilot_ed25519'
export SLURM_LAB_SSH_HOST_KEY='ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOy4l4Pvp9ICX2Hqv3OZhtvmoEcQtbn3tL3HPMB9oHx4'
export SLURM_LAB_USERS='alice bob'
export SLURM_LAB_PARTITIONS='gpu debug'
export SLURM_LAB_NODES='node[1-2]'
"""


def _slurm_names() -> dict[str, str]:
    from inventory.models import Node

    return dict(Node.objects.filter(cluster__name="h100-pod").values_list("hostname", "slurm_name"))


@pytest.mark.django_db
def test_stack_prepare_points_h100_pod_at_the_lab_and_maps_its_nodes(tmp_path, capsys):
    from inventory.models import Cluster

    env = tmp_path / "env"
    env.write_text(LAB_ENV)
    call_command("stack_prepare", "--lab-env", str(env))
    out = capsys.readouterr().out
    assert "h100-pod: gpu01 is Slurm node node1\nh100-pod: gpu02 is Slurm node node2\n" in out
    pod = Cluster.objects.get(name="h100-pod")
    assert (pod.backend, pod.ssh_host, pod.ssh_port, pod.ssh_user, pod.ssh_key_path, pod.slurm_conf) == (
        "slurm-ssh", "slurm", 2222, "rackpilot", "/lab/ssh/rackpilot_ed25519", "/lab/etc/slurm.conf",
    )  # fmt: skip
    names = _slurm_names()
    assert {h: names[h] for h in ("gpu01", "gpu02", "gpu03", "gpu04")} == {
        "gpu01": "node1", "gpu02": "node2", "gpu03": "gpu03", "gpu04": "gpu04",
    }  # fmt: skip

    # a second start (the kept volume): migrations are a no-op and the mapping is unchanged
    call_command("stack_prepare", "--lab-env", str(env))
    assert "No migrations to apply." in capsys.readouterr().out
    assert _slurm_names() == names


@pytest.mark.django_db
def test_stack_prepare_without_the_lab_file_keeps_the_cluster_as_seeded(tmp_path, capsys):
    from inventory.models import Cluster

    call_command("stack_prepare", "--lab-env", str(tmp_path / "missing"))
    assert f"{tmp_path / 'missing'} does not exist: h100-pod keeps its connection" in capsys.readouterr().out
    assert Cluster.objects.get(name="h100-pod").ssh_host == ""
    assert _slurm_names()["gpu01"] == "gpu01"


@pytest.mark.django_db
def test_map_nodes_takes_a_name_back_from_a_node_that_is_not_mapped(tmp_path):
    from inventory.models import Node

    call_command("seed_demo")
    Node.objects.filter(hostname="gpu04").update(slurm_name="node2")
    Node.objects.filter(hostname="gpu02").update(slurm_name="node1")
    Node.objects.filter(hostname="gpu01").update(slurm_name="")
    env = tmp_path / "env"
    env.write_text(LAB_ENV)
    call_command("cluster_from_lab_env", str(env), "--cluster", "h100-pod", "--map-nodes")
    names = _slurm_names()
    assert {h: names[h] for h in ("gpu01", "gpu02", "gpu03", "gpu04")} == {
        "gpu01": "node1", "gpu02": "node2", "gpu03": "gpu03", "gpu04": "",
    }  # fmt: skip


@pytest.mark.django_db
def test_user_create_gives_the_role_and_refuses_a_weak_password_or_a_taken_name(monkeypatch, capsys):
    from django.contrib.auth.models import User

    monkeypatch.setenv("PORTAL_USER_PASSWORD", "a-long-Passphrase-7")
    call_command("user_create", "alice", "--role", "researcher", "--noinput")
    alice = User.objects.get(username="alice")
    assert capsys.readouterr().out == f"alice (id {alice.pk}): created with the role researcher\n"
    assert list(alice.groups.values_list("name", flat=True)) == ["researcher"]
    assert alice.check_password("a-long-Passphrase-7") and not alice.is_staff

    monkeypatch.setenv("PORTAL_USER_PASSWORD", "123")
    with pytest.raises(CommandError) as weak:
        call_command("user_create", "bob", "--role", "operator", "--noinput")
    assert "This password is too short." in str(weak.value)
    with pytest.raises(CommandError) as taken:
        call_command("user_create", "alice", "--role", "admin", "--noinput")
    assert str(taken.value) == "A user with that username already exists."
    assert list(User.objects.values_list("username", flat=True)) == ["alice"]
    assert list(alice.groups.values_list("name", flat=True)) == ["researcher"]


def test_user_create_without_a_password_says_where_it_reads_it(monkeypatch):
    monkeypatch.delenv("PORTAL_USER_PASSWORD", raising=False)
    with pytest.raises(CommandError) as err:
        call_command("user_create", "carol", "--role", "researcher", "--noinput")
    assert str(err.value) == "--noinput needs the password in PORTAL_USER_PASSWORD."


def test_beat_touches_its_heartbeat_file_on_every_tick(tmp_path, monkeypatch):
    from celery import Celery

    from portal.beat import HeartbeatScheduler

    alive = tmp_path / "beat.alive"
    monkeypatch.setenv("PORTAL_BEAT_HEARTBEAT_FILE", str(alive))
    app = Celery("beat-test", broker="memory://", set_as_current=False)
    scheduler = HeartbeatScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), max_interval=10)
    assert not alive.exists()
    assert scheduler.tick() == 10.0  # nothing scheduled: sleep the whole max interval
    first = alive.stat().st_mtime_ns
    time.sleep(0.02)
    scheduler.tick()
    assert alive.stat().st_mtime_ns > first
    scheduler.close()


def test_the_worker_touches_its_heartbeat_file_while_its_consumer_runs(tmp_path, monkeypatch):
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    from portal.celery import LivenessFile

    alive = tmp_path / "worker.alive"
    monkeypatch.setenv("PORTAL_WORKER_HEARTBEAT_FILE", str(alive))
    app = Celery("worker-test", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.steps["consumer"].add(LivenessFile)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 10
        while not alive.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive.exists()


@pytest.mark.django_db(transaction=True)
def test_the_feeder_touches_its_heartbeat_file_only_after_a_round_that_all_succeeded(
    live_server, tmp_path, capsys, monkeypatch
):
    from inventory.seed import seed_demo
    from monitoring.services.ingest import series_cache_clear

    series_cache_clear()
    seed_demo()
    alive = tmp_path / "feeder.alive"
    call_command("run_feeder", "--url", live_server.url, "--once", "--heartbeat", str(alive))
    assert "posted 8/8" in capsys.readouterr().out
    assert alive.exists()

    # a round with a refused post leaves the file alone (the health check then goes stale)
    from portal.demo.feeder import Feeder

    alive.unlink()
    monkeypatch.setattr(Feeder, "round", lambda self, dt: {"gpu01": 202, "gpu02": 400})
    with pytest.raises(CommandError) as err:
        call_command("run_feeder", "--url", live_server.url, "--once", "--heartbeat", str(alive))
    assert str(err.value) == "some posts failed: {'gpu02': 400}"
    assert not alive.exists()
