"""A script written only against the client generated from Rackpilot's OpenAPI schema.

tests/portal/test_generated_client.py generates the client (`rackpilot_client`, openapi-python-client)
into a temporary directory and runs this file with it on the path; no request here is written by hand.
Inputs come from the environment; it prints one JSON object with what it saw, and exits non-zero on
any surprise.
"""

from __future__ import annotations

import datetime
import json
import os
import time

from rackpilot_client import AuthenticatedClient
from rackpilot_client.api.inventory import inventory_cables_create, inventory_nodes_list, inventory_ports_list
from rackpilot_client.api.jobs import jobs_actions_create, jobs_actions_retrieve, jobs_jobs_retrieve
from rackpilot_client.api.monitoring import (
    monitoring_energy_list,
    monitoring_ingest_create,
    monitoring_series_retrieve,
)
from rackpilot_client.models import (
    Action,
    ActionKindEnum,
    ActionRequestRequest,
    ActionRequestRequestParams,
    ActionStatusEnum,
    Cable,
    CableKindEnum,
    CableRequest,
    CableRequestValidationError,
    EnergyRow,
    IngestReport,
    Job,
    MetricEnum,
    MonitoringEnergyListGroupBy,
    PaginatedNodeList,
    PaginatedPortList,
    SampleRequest,
    SeriesResult,
)

URL = os.environ["RP_URL"]
admin = AuthenticatedClient(base_url=URL, token=os.environ["RP_ADMIN_TOKEN"], prefix="Token")
researcher = AuthenticatedClient(base_url=URL, token=os.environ["RP_RESEARCHER_TOKEN"], prefix="Token")
agent = AuthenticatedClient(base_url=URL, token=os.environ["RP_NODE_TOKEN"], prefix="Token")
CLUSTER = os.environ["RP_CLUSTER"]
out: dict[str, object] = {}

# 1. nodes of one cluster (a filter)
nodes = inventory_nodes_list.sync(client=admin, cluster_name=CLUSTER, limit=100)
assert isinstance(nodes, PaginatedNodeList), nodes
out["nodes"] = sorted(n.hostname for n in nodes.results)
out["node_clusters"] = sorted({n.cluster.display for n in nodes.results})
first = next(n for n in nodes.results if n.hostname == os.environ["RP_NODE"])
cluster_id = first.cluster.id

# 2. a cable between two free ports, then the typed 400 for a port already used
ports = inventory_ports_list.sync(client=admin, node=first.id, limit=100)
assert isinstance(ports, PaginatedPortList), ports
free = sorted((p for p in ports.results if p.cable is None), key=lambda p: p.name)
created = inventory_cables_create.sync(
    client=admin,
    body=CableRequest(a_port=free[0].id, b_port=free[1].id, kind=CableKindEnum.DAC, label="c1"),
)
assert isinstance(created, Cable), created
out["cable"] = [created.a_port.display, created.b_port.display, created.kind.value]
again = inventory_cables_create.sync_detailed(
    client=admin, body=CableRequest(a_port=free[0].id, b_port=free[2].id, kind=CableKindEnum.DAC)
)
assert isinstance(again.parsed, CableRequestValidationError), again
out["used_port"] = [int(again.status_code), again.parsed.to_dict()]

# 3. submit a job as the researcher and follow its action to the end
params = ActionRequestRequestParams.from_dict(
    {
        "name": "client-job",
        "script": "#!/bin/bash\nhostname\n",
        "gpus": 1,
        "time_limit_minutes": 5,
        "work_dir": "/tmp",
    }
)
action = jobs_actions_create.sync(
    client=researcher,
    body=ActionRequestRequest(kind=ActionKindEnum.SUBMIT, cluster=cluster_id, params=params),
)
assert isinstance(action, Action), action
deadline = time.monotonic() + 60
while action.status in (ActionStatusEnum.PENDING, ActionStatusEnum.RUNNING) and time.monotonic() < deadline:
    time.sleep(0.5)
    action = jobs_actions_retrieve.sync(action.id, client=researcher)
    assert isinstance(action, Action), action
out["action"] = [action.kind.value, action.status.value]
assert action.job is not None, action.to_dict()
job = jobs_jobs_retrieve.sync(action.job.id, client=researcher)
assert isinstance(job, Job), job
out["job"] = [job.name, job.user, job.job_id > 0]

# 4. telemetry from the node's agent, with the node's push token
now = datetime.datetime.now(datetime.UTC)
samples = [
    SampleRequest(
        node=first.hostname,
        metric=MetricEnum.TEMPERATURE_C,
        value=40.0 + i,
        card=os.environ["RP_CARD"],
        ts=now - datetime.timedelta(seconds=3 - i),
    )
    for i in range(3)
]
report = monitoring_ingest_create.sync(client=agent, body=samples)
assert isinstance(report, IngestReport), report
out["ingest"] = [report.stored, report.problems]

# 5. the series just sent, and the energy of a finished job
series = monitoring_series_retrieve.sync(
    client=admin, metric="temperature_c", node=first.hostname, from_="now-1h", step=30
)
assert isinstance(series, SeriesResult), series
# [card, lowest min, highest max] from the raw samples (the three may straddle a step)
out["series"] = [
    [s.card_ref, min(p[1] for p in s.points), max(p[3] for p in s.points)] for s in series.series
]
energy = monitoring_energy_list.sync(client=researcher, group_by=MonitoringEnergyListGroupBy.JOB)
assert isinstance(energy, list) and all(isinstance(r, EnergyRow) for r in energy), energy
out["energy"] = [[r.job, r.jobs, round(r.energy_kwh, 3)] for r in energy]

print(json.dumps(out))
