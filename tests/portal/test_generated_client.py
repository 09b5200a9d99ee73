"""The OpenAPI schema proven by a generated client: openapi-python-client turns the live `/api/schema/`
into a Python package, and tests/portal/client_script.py, written only against that package, lists
nodes with a filter, creates a cable and gets the typed 400 for a used port, submits a job on the real
Slurm lab (through the action, run by Celery eagerly in the server) and follows the action to the end,
posts telemetry with a node token, and reads a series and the energy of a job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
SCRIPT = Path(__file__).with_name("client_script.py")
BIN = Path(sys.executable).parent


def _generate(url: str, token: str, where: Path) -> Path:
    import urllib.request

    request = urllib.request.Request(
        f"{url}/api/schema/?format=json", headers={"Authorization": f"Token {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # the live server's schema
        (where / "schema.json").write_bytes(response.read())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # its ruff post-hook
    done = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", "schema.json", "--meta", "none",
         "--output-path", "rackpilot_client"],
        cwd=where, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # the pieces it cannot generate: raw tool output (text/plain) for ingest, which JSON samples replace,
    # and Prometheus remote write (snappy protobuf), which Prometheus, Alloy or vmagent send, not scripts
    said = done.stdout + done.stderr
    warnings = [line for line in said.splitlines() if line.startswith("WARNING")]
    assert warnings == [
        "WARNING parsing POST /api/monitoring/ingest/ within monitoring.",
        "WARNING parsing POST /api/monitoring/remote-write/ within monitoring. Endpoint will not be generated.",
    ], said
    assert "Unsupported content type text/plain" in said
    assert "Unsupported content type application/x-protobuf" in said
    return where / "rackpilot_client"


def _finished_job_with_energy(cluster: Any, node: Any, owner: Any) -> Any:
    from django.utils import timezone

    from jobs.models import Job
    from monitoring.services import job_energy_compute, telemetry_ingest_samples

    end = timezone.now().replace(microsecond=0) - dt.timedelta(hours=1)
    start = end - dt.timedelta(hours=1)
    job = Job.objects.create(
        cluster=cluster, job_id=777001, name="earlier", user="alice", owner=owner, account="ml",
        state="COMPLETED", nodes=node.slurm_name, node_names=f",{node.slurm_name},", node_count=1, gpus=4,
        start_time=start, end_time=end,
    )  # fmt: skip
    # 4 cards at 250 W for the hour, every 60 s (1 kWh), and no host base load recorded
    telemetry_ingest_samples(
        [
            {
                "ts": (start + dt.timedelta(seconds=60 * i)).isoformat(),
                "node": node.hostname,
                "card": card.gpu_uuid,
                "metric": "power_w",
                "value": 250.0,
            }
            for i in range(61)
            for card in node.cards.all()
        ]  # fmt: skip
    )
    job_energy_compute(job)
    return job


def test_a_script_using_only_the_generated_client_does_the_everyday_work(
    live_server: Any, slurm_lab: dict[str, str], celery_eager: Any, make_user: Any, tmp_path: Path
) -> None:
    from inventory.models import Card, CardModel, Node, Port
    from jobs.models import ClusterAccount
    from jobs.sync import cluster_sync
    from monitoring.services.tokens import node_token_create
    from portal.services import api_token_create
    from tests.clusters import lab_cluster_create

    # given the Slurm lab as a cluster with its four nodes (4 cards, 3 QSFP-DD ports on the first)
    cluster = lab_cluster_create(slurm_lab, name="lab-client")
    model = CardModel.objects.create(vendor="Fake", name="fake-client", tdp_w=250)
    for name in ("node1", "node2", "node3", "node4"):
        node = Node.objects.create(
            hostname=f"{name}-client", slurm_name=name, cluster=cluster, role="compute"
        )
        for slot in range(4):
            Card.objects.create(node=node, card_model=model, slot=str(slot), gpu_uuid=f"GPU-{name}-{slot}")
    first = Node.objects.get(hostname="node1-client")
    for i in (1, 2, 3):
        Port.objects.create(node=first, name=f"QSFP{i}", kind="qsfp-dd", speed_gbps=800)
    assert cluster_sync(cluster).ok
    admin = make_user("ada", "admin")
    alice = make_user("alice", "researcher")
    ClusterAccount.objects.create(user=alice, cluster=cluster, username="alice")
    earlier = _finished_job_with_energy(cluster, first, alice)
    _t, admin_key = api_token_create(user=admin, name="client")
    _t, alice_key = api_token_create(user=alice, name="client")
    _t, node_key = node_token_create(node=first, user=admin)
    _generate(live_server.url, admin_key, tmp_path)

    # when the script runs with only the generated package on its path
    env = {
        **os.environ, "PYTHONPATH": str(tmp_path), "RP_URL": live_server.url, "RP_CLUSTER": cluster.name,
        "RP_ADMIN_TOKEN": admin_key, "RP_RESEARCHER_TOKEN": alice_key, "RP_NODE_TOKEN": node_key,
        "RP_NODE": first.hostname, "RP_CARD": "GPU-node1-0",
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )

    # then it saw everything it asked for, in the generated types
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["nodes"] == ["node1-client", "node2-client", "node3-client", "node4-client"]
    assert seen["node_clusters"] == ["lab-client"]
    assert seen["cable"] == ["QSFP1", "QSFP2", "dac"]
    status, errors = seen["used_port"]
    assert status == 400
    assert list(errors) == ["a_port"] and len(errors["a_port"]) == 1
    assert seen["action"] == ["submit", "succeeded"]
    assert seen["job"] == ["client-job", "alice", True]
    assert seen["ingest"] == [3, []]
    assert seen["series"] == [["GPU-node1-0", 40.0, 42.0]]
    assert seen["energy"] == [[earlier.job_id, 1, 1.0]]
