"""Shared fixtures: users of each role and API clients. Tests run on the real PostgreSQL and Redis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Django is imported inside the fixtures: the pure-Python suites (tests/cluster, tests/parsers)
# also run with `-p no:django`.
User = Any
APIClient = Any


@pytest.fixture(autouse=True)
def _clear_cache() -> Any:
    """A clean cache per test (login rate limits, locks). Skipped where Django is not set up:
    the pure-Python suites (tests/cluster, tests/parsers) also run with `-p no:django`."""
    from django.conf import settings

    if settings.configured:
        from django.core.cache import cache

        cache.clear()
    yield


@pytest.fixture(autouse=True)
def _default_language() -> Any:
    """Every test starts in the site's language: a request in another language (the test client runs
    LocaleMiddleware in this thread) must not leak into the next test's stored messages."""
    yield
    from django.conf import settings

    if settings.configured:
        from django.utils import translation

        translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture(autouse=True)
def _empty_unmanaged_tables(request: Any) -> Any:
    """Transactional tests end with a flush, which skips unmanaged tables: empty the raw samples
    table (partitioned, written with COPY) so that no later test sees their rows. Before that,
    after every test: the latest values written behind its batches land in it (a thread other
    than the test's may have ingested outside the test's transaction), and no session of the
    latest-value writer, or a side one of any thread, outlives it (the test database is dropped
    at the end)."""
    yield
    from django.conf import settings

    if settings.configured:
        from monitoring import storage

        storage.latest_writer_close()
        storage.side_connections_close_all()
    marker = request.node.get_closest_marker("django_db")
    transactional = bool(marker and marker.kwargs.get("transaction")) or bool(
        {"transactional_db", "live_server"} & set(request.fixturenames)
    )
    if not transactional:
        return
    from django.db import connection

    blocker = request.getfixturevalue("django_db_blocker")
    with blocker.unblock(), connection.cursor() as cur:
        cur.execute("TRUNCATE monitoring_sample")


@pytest.fixture(scope="session")
def slurm_lab() -> dict[str, str]:
    """The loopback Slurm lab's connection facts (SLURM_LAB_* from its env file), started if needed."""
    from tests.lab import ensure_lab

    return ensure_lab()


@pytest.fixture
def celery_eager() -> Any:
    """Celery tasks run in-process (on commit), without propagating, so eager retries run as retries.

    Set on the Celery app itself: its configuration is read once, so changing Django settings
    after the first task would not reach it.
    """
    from portal.celery import app

    old = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, False
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = old


@pytest.fixture
def make_user(db: Any) -> Callable[..., User]:
    from django.contrib.auth.models import User as DjangoUser

    from portal.roles import roles_sync, user_set_role

    roles_sync()

    def make(username: str, role: str | None = None, **extra: Any) -> User:
        user = DjangoUser.objects.create_user(username=username, password="pw-" + username, **extra)
        user_set_role(user, role)
        return user

    return make


@pytest.fixture
def admin_user(make_user: Callable[..., User]) -> User:
    return make_user("ada", "admin")


@pytest.fixture
def operator_user(make_user: Callable[..., User]) -> User:
    return make_user("otto", "operator")


@pytest.fixture
def researcher_user(make_user: Callable[..., User]) -> User:
    return make_user("alice", "researcher")


@pytest.fixture
def readonly_user(make_user: Callable[..., User]) -> User:
    """A user with view permissions on the inventory only (what a researcher has there)."""
    return make_user("rita", "researcher")


def _client(user: User | None) -> APIClient:
    from rest_framework.test import APIClient as DRFClient

    client = DRFClient()
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api(admin_user: User) -> APIClient:
    return _client(admin_user)


@pytest.fixture
def anon_api() -> APIClient:
    return _client(None)


@pytest.fixture
def api_as() -> Callable[[User | None], APIClient]:
    return _client


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """A test that uses the Slurm lab must say so (the ``slurm`` marker selects and deselects them):
    a missing marker is a collection error, not a surprise in a `-m "not slurm"` run."""
    unmarked = [
        item.nodeid
        for item in items
        if "slurm_lab" in getattr(item, "fixturenames", ()) and item.get_closest_marker("slurm") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "tests using the Slurm lab without @pytest.mark.slurm: " + ", ".join(unmarked)
        )
