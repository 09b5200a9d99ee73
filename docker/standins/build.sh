#!/usr/bin/env bash
# Build local stand-ins for the base images docker-compose.yml and the Dockerfiles name, for machines
# that reach Debian's package mirror but no image registry (CI, the compose test):
#   local/bookworm:base        debootstrap --variant=minbase bookworm, imported
#   debian:bookworm-slim       that base
#   python:3.11-slim-bookworm  Debian's python3 (3.11) in a venv on PATH, like the official image
#   postgres:15-bookworm       Debian's PostgreSQL 15; entrypoint honours POSTGRES_DB/USER/PASSWORD
#   redis:7-bookworm           Debian's Redis 7
# Each stand-in carries the label org.rackpilot.standin=<hash of this folder>: it is rebuilt only when
# missing or when that hash changed. A tag that exists WITHOUT the label is a real upstream image and is
# left alone. Needs root (debootstrap) and a running Docker daemon.
#   DOCKER (default docker), DEBIAN_MIRROR (default http://deb.debian.org/debian)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DOCKER=${DOCKER:-docker}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
LABEL=org.rackpilot.standin
hash=$(cd "$here" && cat build.sh ./*.Dockerfile ./*.sh | sha256sum | cut -c1-16)
log() { echo "standins: $*" >&2; }

label_of() {  # image -> its stand-in label, "upstream" if it has none, "" if the image is missing
    local out
    out=$("$DOCKER" image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null) || return 0
    case "$out" in ""|"<no value>") echo upstream ;; *) echo "$out" ;; esac
}

needs_build() {  # image -> 0 if it must be (re)built
    local have
    have=$(label_of "$1")
    if [ "$have" = upstream ]; then log "$1: upstream image present, kept"; return 1; fi
    if [ "$have" = "$hash" ]; then log "$1: up to date ($hash)"; return 1; fi
    return 0
}

# ---- the minbase root file system -------------------------------------------------------------
base=local/bookworm:base
if needs_build "$base"; then
    command -v debootstrap >/dev/null || { log "debootstrap missing: apt-get install debootstrap"; exit 1; }
    root=$(mktemp -d /var/tmp/rackpilot-bookworm.XXXXXX)
    trap 'rm -rf "$root"' EXIT
    log "debootstrap minbase bookworm from $MIRROR"
    debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$root.log" 2>&1 \
        || { tail -n 20 "$root.log" >&2; exit 1; }
    rm -f "$root.log"
    cat > "$root/etc/apt/sources.list" <<SRC
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
SRC
    # as the official slim images: no docs, man pages or apt caches
    cat > "$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
    echo 'APT::Install-Recommends "false";' > "$root/etc/apt/apt.conf.d/docker-no-recommends"
    cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
    rm -rf "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
        "$root"/usr/share/man/* "$root"/usr/share/locale/*
    tar -C "$root" -c . | "$DOCKER" import \
        --change "LABEL $LABEL=$hash" --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' - "$base" >/dev/null
    rm -rf "$root"; trap - EXIT
    log "$base: imported"
fi

build() {  # tag dockerfile
    if needs_build "$1"; then
        log "$1: building from $2"
        "$DOCKER" build -q --label "$LABEL=$hash" -t "$1" -f "$here/$2" "$here" >/dev/null
        log "$1: built"
    fi
}
build debian:bookworm-slim debian.Dockerfile
build python:3.11-slim-bookworm python.Dockerfile
build postgres:15-bookworm postgres.Dockerfile
build redis:7-bookworm redis.Dockerfile
