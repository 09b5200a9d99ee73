"""schemathesis over the whole OpenAPI schema, as an admin and as a researcher, with every check.

Every operation of `/api/schema/` gets schema-valid requests (on a seeded row's id where the path
names one) and schema-breaking ones, sent to the real Django application in-process (WSGI) on the real
PostgreSQL, with a person's API token. A run fails on any 5xx and on any response that the schema
does not describe (status code, content type, headers, body), and on the other built-in checks
(negative data accepted, ignored authentication, unsupported methods, use after free, ...).

Bounded: SCHEMATHESIS_EXAMPLES examples per operation and mode (default 3); the figures (cases, 5xx,
failures per check) are printed, e.g. `pytest tests/portal/test_api_fuzz.py -s`.
Positive data may still be refused with a 400 when it names rows that do not exist or breaks a rule
the schema cannot say (a port already cabled): the body says why, and the check below accepts it.
"""

from __future__ import annotations

import collections
import os
import re
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "3"))
ROLES = {"admin": "admin", "researcher": "researcher"}


def _schema_dict(user: Any) -> dict[str, Any]:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    import json

    return json.loads(response.content)


def _seeded_ids(client: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The id of one row per list path (`/api/inventory/nodes/` -> 3), as the admin sees them."""
    ids: dict[str, Any] = {}
    for path, ops in schema["paths"].items():
        if "{" in path or "get" not in ops:
            continue
        response = client.get(path, {"limit": 1})
        if response.status_code != 200:
            continue
        body = response.json()
        rows = body.get("results") if isinstance(body, dict) else body
        if rows and isinstance(rows[0], dict) and "id" in rows[0]:
            ids[path] = rows[0]["id"]
    return ids


def _real_id(path: str, ids: dict[str, Any]) -> Any:
    match = re.match(r"^(.*/)\{id\}/", path)
    return ids.get(match.group(1)) if match else None


class _InTestTransaction:
    """The WSGI application with the test's database connection kept open between requests, as
    Django's test client keeps it (the request signals would close it, and the test's transaction)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: Any, start_response: Any) -> Any:
        from django.core import signals
        from django.db import close_old_connections, transaction

        signals.request_started.disconnect(close_old_connections)
        signals.request_finished.disconnect(close_old_connections)
        status: list[str] = []

        def start(code: str, headers: Any, *args: Any) -> Any:
            status.append(code)
            return start_response(code, headers, *args)

        savepoint = transaction.savepoint()  # a request that fails in the database spoils no later one
        try:
            response = self.app(environ, start)
            body = list(response)
            response.close()
            if status and status[0].startswith("5"):
                transaction.savepoint_rollback(savepoint)
            else:
                transaction.savepoint_commit(savepoint)
            return body
        finally:
            signals.request_started.connect(close_old_connections)
            signals.request_finished.connect(close_old_connections)


def _fuzz(schema_dict: dict[str, Any], token: str, ids: dict[str, Any]) -> dict[str, Any]:
    import schemathesis
    from django.core.wsgi import get_wsgi_application
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.core.failures import Failure

    config = schemathesis.Config.from_dict(
        {
            "checks": {
                "enabled": True,
                # a schema-valid body may name rows that do not exist: 400 with the reason is right;
                # ingest's text/plain body without ?format= (a pairing OpenAPI cannot require) is
                # the 415 the schema documents
                "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "415"]},
            }
        }
    )
    # remote write bodies are bytes (snappy protobuf): sent as generated, like octet-stream
    schemathesis.serializer.alias("application/x-protobuf", "application/octet-stream")
    schema = schemathesis.openapi.from_dict(schema_dict, config=config)
    schema.app = _InTestTransaction(get_wsgi_application())
    headers = {"Authorization": f"Token {token}"}
    figures: dict[str, Any] = {
        "cases": 0,
        "server_errors": 0,
        "failures": collections.Counter(),
        "details": [],
    }

    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: op.method.upper() == "DELETE")  # deletes last: the seeded ids stay valid
    for operation in operations:
        real = _real_id(operation.path, ids)
        # valid requests on a seeded row where the path names one (random ids would only find 404s)
        runs: list[tuple[GenerationMode, dict[str, Any] | None]] = [
            (GenerationMode.POSITIVE, None if real is None else {"id": real}),
            (GenerationMode.NEGATIVE, None),
        ]
        for mode, path_parameters in runs:
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

            @given(case=strategy)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def run(case: Any) -> None:
                figures["cases"] += 1
                response = case.call(headers=headers)
                if response.status_code >= 500:
                    figures["server_errors"] += 1
                case.validate_response(response, headers=headers)

            try:
                run()
            except (KeyboardInterrupt, SystemExit):
                raise
            except Unsatisfiable:
                if mode is GenerationMode.NEGATIVE:
                    continue  # nothing in the operation can be made invalid (no parameters, no body)
                raise
            except BaseException as exc:  # one failing example per operation and mode is reported
                failures = list(exc.exceptions) if isinstance(exc, BaseExceptionGroup) else [exc]
                for failure in failures:
                    name = (
                        type(failure).__name__ if isinstance(failure, Failure) else f"error:{type(failure)}"
                    )
                    figures["failures"][name] += 1
                    figures["details"].append(f"{operation.label} [{mode}]: {name}: {str(failure)[:1500]}")
    return figures


@pytest.mark.parametrize("role", list(ROLES))
def test_schemathesis_finds_no_server_error_and_no_schema_mismatch(role: str, make_user: Any) -> None:
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from portal.services import api_token_create

    # given the demo's three clusters, and a user of the role with a write-enabled API token
    call_command("seed_demo", verbosity=0)
    admin = make_user("fuzz-admin", "admin")
    user = admin if role == "admin" else make_user("fuzz-researcher", "researcher")
    _token, key = api_token_create(user=user, name="schemathesis")
    schema = _schema_dict(user)
    client = APIClient()
    client.force_authenticate(admin)
    ids = _seeded_ids(client, schema)

    # when schemathesis sends its cases to every operation
    figures = _fuzz(schema, key, ids)

    # then no answer was a server error or outside the schema
    print(
        f"\nschemathesis as {role}: {figures['cases']} cases, {figures['server_errors']} 5xx, "
        f"failures {dict(figures['failures']) or 0}"
    )
    print("\n\n".join(figures["details"]))
    assert figures["cases"] >= 250 * EXAMPLES  # about 140 operations x 2 modes
    assert figures["details"] == []
    assert figures["server_errors"] == 0
