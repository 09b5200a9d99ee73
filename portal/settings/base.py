"""Settings shared by every environment. Everything a deployment changes comes from the environment."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

django_stubs_ext.monkeypatch()  # generic ModelForm[...] etc. at run time

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


SECRET_KEY = env("SECRET_KEY", "dev-insecure-change-me-rackpilot")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in env("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "channels",
    "portal",
    "portal.live",
    "inventory",
    "jobs",
    "monitoring",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "portal.security.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "portal.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "portal.context_processors.portal",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rackpilot"),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_POOL", False):
    DATABASES["default"]["OPTIONS"] = {"pool": {"min_size": 1, "max_size": env_int("DB_POOL_MAX", 10)}}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL", "redis://127.0.0.1:6379/0")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Plug in LDAP or OIDC by prepending their backend here (README, "Authentication").
AUTHENTICATION_BACKENDS = [
    b.strip()
    for b in env("PORTAL_AUTH_BACKENDS", "django.contrib.auth.backends.ModelBackend").split(",")
    if b.strip()
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
# one date-time and number format per language (portal/formats/<lang>/formats.py)
FORMAT_MODULE_PATH = ["portal.formats"]
# the currency of purchase costs, list prices and energy cost (ISO 4217 code)
PORTAL_CURRENCY = env("PORTAL_CURRENCY", "USD")

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT", str(BASE_DIR / "staticfiles")))

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"

# Production behind https (README, "Configuration"): all off by default so that the demo and a plain
# http://127.0.0.1 deployment work; the compose .env.example turns them on.
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # container health checks speak plain http
# "HTTP_X_FORWARDED_PROTO,https": the TLS-terminating proxy's header that marks a request as https.
# Set it only behind a proxy that always sets (or strips) that header.
_ssl_header = [p.strip() for p in env("SECURE_PROXY_SSL_HEADER", "").split(",") if p.strip()]
SECURE_PROXY_SSL_HEADER = (_ssl_header[0], _ssl_header[1]) if len(_ssl_header) == 2 else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Content-Security-Policy and Permissions-Policy of every response (portal.security).
PORTAL_CSP = env(
    "PORTAL_CSP",
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)
PORTAL_PERMISSIONS_POLICY = env(
    "PORTAL_PERMISSIONS_POLICY",
    "accelerometer=(), autoplay=(), camera=(), clipboard-read=(), display-capture=(), "
    "encrypted-media=(), fullscreen=(self), geolocation=(), gyroscope=(), hid=(), magnetometer=(), "
    "microphone=(), midi=(), payment=(), publickey-credentials-get=(), screen-wake-lock=(), serial=(), "
    "usb=(), xr-spatial-tracking=()",
)

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
    }
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["portal.api.permissions.ModelPermissions"],
    # JSON only: the API's HTML face is Swagger UI (/api/docs/), which runs under the CSP. DRF's
    # browsable renderer is off deliberately: its forms list every related row (thousands of nodes,
    # cards, ports) and its templates carry inline styles the CSP refuses.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "portal.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "portal.api.filtering.FilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.api.exceptions.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Rackpilot API",
    "DESCRIPTION": "Inventory, topology, power, Slurm jobs and telemetry of AI compute clusters.",
    "VERSION": "2.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],  # the schema maps the cluster
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # vendored by drf-spectacular-sidecar: no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "portal.api.schema.postprocess_empty_query_values",
        "portal.api.schema.infrastructure_fields_optional",
    ],
    # the contract is JSON
    "PARSER_WHITELIST": ["rest_framework.parsers.JSONParser"],
    # one stable name per choice set (drf-spectacular would otherwise hash colliding `kind` fields)
    "ENUM_NAME_OVERRIDES": {
        "ActionKindEnum": "jobs.models.ActionKind",
        "ActionStatusEnum": "jobs.models.ActionStatus",
        "AuditActionEnum": "portal.models.AuditEntry.Action",
        "AirflowEnum": "inventory.choices.Airflow",
        "PortKindEnum": "inventory.choices.PortKind",
        "CableKindEnum": "inventory.choices.CableKind",
        "PowerConnectorEnum": "inventory.choices.LeadKind",
        "SeverityEnum": "monitoring.models.Event.Severity",
        "MetricEnum": "monitoring.models.METRIC_CHOICES",
        "CheckStatusEnum": "inventory.api.shapes.CheckStatus",
        "FindingSeverityEnum": "inventory.api.shapes.FindingSeverity",
        "ReadinessStatusEnum": "inventory.models.readiness.ReadinessStatus",
        "ReadinessKeyEnum": "inventory.models.readiness.ReadinessKey",
        "ReadinessSourceEnum": "inventory.models.readiness.ReadinessCheck.Source",
        "CardStatusEnum": "inventory.choices.CardStatus",
        "BurnInStatusEnum": "jobs.models.BurnInStatus",
        "BurnInVerdictEnum": "jobs.models.BurnInVerdict",
        "BurnInCriterionStatusEnum": "jobs.burnin.criteria.STATUSES",
        "BurnInCriterionKeyEnum": "jobs.burnin.criteria.KEYS",
        "NodeRoleEnum": "inventory.choices.NodeRole",
    },
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "max_connections": 500}],
            # pub/sub channels ignore the Redis DB number: deployments sharing a Redis set their own
            "prefix": env("PORTAL_CHANNEL_PREFIX", "asgi"),
        },
    }
}

# Celery: the database row is the source of truth, Celery is transport (STYLE.md).
CELERY_BROKER_URL = env("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "jobs.tasks.action_execute_task": {"queue": "actions"},
    "jobs.tasks.*": {"queue": "polls"},
    "monitoring.tasks.*": {"queue": "telemetry"},
}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 840)
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "jobs-cluster-sync": {
        "task": "jobs.tasks.cluster_sync_all_task",
        "schedule": float(env_int("PORTAL_SYNC_INTERVAL", 15)),
        "options": {"queue": "polls", "expires": env_int("PORTAL_SYNC_INTERVAL", 15)},
    },
    # running actions whose worker stopped renewing the lease are enqueued again (jobs.leases)
    # runbook runs (jobs.runbooks) are moved on: waits judged, steps of lost workers picked up
    "jobs-runbooks": {
        "task": "jobs.tasks.runbook_runs_advance_task",
        "schedule": 10.0,
        "options": {"queue": "polls", "expires": 10},
    },
    "jobs-action-leases": {
        "task": "jobs.tasks.action_leases_recover_task",
        "schedule": float(env_int("PORTAL_ACTION_LEASE_CHECK_S", 10)),
        "options": {"queue": "polls", "expires": env_int("PORTAL_ACTION_LEASE_CHECK_S", 10)},
    },
    # burn-in runs follow their Slurm job and hold the cards' telemetry against their criteria
    "jobs-burnin-advance": {
        "task": "jobs.tasks.burnin_advance_all_task",
        "schedule": 30.0,
        "options": {"queue": "polls", "expires": 30},
    },
}
CELERY_BEAT_SCHEDULE.update(
    {
        "telemetry-pull": {"task": "monitoring.tasks.telemetry_pull_all_task", "schedule": 30.0},
        "telemetry-rollup": {"task": "monitoring.tasks.telemetry_rollup_task", "schedule": 60.0},
        "telemetry-maintain": {"task": "monitoring.tasks.telemetry_maintain_task", "schedule": 3600.0},
        "telemetry-energy": {"task": "monitoring.tasks.job_energy_pending_task", "schedule": 300.0},
        # health checks (monitoring.health): judged from what is stored; check commands over SSH
        "health-evaluate": {"task": "monitoring.tasks.health_evaluate_task", "schedule": 30.0},
        "health-probe": {"task": "monitoring.tasks.health_probe_all_task", "schedule": 120.0},
    }
)

# Rackpilot's own settings.
PORTAL_ENCRYPTION_KEY = env("PORTAL_ENCRYPTION_KEY", "")  # Fernet key; derived from SECRET_KEY if empty
PORTAL_CLUSTER_BACKEND_OVERRIDE = env("PORTAL_CLUSTER_BACKEND", "")  # force 'simulator' for demos
PORTAL_POWER_HEADROOM_PCT = env_int("PORTAL_POWER_HEADROOM_PCT", 20)
# login rate limit: failed logins per IP and per username within the window
PORTAL_LOGIN_ATTEMPTS = env_int("PORTAL_LOGIN_ATTEMPTS", 5)
PORTAL_LOGIN_WINDOW_S = env_int("PORTAL_LOGIN_WINDOW_S", 300)
# proxies (addresses or CIDR blocks) whose X-Forwarded-For is believed for the per-IP login limit;
# none by default: the peer address counts
PORTAL_TRUSTED_PROXIES = [p.strip() for p in env("PORTAL_TRUSTED_PROXIES", "").split(",") if p.strip()]
for _proxy in PORTAL_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(
            f"PORTAL_TRUSTED_PROXIES: {_proxy!r} is not an address or CIDR block"
        ) from _exc
# where power budgets read measured draw (fresh telemetry) to show beside the nameplate budget
PORTAL_MEASURED_POWER = "monitoring.overview.measured_power"
PORTAL_RESEARCHERS_SEE_ALL_JOBS = env_bool("PORTAL_RESEARCHERS_SEE_ALL_JOBS", False)
# Live dashboards (portal/live): push at most every N ms per process; layer watchdog period.
PORTAL_LIVE_FLUSH_MS = env_int("PORTAL_LIVE_FLUSH_MS", 200)
PORTAL_LIVE_AUTOFLUSH = env_bool("PORTAL_LIVE_AUTOFLUSH", True)  # the background flusher thread
PORTAL_LIVE_WATCHDOG_S = env_int("PORTAL_LIVE_WATCHDOG_S", 2)
PORTAL_LIVE_OVERVIEW_REFRESH_S = env_int("PORTAL_LIVE_OVERVIEW_REFRESH_S", 30)
PORTAL_LIVE_BENCH = env_bool("PORTAL_LIVE_BENCH", False)  # adds the bare fan-out route of the benchmark
PORTAL_SYNC_INTERVAL = env_int("PORTAL_SYNC_INTERVAL", 15)  # seconds between Slurm syncs (beat)
PORTAL_ACTION_MAX_ATTEMPTS = env_int("PORTAL_ACTION_MAX_ATTEMPTS", 5)  # retryable failures before "failed"
# a running action's worker renews its lease every HEARTBEAT_S; LEASE_S without one = worker lost
PORTAL_ACTION_LEASE_S = env_int("PORTAL_ACTION_LEASE_S", 30)
PORTAL_ACTION_HEARTBEAT_S = env_int("PORTAL_ACTION_HEARTBEAT_S", 10)
PORTAL_ACTION_LEASE_CHECK_S = env_int("PORTAL_ACTION_LEASE_CHECK_S", 10)  # beat: expired leases
PORTAL_ACTION_RETRY_BACKOFF = env_int(
    "PORTAL_ACTION_RETRY_BACKOFF", 5
)  # seconds, doubled per retry (max 300)
PORTAL_SSH_CONNECT_TIMEOUT = env_int("PORTAL_SSH_CONNECT_TIMEOUT", 10)
PORTAL_SLURM_COMMAND_TIMEOUT = env_int("PORTAL_SLURM_COMMAND_TIMEOUT", 60)
PORTAL_SIMULATOR_REALTIME = env_bool(
    "PORTAL_SIMULATOR_REALTIME", True
)  # demo simulator follows the wall clock
# a new simulator continues what the database holds for its cluster (jobs.backends; on in the demo)
PORTAL_SIMULATOR_CONTINUE = env_bool("PORTAL_SIMULATOR_CONTINUE", False)

# Telemetry (monitoring app): retention per resolution, partitions, collection, energy and cost.
PORTAL_TELEMETRY_RAW_RETENTION_DAYS = env_int("PORTAL_TELEMETRY_RAW_RETENTION_DAYS", 7)
PORTAL_TELEMETRY_1M_RETENTION_DAYS = env_int("PORTAL_TELEMETRY_1M_RETENTION_DAYS", 90)
PORTAL_TELEMETRY_1H_RETENTION_DAYS = env_int("PORTAL_TELEMETRY_1H_RETENTION_DAYS", 0)  # 0 = forever
PORTAL_TELEMETRY_PARTITIONS_AHEAD_DAYS = env_int("PORTAL_TELEMETRY_PARTITIONS_AHEAD_DAYS", 3)
PORTAL_TELEMETRY_MAX_FUTURE_S = env_int("PORTAL_TELEMETRY_MAX_FUTURE_S", 3600)
# largest ingest body (bytes); larger ones get 413 with the limit
PORTAL_TELEMETRY_MAX_BODY_BYTES = env_int("PORTAL_TELEMETRY_MAX_BODY_BYTES", 8 * 1024 * 1024)
PORTAL_TELEMETRY_PULL_INTERVAL_S = env_int("PORTAL_TELEMETRY_PULL_INTERVAL_S", 30)
PORTAL_TELEMETRY_PULL_CONCURRENCY = env_int("PORTAL_TELEMETRY_PULL_CONCURRENCY", 16)
PORTAL_TELEMETRY_PULL_TIMEOUT_S = env_int("PORTAL_TELEMETRY_PULL_TIMEOUT_S", 20)
# argv put before each tool's argv on the login host to reach a node; {host} = node hostname.
PORTAL_TELEMETRY_NODE_PREFIX = [
    a
    for a in env("PORTAL_TELEMETRY_NODE_PREFIX", "ssh -o BatchMode=yes -o ConnectTimeout=5 {host}").split()
    if a
]
# card resets of runbooks run as root on the node (sudo -n there); off where the service account
# itself may reset (the loopback lab's stand-in tool)
PORTAL_CARD_RESET_SUDO = env_bool("PORTAL_CARD_RESET_SUDO", True)
PORTAL_TELEMETRY_PULL_TOOLS = [
    t.strip()
    for t in env("PORTAL_TELEMETRY_PULL_TOOLS", "nvidia-smi,tt-smi,ipmitool,dcgm-exporter").split(",")
    if t.strip()
]
PORTAL_TELEMETRY_DCGM_PORT = env_int("PORTAL_TELEMETRY_DCGM_PORT", 9400)
PORTAL_TELEMETRY_ALERT_FROM_EMAIL = env("PORTAL_TELEMETRY_ALERT_FROM_EMAIL", "rackpilot@localhost")
PORTAL_ENERGY_TARIFF_PER_KWH = env("PORTAL_ENERGY_TARIFF_PER_KWH", "0.30")  # currency per kWh
PORTAL_DEPRECIATION_MONTHS = env_int("PORTAL_DEPRECIATION_MONTHS", 36)
PORTAL_ENERGY_MAX_GAP_FACTOR = env_int("PORTAL_ENERGY_MAX_GAP_FACTOR", 3)  # gaps > N x interval are unknown
PORTAL_ENERGY_MAX_GAP_S = env_int("PORTAL_ENERGY_MAX_GAP_S", 120)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
