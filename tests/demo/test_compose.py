"""What can be checked of the compose stack without a Docker engine: the file parses, every service
command maps to an entry-script role whose commands exist, and the README documents every setting."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _entry_roles() -> dict[str, str]:
    """role -> its shell body, from docker/entrypoint.sh's case statement."""
    text = (ROOT / "docker" / "entrypoint.sh").read_text()
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s+([a-z]+)\)\n(.*?);;", text, re.M | re.S)}


def test_compose_has_the_whole_stack_with_health_checks_and_volumes():
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "slurm", "web", "worker", "beat", "feeder"}
    for name in ("postgres", "redis", "slurm", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    assert set(compose["volumes"]) == {"pgdata", "redisdata", "slurm-lab"}
    assert services["slurm"]["environment"]["SLURM_LAB_SSH_LISTEN"] == "0.0.0.0"
    assert services["slurm"]["environment"]["SLURM_LAB_NODE_COUNT"] == "2"
    assert services["web"]["depends_on"]["slurm"] == {"condition": "service_healthy"}


def test_every_portal_service_runs_an_entry_script_role():
    roles = _entry_roles()
    assert {"web", "worker", "beat", "feeder"} <= set(roles)
    for name, service in _compose()["services"].items():
        if service.get("build") == ".":
            assert service["command"][0] in roles, name
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/app/docker/entrypoint.sh"]' in dockerfile
    slurm = (ROOT / "docker" / "slurm.Dockerfile").read_text()
    assert "/opt/slurm-lab/start.sh" in slurm and (ROOT / "scripts" / "slurm-lab" / "start.sh").exists()


def test_every_command_the_roles_run_exists():
    from django.core.management import get_commands

    commands = get_commands()
    roles = _entry_roles()
    checked: dict[str, int] = dict.fromkeys(roles, 0)
    for role, body in roles.items():
        for line in body.splitlines():
            argv = shlex.split(line.strip().removeprefix("exec "))
            if argv[:2] == ["python", "manage.py"]:
                assert argv[2] in commands, (role, argv[2])
            elif argv[:1] == ["uvicorn"]:
                assert argv[1] == "portal.asgi:application"
            elif argv[:1] == ["celery"]:
                assert argv[1:3] == ["-A", "portal"]
            else:
                continue
            checked[role] += 1
    # every role the services run had at least one of its commands checked
    assert {r: n for r, n in checked.items() if r in {"web", "worker", "beat", "feeder"} and not n} == {}


def test_the_readme_documents_every_environment_variable():
    readme = (ROOT / "README.md").read_text()
    read = set()
    for path in (ROOT / "portal" / "settings").glob("*.py"):
        read |= set(re.findall(r'env(?:_bool|_int)?\("([A-Z][A-Z0-9_]+)"', path.read_text()))
    example = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    missing = sorted(v for v in read | example if f"`{v}`" not in readme)
    assert missing == []


def test_the_readme_starts_with_the_demo_and_the_test_commands():
    readme = (ROOT / "README.md").read_text()
    assert readme.index("./scripts/demo") < readme.index("./scripts/test") < readme.index("docker compose up")
    assert "## 中文快速上手" in readme
    images = re.findall(r"\]\((docs/img/[^)]+\.png)\)", readme)
    assert len(images) >= 1
    assert [i for i in images if not (ROOT / i).exists()] == []
