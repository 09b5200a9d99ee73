# Stand-in for python:3.11-slim-bookworm: Debian's python3 (3.11) in a venv that is first on PATH, so
# `python` and `pip` are there as in the official image (which has them in /usr/local/bin).
FROM local/bookworm:base
ENV LANG=C.UTF-8 PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update -q && apt-get install -y -q python3 python3-venv ca-certificates netbase tzdata \
    && python3 -m venv /usr/local/python && rm -rf /var/lib/apt/lists/* /root/.cache \
    && python --version
CMD ["python3"]
