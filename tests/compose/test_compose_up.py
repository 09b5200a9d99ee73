"""`docker compose up` for real: the stack a newcomer runs is the stack CI tests (README, compose section).

Builds the stand-in bases and the project's images, runs the real docker-compose.yml with
.env.example as its .env, waits for every service's health check, then works from outside the
containers as the README tells a person to: creates the first admin and a researcher, logs in, sees
the bundled Slurm's nodes synced on the overview, submits a job through the API and sees it complete
on that Slurm, sees the feeder's telemetry on a node page; then `down` and `up` again on the kept
volumes (the data is there, migrations are a no-op), and finally `down --volumes`.

Marker `compose`; skipped with the exact reason where no Docker daemon runs, never under CI=true
(.ci/run installs docker.io and starts dockerd). Prints the phases' wall times and the image size.
"""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.compose.stack import SERVICES, Browser, Stack, image_size_mb, images_build, poll, require_docker

pytestmark = pytest.mark.compose

PROJECT = "rackpilot-compose-test"
#: the host port the web service is published on (loopback only); never one the host's services use
PORT = int(os.environ.get("RACKPILOT_COMPOSE_TEST_PORT", "8160"))
ADMIN = ("admin", "compose-admin-Pw-1")
RESEARCHER = ("alice", "compose-alice-Pw-1")  # alice is a Unix account of the bundled Slurm


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    require_docker()
    timings: dict[str, float] = {}
    images_build(timings)
    stack = Stack(tmp_path_factory.mktemp("compose"), PROJECT, PORT)
    stack.down(volumes=True)  # what a crashed earlier run left
    stack.timings = timings  # type: ignore[attr-defined]
    yield stack
    stack.down(volumes=True)
    assert stack.container_ids() == {}
    print(
        "\ncompose test: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
        + f"; rackpilot:latest {image_size_mb('rackpilot:latest'):.0f} MB,"
        + f" rackpilot-slurm:latest {image_size_mb('rackpilot-slurm:latest'):.0f} MB"
    )


def _up(stack: Stack, phase: str) -> None:
    started = time.monotonic()
    try:
        stack.compose("up", "-d", "--no-build", timeout=600)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- health: {stack.health()}\n--- logs:\n{stack.logs_tail(60)}"
        ) from None
    assert stack.wait_healthy() == dict.fromkeys(SERVICES, "healthy")
    stack.timings[phase] = time.monotonic() - started  # type: ignore[attr-defined]


def _by_name(results: list[dict], key: str, value: str) -> dict:
    found = [r for r in results if r[key] == value]
    assert len(found) == 1, (value, results)
    return found[0]


