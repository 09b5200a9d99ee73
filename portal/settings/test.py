"""Test settings: the real PostgreSQL and Redis (DATABASE_URL / REDIS_URL), fast hashing, eager nothing."""

from portal.settings.base import *  # noqa: F403
from portal.settings.base import DATABASES, env, env_bool

SECRET_KEY = "test-secret-key-not-for-production"
DEBUG = False
ALLOWED_HOSTS = ["*"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", "") or None}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# no background live-push thread in tests (tests/live flushes explicitly; servers started by tests set it)
PORTAL_LIVE_AUTOFLUSH = env_bool("PORTAL_LIVE_AUTOFLUSH", False)
