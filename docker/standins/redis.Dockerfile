# Stand-in for redis:7-bookworm: Debian's Redis 7, run as the redis user in /data.
FROM local/bookworm:base
RUN apt-get update -q && apt-get install -y -q redis-server redis-tools \
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
