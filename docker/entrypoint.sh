#!/bin/sh
# One entry script for every portal container role (docker-compose.yml); docker/healthcheck.sh checks
# the role recorded in /tmp/rackpilot-role.
set -e
role=${1:-web}
echo "$role" > /tmp/rackpilot-role
case "$role" in
  web)
    # migrate, seed, and point h100-pod at the Slurm whose env file LAB_ENV_FILE names (if it exists)
    python manage.py stack_prepare --lab-env "${LAB_ENV_FILE:-}" --cluster h100-pod
    # --no-proxy-headers: the portal reads X-Forwarded-For itself, from PORTAL_TRUSTED_PROXIES only
    exec uvicorn portal.asgi:application --host 0.0.0.0 --port 8000 --workers "${WEB_WORKERS:-2}" --timeout-worker-healthcheck 30 --no-proxy-headers
    ;;
  worker)
    export PORTAL_WORKER_HEARTBEAT_FILE=/tmp/rackpilot-worker.alive
    exec celery -A portal worker -Q default,actions,polls,telemetry --concurrency "${WORKER_CONCURRENCY:-4}" -l info
    ;;
  beat)
    export PORTAL_BEAT_HEARTBEAT_FILE=/tmp/rackpilot-beat.alive
    exec celery -A portal beat -l info --schedule /tmp/celerybeat-schedule --scheduler portal.beat:HeartbeatScheduler --max-interval 10
    ;;
  feeder)
    exec python manage.py run_feeder --url "${FEEDER_URL:-http://web:8000}" --interval "${FEEDER_INTERVAL:-10}" --heartbeat /tmp/rackpilot-feeder.alive
    ;;
  *)
    exec "$@"
    ;;
esac
