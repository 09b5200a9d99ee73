#!/bin/sh
# Install what the loopback Slurm lab needs on Debian 12 (run as root). Idempotent:
# apt-get update only runs when a package is missing.
set -eu

PKGS="slurm-wlm munge openssh-server sudo"

if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh: must run as root" >&2
    exit 1
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "slurm-lab: all packages present ($PKGS)"
    exit 0
fi

echo "slurm-lab: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
# Debian starts the packaged daemons; the lab runs its own private copies instead.
for svc in slurmctld slurmd munge ssh; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
        systemctl stop "$svc" || true
        systemctl disable "$svc" >/dev/null 2>&1 || true
    fi
done
echo "slurm-lab: installed"
