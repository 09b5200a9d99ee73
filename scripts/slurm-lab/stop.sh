#!/bin/bash
# Stop the loopback Slurm lab started by start.sh (kills by pid files; waits until each
# process is gone or a zombie — zombies can linger ~2 s here, so kill -0 alone is not enough).
set -uo pipefail
DIR=${SLURM_LAB_DIR:-/tmp/rackpilot-slurm-lab}

alive() {
    local st
    st=$(awk '/^State:/{print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

stop_pid() {  # name pid
    local pid=$2
    alive "$pid" || return 0
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do alive "$pid" || return 0; sleep 0.1; done
    echo "slurm-lab: $1 ($pid) did not stop, sending KILL" >&2
    kill -9 "$pid" 2>/dev/null
    for _ in $(seq 20); do alive "$pid" || return 0; sleep 0.1; done
}

[ -d "$DIR/run" ] || { echo "slurm-lab: nothing to stop ($DIR)"; exit 0; }
for f in "$DIR"/run/sshd.pid "$DIR"/run/slurmd-*.pid "$DIR"/run/slurmctld.pid "$DIR"/run/munged.pid; do
    [ -s "$f" ] || continue
    stop_pid "$(basename "$f" .pid)" "$(cat "$f")"
    rm -f "$f"
done
# slurmstepd of still-running jobs belong to the lab too (their parent slurmd is gone)
for p in $(pgrep -x slurmstepd 2>/dev/null); do
    if tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q .; then
        if grep -qs "$DIR" "/proc/$p/environ" 2>/dev/null; then stop_pid slurmstepd "$p"; fi
    fi
done
echo "slurm-lab: stopped ($DIR)"
