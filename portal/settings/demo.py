"""The one-command demo: SQLite, in-memory channel layer, tasks in-process, the simulator backend.

Same code as production, other settings (README, "Try it").
"""

from portal.settings.base import *  # noqa: F403
from portal.settings.base import BASE_DIR, env

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
DEMO_DIR = BASE_DIR / ".demo"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": env("DEMO_DB", str(DEMO_DIR / "rackpilot.sqlite3")),
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        },
    }
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = "memory://localhost/"
# A retryable failure (an injected controller fault) must stay inside the action row, not reach the request.
CELERY_TASK_EAGER_PROPAGATES = False
PORTAL_CLUSTER_BACKEND_OVERRIDE = "simulator"
# DEBUG is off, and there is no collectstatic step: WhiteNoise serves straight from the app folders.
WHITENOISE_USE_FINDERS = True
STATIC_ROOT = DEMO_DIR / "static"
PORTAL_SYNC_INTERVAL = 5
# The console shows the demo's own story, not a line per eager task.
LOGGING = {**LOGGING, "loggers": {**LOGGING["loggers"], "celery.app.trace": {"level": "WARNING"}}}  # type: ignore[dict-item]  # noqa: F405

# A restarted demo continues the world its database remembers (jobs.backends.simulator_get).
PORTAL_SIMULATOR_CONTINUE = True
# A finished job's energy within seconds: computed every 10 s (portal/demo/simulation.py), once the
# telemetry after its end (every 5 s here) is in.
PORTAL_ENERGY_SETTLE_S = 10
# DEMO_JOB_TIME_SCALE=0.1 runs the demo's jobs ten times faster (tests).
PORTAL_DEMO_SIMULATION = {"job_time_scale": float(env("DEMO_JOB_TIME_SCALE", "1"))}
