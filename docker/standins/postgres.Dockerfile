# Stand-in for postgres:15-bookworm: Debian's PostgreSQL 15, with an entrypoint that honours the
# official image's POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB and PGDATA on first start.
FROM local/bookworm:base
ENV LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data \
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /etc/postgresql-common/createcluster.d \
    && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/docker.conf \
    && apt-get update -q && apt-get install -y -q postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 2775 /var/run/postgresql \
    && install -d -o postgres -g postgres -m 700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
