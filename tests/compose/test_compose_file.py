"""What the compose test relies on, checked without Docker: every service has a health check, the
file stays readable by docker-compose 1.29, only 127.0.0.1 is published, the bases are pinned tags
that docker/standins/build.sh can stand in for, and the image runs unprivileged with a health check."""

from __future__ import annotations

import re

import yaml

from tests.compose.stack import ROOT, SERVICES


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_has_a_health_check_and_restarts():
    services = _compose()["services"]
    assert tuple(services) == SERVICES
    for name, service in services.items():
        assert service["healthcheck"]["test"][0] in {"CMD", "CMD-SHELL"}, name
        assert service["restart"] == "unless-stopped", name
    portal = [n for n, s in services.items() if s.get("image") == "rackpilot:latest"]
    assert portal == ["web", "worker", "beat", "feeder"]
    for name in portal:
        assert services[name]["healthcheck"]["test"] == ["CMD", "/app/docker/healthcheck.sh", name]
    assert services["feeder"]["depends_on"] == {"web": {"condition": "service_healthy"}}


def test_the_file_is_compose_v1_compatible_and_publishes_on_loopback_only():
    compose = _compose()
    assert "name" not in compose and "version" not in compose  # 1.29 rejects `name:`
    published = {n: s["ports"] for n, s in compose["services"].items() if "ports" in s}
    assert published == {"web": ["127.0.0.1:${RACKPILOT_PORT:-8000}:8000"]}
    env = compose["services"]["web"]["environment"]
    assert env["ALLOWED_HOSTS"] == "${ALLOWED_HOSTS:-127.0.0.1,localhost},web,127.0.0.1"


def test_base_images_are_pinned_tags_with_stand_ins():
    compose_images = {s["image"] for s in _compose()["services"].values()}
    dockerfiles = (ROOT / "Dockerfile").read_text() + (ROOT / "docker" / "slurm.Dockerfile").read_text()
    bases = set(re.findall(r"^ARG PYTHON_IMAGE=(\S+)$|^FROM (\S+)", dockerfiles, re.M))
    named = {a or b for a, b in bases} - {"${PYTHON_IMAGE}"}
    assert named == {"python:3.11-slim-bookworm", "debian:bookworm-slim"}
    external = (compose_images | named) - {"rackpilot:latest", "rackpilot-slurm:latest"}
    assert external == {
        "python:3.11-slim-bookworm",
        "debian:bookworm-slim",
        "postgres:15-bookworm",
        "redis:7-bookworm",
    }
    standins = (ROOT / "docker" / "standins" / "build.sh").read_text()
    for image in external:
        assert not image.endswith(":latest")
        assert re.search(rf"^build {re.escape(image)} \w+\.Dockerfile$", standins, re.M), image


def test_the_image_runs_unprivileged_with_a_health_check_and_no_build_context_secrets():
    dockerfile = (ROOT / "Dockerfile").read_text()
    final = dockerfile[dockerfile.rindex("\nFROM ") :]
    assert "\nUSER rackpilot\n" in final
    assert (
        'HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=4 CMD ["/app/docker/healthcheck.sh"]'
        in final
    )
    assert "collectstatic" in final and "BUILD_CA_CERTS" not in final and "pip install" not in final
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".git", ".venv", ".env", "/tests", "**/__pycache__"):
        assert path in ignored
