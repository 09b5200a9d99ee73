# The portal image: web (ASGI), Celery worker, Celery beat and the telemetry feeder all run from it
# (docker/entrypoint.sh picks the role). Build stages read the requirements and install them into a
# virtualenv; the final image gets that virtualenv (without pip), the code and the collected static
# files, runs as an unprivileged user and has no compiler, package caches or build files.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# The runtime requirements, read from pyproject.toml: the next stage's cache key is this list, so an
# edit elsewhere in pyproject.toml (tool settings) does not reinstall every dependency.
FROM ${PYTHON_IMAGE} AS requirements
WORKDIR /src
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt

FROM ${PYTHON_IMAGE} AS deps
# Optional PEM certificates for pip when the package index is reached through a TLS-inspecting proxy
# (docker build --build-arg BUILD_CA_CERTS="$(cat proxy-ca.crt)"). Used in this stage only: the final
# image neither contains nor trusts them.
ARG BUILD_CA_CERTS=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY --from=requirements /src/requirements.txt ./
RUN set -e; \
    if [ -n "$BUILD_CA_CERTS" ]; then \
        cat /etc/ssl/certs/ca-certificates.crt > /tmp/build-ca.pem; \
        printf '%s\n' "$BUILD_CA_CERTS" >> /tmp/build-ca.pem; \
        export PIP_CERT=/tmp/build-ca.pem; \
    fi; \
    python -m venv /opt/venv; \
    /opt/venv/bin/pip install -q --upgrade pip; \
    /opt/venv/bin/pip install -q -r requirements.txt; \
    /opt/venv/bin/pip uninstall -q -y pip; \
    find /opt/venv -name __pycache__ -prune -exec rm -rf {} +; \
    rm -f /tmp/build-ca.pem

FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=portal.settings.dev STATIC_ROOT=/app/staticfiles
# Runtime tools only: ssh for the Slurm login node and node collections, ipmitool for BMC power cycles.
RUN apt-get update -q \
    && apt-get install -y -q --no-install-recommends openssh-client ipmitool \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log \
    && useradd --create-home --uid 1000 --shell /usr/sbin/nologin rackpilot
COPY --from=deps /opt/venv /opt/venv
WORKDIR /app
COPY . .
# Static files are collected at build time (WhiteNoise serves them); the code stays root-owned and
# read-only for the user the portal runs as.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
    && python manage.py check --deploy --fail-level CRITICAL >/dev/null \
    && find /app -name __pycache__ -prune -exec rm -rf {} +
USER rackpilot
EXPOSE 8000
# The role's own check (docker/healthcheck.sh): readiness for web, a broker ping for the worker, a
# recent heartbeat for beat and the feeder. docker-compose.yml names the role explicitly.
HEALTHCHECK --interval=15s --timeout=10s --start-period=60s --retries=4 CMD ["/app/docker/healthcheck.sh"]
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["web"]
