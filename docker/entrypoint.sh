#!/bin/sh
# One entry script for every portal container role (docker-compose.yml).
set -e
role=${1:-web}
case "$role" in
  web)
    python manage.py migrate --noinput
    python manage.py seed_demo
    if [ -n "${LAB_ENV_FILE:-}" ] && [ -f "$LAB_ENV_FILE" ]; then
      python manage.py cluster_from_lab_env "$LAB_ENV_FILE" --cluster h100-pod
    fi
    # --no-proxy-headers: the portal reads X-Forwarded-For itself, from PORTAL_TRUSTED_PROXIES only
    exec uvicorn portal.asgi:application --host 0.0.0.0 --port 8000 --workers "${WEB_WORKERS:-2}" --no-proxy-headers
    ;;
  worker)
    exec celery -A portal worker -Q default,actions,polls,telemetry --concurrency "${WORKER_CONCURRENCY:-4}" -l info
    ;;
  beat)
    exec celery -A portal beat -l info --schedule /tmp/celerybeat-schedule
    ;;
  feeder)
    exec python manage.py run_feeder --url "${FEEDER_URL:-http://web:8000}" --interval "${FEEDER_INTERVAL:-10}"
    ;;
  *)
    exec "$@"
    ;;
esac
