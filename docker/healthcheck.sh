#!/bin/sh
# Health check of a portal container, by role (the argument, else the role the entry script recorded):
#   web     GET /readyz answers 200 (database and Redis reachable from the web process)
#   worker  the worker's consumer (connected to the broker) touched its heartbeat file within 60 s
#   beat    the schedule loop touched its heartbeat file within the last 60 s
#   feeder  a round of posts that were all accepted ended within the last 3 feeder intervals
set -eu
role=${1:-$(cat /tmp/rackpilot-role 2>/dev/null || echo web)}
fresh() {  # file max-age-seconds
    [ -f "$1" ] || { echo "$1 missing" >&2; return 1; }
    age=$(( $(date +%s) - $(stat -c %Y "$1") ))
    [ "$age" -le "$2" ] || { echo "$1 is ${age} s old (limit $2 s)" >&2; return 1; }
}
case "$role" in
  web)
    exec python -c 'import sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:8000/readyz", timeout=5) as r:
    sys.exit(0 if r.status == 200 else 1)'
    ;;
  worker)
    fresh /tmp/rackpilot-worker.alive 60
    ;;
  beat)
    fresh /tmp/rackpilot-beat.alive 60
    ;;
  feeder)
    interval=${FEEDER_INTERVAL:-10}
    fresh /tmp/rackpilot-feeder.alive $(( ${interval%.*} * 3 + 15 ))
    ;;
  *)
    echo "healthcheck: unknown role $role" >&2; exit 1
    ;;
esac