def test_compose_up_runs_the_whole_product_and_keeps_its_data(stack):
    # given the stack up with .env.example as its .env, every service healthy
    _up(stack, "first up")
    assert "No migrations to apply." not in stack.logs("web")  # the first start did migrate
    web = Browser(f"http://127.0.0.1:{PORT}")
    status, body, _url = web.get("/readyz")
    assert (status, body) == (200, '{"status": "ok", "checks": {"database": "ok", "redis": "ok"}}')

    # when the first admin and a researcher are created as the README says
    out = stack.manage(
        "createsuperuser", "--noinput", "--username", ADMIN[0], "--email", "admin@example.org",
        env={"DJANGO_SUPERUSER_PASSWORD": ADMIN[1]},
    )  # fmt: skip
    assert out.strip() == "Superuser created successfully."
    out = stack.manage(
        "user_create", RESEARCHER[0], "--role", "researcher", "--noinput",
        env={"PORTAL_USER_PASSWORD": RESEARCHER[1]},
    )  # fmt: skip
    created = re.fullmatch(r"alice \(id (\d+)\): created with the role researcher", out.strip())
    assert created, out

    # then the admin logs in through the web service and the overview shows the bundled Slurm's nodes
    status, _page, url = web.login(*ADMIN)
    assert (status, url) == (200, f"http://127.0.0.1:{PORT}/")
    status, clusters = web.api("GET", "/api/inventory/clusters/")
    assert status == 200
    pod = _by_name(clusters["results"], "name", "h100-pod")
    assert (pod["backend"], pod["ssh_host"], pod["ssh_port"], pod["ssh_user"]) == (
        "slurm-ssh",
        "slurm",
        2222,
        "rackpilot",
    )

    def overview_nodes():
        _s, page, _u = web.get("/")
        card = re.search(rf'<article id="overview-cluster-{pod["id"]}".*?</article>', page, re.S)
        assert card, page[:1000]
        states = dict(re.findall(r'<li class="nstate nstate-([a-z-]+)">[^<]*<b>(\d+)</b>', card.group(0)))
        return states if states.get("idle") == "2" else None

    # gpu01 and gpu02 are the bundled Slurm's node1 and node2, idle; no node is down or unknown
    states = poll(overview_nodes, timeout=180, what="2 idle Slurm nodes on the overview")
    assert states["idle"] == "2" and set(states) <= {"idle", "outside-slurm", "missing"}, states
    status, states = web.api("GET", "/api/jobs/node-states/?limit=100")
    synced = {
        s["node"]["display"]: s["state"]
        for s in states["results"]
        if s["node"]["display"] in {"gpu01", "gpu02"}
    }
    assert synced == {"gpu01": "idle", "gpu02": "idle"}

    # when the admin maps alice to her cluster account and alice submits a job through the API
    alice_id = int(created.group(1))
    status, account = web.api(
        "POST", "/api/jobs/cluster-accounts/", {"user": alice_id, "cluster": pod["id"], "username": "alice"}
    )
    assert status == 201, account
    assert (account["user"]["id"], account["cluster"]["id"], account["username"]) == (
        alice_id,
        pod["id"],
        "alice",
    )
    researcher = Browser(f"http://127.0.0.1:{PORT}")
    status, _page, url = researcher.login(*RESEARCHER)
    assert (status, url) == (200, f"http://127.0.0.1:{PORT}/")
    token = researcher.form_post("/account/tokens/", {"name": "compose-test", "write_enabled": "on"})
    key = re.search(r'<code id="new-token">([0-9a-f]{40})</code>', token)
    assert key, token[:2000]
    token = key.group(1)
    status, action = web.api(
        "POST", "/api/jobs/actions/",
        {"kind": "submit", "cluster": pod["id"],
         "params": {"name": "compose-hello", "script": "#!/bin/bash\necho hello from compose\n", "gpus": 1}},
        token=token,
    )  # fmt: skip
    assert status == 202, action

    # then the worker submits it to the bundled Slurm as alice and the sync sees it complete
    def action_done():
        _s, a = web.api("GET", f"/api/jobs/actions/{action['id']}/", token=token)
        return a if a["status"] in {"succeeded", "failed"} else None

    done = poll(action_done, timeout=300, what="the submit action finished")
    assert (done["status"], done["error"]) == ("succeeded", ""), done

    def job_completed():
        _s, jobs = web.api("GET", f"/api/jobs/jobs/?cluster={pod['id']}&limit=100", token=token)
        mine = [j for j in jobs["results"] if j["submitted_by_action"] == action["id"]]
        return mine[0] if mine and mine[0]["state"] == "COMPLETED" else None

    job = poll(job_completed, timeout=300, interval=3, what="the job COMPLETED on the compose Slurm")
    assert (job["name"], job["user"], job["exit_code"], job["gpus"]) == ("compose-hello", "alice", 0, 1)

    # and the feeder's telemetry is on gpu01's page, in °C
    status, nodes = web.api("GET", "/api/inventory/nodes/?cluster_name=h100-pod&limit=100")
    gpu01 = _by_name(nodes["results"], "hostname", "gpu01")

    def node_temperatures():
        _s, page, _u = web.get(f"/inventory/nodes/{gpu01['id']}/")
        return re.findall(r'data-temperature="(\d+\.\d)"><span class="slot">\d+</span> \d+ °C', page)

    temps = poll(node_temperatures, timeout=120, what="card temperatures on gpu01's page")
    assert len(temps) == 8 and all(20.0 <= float(t) <= 100.0 for t in temps), temps

    # when the stack goes down and up again on the kept volumes
    stack.down(volumes=False)
    assert stack.container_ids() == {}
    _up(stack, "second up")

    # then migrations are a no-op, the accounts and the job are still there
    assert "No migrations to apply." in stack.logs("web")
    assert stack.manage("migrate", "--check") == ""  # exit 0 and silent: nothing left to apply
    web = Browser(f"http://127.0.0.1:{PORT}")
    status, _page, url = web.login(*RESEARCHER)
    assert (status, url) == (200, f"http://127.0.0.1:{PORT}/")
    status, again = web.api("GET", f"/api/jobs/jobs/{job['id']}/", token=token)
    assert status == 200
    assert (again["job_id"], again["state"], again["submitted_by_action"]) == (
        job["job_id"],
        "COMPLETED",
        action["id"],
    )
