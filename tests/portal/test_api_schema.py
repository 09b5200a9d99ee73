"""The OpenAPI schema itself: generated without a warning, valid, and describing what scripts rely on."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
import yaml


@pytest.fixture(scope="module")
def schema(tmp_path_factory: Any, django_db_blocker: Any) -> dict[str, Any]:
    """`manage.py spectacular --validate --fail-on-warn`: it raises on any warning or error."""
    from django.core.management import call_command

    out = tmp_path_factory.mktemp("schema") / "schema.yml"
    stderr = StringIO()
    with django_db_blocker.unblock():
        call_command("spectacular", "--file", str(out), "--validate", "--fail-on-warn", stderr=stderr)
    assert stderr.getvalue() == ""
    return dict(yaml.safe_load(out.read_text()))


def test_the_schema_generates_without_a_warning_or_error_and_validates(schema: dict[str, Any]) -> None:
    # when the schema is generated with --fail-on-warn --validate (the fixture), then nothing is printed
    assert schema["info"]["title"] == "Rackpilot API"
    assert len(schema["paths"]) >= 69


def test_every_operation_declares_its_authentication_and_error_answers(schema: dict[str, Any]) -> None:
    schemes = schema["components"]["securitySchemes"]
    assert sorted(schemes) == ["cookieAuth", "nodeTokenAuth", "pushTokenAuth", "tokenAuth"]
    assert schemes["tokenAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": schemes["tokenAuth"]["description"],
    }
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            assert {"tokenAuth": []} in op["security"], (method, path)
            assert {"401", "403"} <= set(op["responses"]), (method, path)
            if "{" in path:
                assert "404" in op["responses"], (method, path)
            if method in ("post", "put", "patch", "delete"):
                assert "400" in op["responses"], (method, path)
    ingest = schema["paths"]["/api/monitoring/ingest/"]["post"]
    assert ingest["security"] == [{"nodeTokenAuth": []}, {"tokenAuth": []}, {"cookieAuth": []}]
    assert sorted(ingest["responses"]) == ["202", "400", "401", "403", "413", "415"]
    assert sorted(ingest["requestBody"]["content"]) == ["application/json", "text/plain"]
    remote_write = schema["paths"]["/api/monitoring/remote-write/"]["post"]
    assert remote_write["security"] == [{"pushTokenAuth": []}, {"tokenAuth": []}]
    assert sorted(remote_write["responses"]) == ["202", "400", "401", "403", "413", "415"]
    assert remote_write["requestBody"]["content"] == {
        "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}
    }


def test_related_objects_are_written_by_id_and_read_as_brief_objects(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    assert components["CableRequest"]["properties"]["a_port"] == {"type": "integer"}
    assert components["Cable"]["properties"]["a_port"] == {"$ref": "#/components/schemas/CableEnd"}
    assert components["NodeRequest"]["properties"]["cluster"] == {"type": "integer", "nullable": True}
    assert components["Node"]["properties"]["cluster"] == {
        "allOf": [{"$ref": "#/components/schemas/Brief"}],
        "nullable": True,
    }
    assert sorted(components["Brief"]["required"]) == ["display", "id", "url"]
    # one name per choice set, no hashed names
    enums = sorted(name for name in components if name.endswith("Enum"))
    assert not [name for name in enums if any(ch.isdigit() for ch in name)], enums
    assert {"ActionKindEnum", "CableKindEnum", "PortKindEnum", "PowerConnectorEnum", "AirflowEnum"} <= set(
        enums
    )
    assert "MinAirflowEnum" not in enums


@pytest.mark.django_db
def test_the_docs_page_and_the_schema_need_a_login(client: Any, admin_user: Any) -> None:
    assert client.get("/api/schema/").status_code == 401
    client.force_login(admin_user)
    page = client.get("/api/docs/")
    assert page.status_code == 200
    assert b"swagger-ui" in page.content
    assert client.get("/api/schema/?format=json").json()["openapi"].startswith("3.")
