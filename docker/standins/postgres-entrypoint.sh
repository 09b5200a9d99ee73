#!/bin/bash
# The official image's contract, in short: on an empty $PGDATA, initdb (UTF8) with POSTGRES_USER
# (default postgres) and POSTGRES_PASSWORD (required, scram-sha-256 from other hosts), create
# POSTGRES_DB (default: the user's name); then run `postgres` as the postgres user, listening on all
# interfaces of the container.
set -euo pipefail
if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
    install -d -o postgres -g postgres -m 700 "$PGDATA"
    install -d -o postgres -g postgres -m 2775 /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ "$1" = postgres ]; then
    user=${POSTGRES_USER:-postgres}
    db=${POSTGRES_DB:-$user}
    if [ ! -s "$PGDATA/PG_VERSION" ]; then
        if [ -z "${POSTGRES_PASSWORD:-}" ]; then
            echo "postgres: POSTGRES_PASSWORD is not set (the database would have no password)" >&2
            exit 1
        fi
        pwfile=$(mktemp)
        printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
        initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
            --auth-local=trust --auth-host=scram-sha-256 >/dev/null
        rm -f "$pwfile"
        echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
        pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
        if [ "$db" != postgres ]; then
            psql -v ON_ERROR_STOP=1 -U "$user" -d postgres -q \
                -c "CREATE DATABASE \"$db\" OWNER \"$user\"" >/dev/null
        fi
        pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
        echo "postgres: initialised $PGDATA (database $db, user $user, UTF8)" >&2
    fi
    exec postgres -D "$PGDATA" -c listen_addresses='*' "${@:2}"
fi
exec "$@"
