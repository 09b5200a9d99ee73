#!/bin/sh
# As the official image: `redis-server ...` runs as redis, listening on every interface of the
# container (protected mode off: the container network is the boundary), data in /data.
set -e
if [ "${1#-}" != "$1" ]; then set -- redis-server "$@"; fi
if [ "$1" = redis-server ] && [ "$(id -u)" = 0 ]; then
    chown -R redis:redis /data
    shift
    exec setpriv --reuid=redis --regid=redis --init-groups redis-server --bind '* -::*' --protected-mode no "$@"
fi
exec "$@"
