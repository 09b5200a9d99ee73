# The portal image: web (ASGI), Celery worker, Celery beat and the telemetry feeder all run from it.
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=portal.settings.dev STATIC_ROOT=/app/staticfiles
RUN apt-get update -q && apt-get install -y -q --no-install-recommends openssh-client ipmitool \
    && rm -rf /var/lib/apt/lists/* && useradd --create-home --uid 1000 rackpilot
WORKDIR /app
COPY pyproject.toml README.md ./
COPY portal portal
COPY inventory inventory
COPY jobs jobs
COPY monitoring monitoring
RUN pip install .
COPY . .
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v0 && chown -R rackpilot /app
USER rackpilot
EXPOSE 8000
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["web"]
