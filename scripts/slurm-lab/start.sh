#!/bin/bash
# Start a private Slurm cluster on loopback: munged, slurmctld, 4 slurmd (node[1-4],
# 4 fake GPUs each) and a second sshd for the portal's service account.
#
#   SLURM_LAB_DIR       state dir            (default /tmp/rackpilot-slurm-lab)
#   SLURM_LAB_SSH_PORT  sshd port            (default 2222)
#   SLURM_LAB_CTLD_PORT slurmctld port       (default 16817; slurmd use +4..+7)
#   SLURM_LAB_SSH_LISTEN sshd listen address (default 127.0.0.1; docker compose sets 0.0.0.0, and then
#                        the env names this host, $(hostname), as the login host to dial)
#   SLURM_LAB_NODE_COUNT compute nodes, 1-4  (default 4; docker compose sets 2)
#   SLURM_LAB_SSH_KEY_OWNER uid that gets the service account's client key (default root; the compose
#                        image sets the portal's uid so its containers can read the key from the volume)
#
# Idempotent: if everything is already running and healthy it only prints the env.
# Writes $SLURM_LAB_DIR/env (export lines) and prints it on success.
# Run as root on Debian 12 after install.sh.
set -euo pipefail

DIR=${SLURM_LAB_DIR:-/tmp/rackpilot-slurm-lab}
SSH_PORT=${SLURM_LAB_SSH_PORT:-2222}
CTLD_PORT=${SLURM_LAB_CTLD_PORT:-16817}
SVC=rackpilot
RESEARCHERS="alice bob"
HOST=$(hostname -s)
CONF=$DIR/etc/slurm.conf
SSH_LISTEN=${SLURM_LAB_SSH_LISTEN:-127.0.0.1}
NODE_COUNT=${SLURM_LAB_NODE_COUNT:-4}
case "$NODE_COUNT" in [1-4]) ;; *) echo "slurm-lab: ERROR: SLURM_LAB_NODE_COUNT must be 1-4" >&2; exit 1 ;; esac
NODES=$(seq -f 'node%g' -s ' ' 1 "$NODE_COUNT")
NODE_LIST="node[1-$NODE_COUNT]"
if [ "$SSH_LISTEN" = 127.0.0.1 ]; then SSH_HOST=127.0.0.1; else SSH_HOST=$(hostname); fi
export SLURM_CONF=$CONF

die() { echo "slurm-lab: ERROR: $*" >&2; exit 1; }
log() { echo "slurm-lab: $*" >&2; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
for b in slurmctld slurmd munged sshd sudo visudo sinfo; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || die "$b not found: run scripts/slurm-lab/install.sh"
done

# ---- is it already up? ---------------------------------------------------------
pid_alive() {  # pidfile -> 0 if the process runs (zombies do not count)
    local f=$1 pid st
    [ -s "$f" ] || return 1
    pid=$(cat "$f" 2>/dev/null) || return 1
    [ -r "/proc/$pid/status" ] || return 1
    st=$(awk '/^State:/{print $2}' "/proc/$pid/status" 2>/dev/null) || return 1
    [ "$st" != "Z" ]
}

nodes_ready() {  # all nodes registered and responding (any non-* state)
    local out
    out=$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
    [ "$(echo "$out" | sort -u | grep -cE '^node[1-4] ')" -eq "$NODE_COUNT" ] || return 1
    ! echo "$out" | grep -qE '(\*|unknown|not_responding|down|future)'
}

nodes_idle() {
    local out
    out=$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null) || return 1
    [ "$(echo "$out" | sort -u | grep -cE '^node[1-4] idle$')" -eq "$NODE_COUNT" ]
}

ssh_ok() {
    timeout 10 ssh -o BatchMode=yes -o UserKnownHostsFile="$DIR/known_hosts" -o StrictHostKeyChecking=yes \
        -o ConnectTimeout=5 -i "$DIR/ssh/${SVC}_ed25519" -p "$SSH_PORT" "$SVC@127.0.0.1" \
        'test -n "$SLURM_CONF" && sinfo -h -o %P >/dev/null' >/dev/null 2>&1
}

write_env() {
    local hostkey
    hostkey=$(cut -d' ' -f1,2 "$DIR/ssh/ssh_host_ed25519_key.pub")
    cat > "$DIR/env.tmp" <<ENV
export SLURM_LAB_DIR='$DIR'
export SLURM_CONF='$CONF'
export SLURM_LAB_SSH_HOST='$SSH_HOST'
export SLURM_LAB_SSH_PORT='$SSH_PORT'
export SLURM_LAB_SSH_USER='$SVC'
export SLURM_LAB_SSH_KEY='$DIR/ssh/${SVC}_ed25519'
export SLURM_LAB_SSH_HOST_KEY='$hostkey'
export SLURM_LAB_USERS='$RESEARCHERS'
export SLURM_LAB_PARTITIONS='gpu debug'
export SLURM_LAB_NODES='$NODE_LIST'
ENV
    mv "$DIR/env.tmp" "$DIR/env"
    chmod 644 "$DIR/env"
    cat "$DIR/env"
}

all_running() {
    [ -f "$CONF" ] || return 1
    pid_alive "$DIR/run/munged.pid" || return 1
    pid_alive "$DIR/run/slurmctld.pid" || return 1
    for n in $NODES; do pid_alive "$DIR/run/slurmd-$n.pid" || return 1; done
    pid_alive "$DIR/run/sshd.pid" || return 1
    nodes_ready && ssh_ok
}

if all_running; then
    log "already running and healthy ($DIR)"
    write_env
    exit 0
fi

# Something is half up: stop it cleanly and start from scratch.
if compgen -G "$DIR/run/*.pid" >/dev/null; then
    log "partial lab found, restarting"
    SLURM_LAB_DIR=$DIR "$(dirname "$0")/stop.sh" >/dev/null 2>&1 || true
fi

# ---- accounts -------------------------------------------------------------------
for u in $SVC $RESEARCHERS; do
    if ! id "$u" >/dev/null 2>&1; then
        useradd -m -s /bin/bash "$u"
    fi
    [ -d "/home/$u" ] || { mkdir -p "/home/$u"; chown "$u:" "/home/$u"; }
done
# useradd leaves a locked password ('!') that sshd refuses with UsePAM no; '*' = no password, not locked.
usermod -p '*' "$SVC"

# ---- directories -----------------------------------------------------------------
rm -rf "$DIR/state" "$DIR/spool" "$DIR/run" "$DIR/log"
mkdir -p "$DIR"/{etc,state,spool,run,log,munge,gpu,ssh}
chmod 755 "$DIR" "$DIR"/{etc,spool,run,log,gpu,ssh}
chmod 700 "$DIR/state"
chmod 755 "$DIR/munge"   # clients (alice, bob, rackpilot) need the socket

# fake GPUs: symlinks to /dev/null (regular files are rejected by slurmd)
for i in 0 1 2 3; do ln -sfn /dev/null "$DIR/gpu/gpu$i"; done

# ---- munge ---------------------------------------------------------------------
if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$DIR/munge/munge.key"
munged --force -F -S "$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed" >>"$DIR/log/munged.out" 2>&1 &
for _ in $(seq 50); do [ -S "$DIR/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$DIR/munge/munge.socket" ] || die "munged did not start (see $DIR/log/munged.log)"
chmod 777 "$DIR/munge/munge.socket" 2>/dev/null || true

# ---- reboot program ------------------------------------------------------------------
# Harmless RebootProgram: restarts the calling node's slurmd with -b (reports a fresh boot).
# slurmd runs it via sh -c without arguments; the node name comes from the ancestor slurmd's -N.
cat > "$DIR/etc/reboot-node.sh" <<RB
#!/bin/bash
conf='$CONF'
dir='$DIR'
pid=\$\$
node=""
for _ in 1 2 3 4 5 6; do
    pid=\$(awk '/^PPid:/{print \$2}' /proc/\$pid/status 2>/dev/null) || break
    [ -n "\$pid" ] && [ "\$pid" -gt 1 ] || break
    if [ "\$(cat /proc/\$pid/comm 2>/dev/null)" = slurmd ]; then
        node=\$(tr '\0' '\n' < /proc/\$pid/cmdline | awk 'p{print; exit} \$0=="-N"{p=1}')
        break
    fi
done
[ -n "\$node" ] || { echo "reboot-node: cannot find node name" >&2; exit 1; }
echo "\$(date -Is) reboot \$node (slurmd pid \$pid)" >> "\$dir/log/reboots.log"
old=\$pid
setsid bash -c "
    sleep 0.5
    kill \$old 2>/dev/null
    for i in \\\$(seq 100); do
        st=\\\$(awk '/^State:/{print \\\$2}' /proc/\$old/status 2>/dev/null || echo gone)
        [ \"\\\$st\" = gone ] || [ \"\\\$st\" = Z ] && break
        sleep 0.1
    done
    SLURM_CONF='\$conf' exec /usr/sbin/slurmd -D -b -N \$node -f '\$conf' >>'\$dir/log/slurmd-\$node.out' 2>&1
" </dev/null >/dev/null 2>&1 &
exit 0
RB
chmod 755 "$DIR/etc/reboot-node.sh"

# ---- slurm config -----------------------------------------------------------------------
{
cat <<CFG
# Generated by scripts/slurm-lab/start.sh — private loopback lab.
ClusterName=rackpilot-lab
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
MinJobAge=600
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
RebootProgram=$DIR/etc/reboot-node.sh
ResumeTimeout=60
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SlurmctldDebug=info
SlurmdDebug=info
NodeName=DEFAULT CPUs=4 RealMemory=2000 Gres=gpu:fake:4 State=UNKNOWN
CFG
p=$((CTLD_PORT + 4))
for n in $NODES; do
    echo "NodeName=$n NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$p"
    p=$((p + 1))
done
cat <<CFG
PartitionName=gpu Nodes=$NODE_LIST Default=YES MaxTime=1-00:00:00 State=UP
PartitionName=debug Nodes=$NODE_LIST MaxTime=00:30:00 State=UP
CFG
} > "$CONF"
cat > "$DIR/etc/gres.conf" <<CFG
AutoDetect=off
NodeName=$NODE_LIST Name=gpu Type=fake File=$DIR/gpu/gpu[0-3]
CFG
chmod 644 "$CONF" "$DIR/etc/gres.conf"

# ---- slurm daemons -------------------------------------------------------------------------
slurmctld -D -c -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 &
for _ in $(seq 100); do timeout 2 scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.1; done
timeout 2 scontrol ping 2>/dev/null | grep -q UP || die "slurmctld did not come up (see $DIR/log/slurmctld.log)"
for n in $NODES; do
    slurmd -D -N "$n" -f "$CONF" >>"$DIR/log/slurmd-$n.out" 2>&1 &
done

# ---- sudo rules ----------------------------------------------------------------------------
cat > "$DIR/sudoers.tmp" <<SUDO
# Rackpilot slurm lab (scripts/slurm-lab/start.sh). The portal's service account '$SVC':
#  - keeps SLURM_CONF (sshd sets it) through sudo;
#  - as root, may only drain/resume nodes, request reboots and cancel jobs (admin actions):
#      scontrol update nodename=<n> state=<s> [reason=...]; scontrol reboot ...; scancel ...
#    (sudo's '*' also matches spaces, so these rules allow extra scontrol update keys after
#     'state=': the service account is trusted with node admin, nothing else.)
#  - as a researcher ($RESEARCHERS), may submit (sbatch, script on stdin), cancel (scancel) and read
#    job output (tail) — with that researcher's own Unix permissions, never root's.
Defaults:$SVC env_keep += "SLURM_CONF"
Defaults:$SVC !lecture, !syslog
$SVC ALL=(root) NOPASSWD: /usr/bin/scontrol update nodename=* state=*, /usr/bin/scontrol reboot *, /usr/bin/scancel *
$SVC ALL=(${RESEARCHERS// /,}) NOPASSWD: /usr/bin/sbatch *, /usr/bin/scancel *, /usr/bin/tail *
SUDO
visudo -c -q -f "$DIR/sudoers.tmp" || die "generated sudoers file is invalid"
install -m 440 "$DIR/sudoers.tmp" /etc/sudoers.d/rackpilot-slurm-lab
rm -f "$DIR/sudoers.tmp"
visudo -c -q || die "sudoers invalid after install"

# ---- sshd ------------------------------------------------------------------------------------
mkdir -p /run/sshd
[ -s "$DIR/ssh/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -C rackpilot-lab-host -f "$DIR/ssh/ssh_host_ed25519_key"
[ -s "$DIR/ssh/${SVC}_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "$SVC@rackpilot-lab" -f "$DIR/ssh/${SVC}_ed25519"
chmod 600 "$DIR/ssh/ssh_host_ed25519_key" "$DIR/ssh/${SVC}_ed25519"
[ -z "${SLURM_LAB_SSH_KEY_OWNER:-}" ] || chown "$SLURM_LAB_SSH_KEY_OWNER" "$DIR/ssh/${SVC}_ed25519"
install -d -m 700 -o "$SVC" -g "$SVC" "/home/$SVC/.ssh"
# add this lab's key, keep the others': private labs (SLURM_LAB_DIR) share the service user, and
# replacing the file locked every other running lab out of sshd
AUTH_KEYS="/home/$SVC/.ssh/authorized_keys"
touch "$AUTH_KEYS"
grep -qxF "$(cat "$DIR/ssh/${SVC}_ed25519.pub")" "$AUTH_KEYS" || cat "$DIR/ssh/${SVC}_ed25519.pub" >> "$AUTH_KEYS"
chown "$SVC:$SVC" "$AUTH_KEYS"
chmod 600 "$AUTH_KEYS"
echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$DIR/ssh/ssh_host_ed25519_key.pub")" > "$DIR/known_hosts"
cat > "$DIR/ssh/sshd_config" <<SSHD
Port $SSH_PORT
ListenAddress $SSH_LISTEN
HostKey $DIR/ssh/ssh_host_ed25519_key
PidFile $DIR/run/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
UsePAM no
PermitRootLogin no
AllowUsers $SVC
X11Forwarding no
AllowTcpForwarding no
SetEnv SLURM_CONF=$CONF
MaxStartups 50:30:100
MaxSessions 50
SSHD
/usr/sbin/sshd -t -f "$DIR/ssh/sshd_config" || die "sshd config invalid"
/usr/sbin/sshd -D -e -f "$DIR/ssh/sshd_config" >>"$DIR/log/sshd.log" 2>&1 &

# ---- wait for health --------------------------------------------------------------------------
ok=""
for _ in $(seq 150); do   # up to ~30 s
    if nodes_idle && ssh_ok; then ok=1; break; fi
    sleep 0.2
done
if [ -z "$ok" ]; then
    echo "--- sinfo:" >&2; timeout 5 sinfo -N 2>&1 >&2 || true
    echo "--- slurmctld.log (tail):" >&2; tail -n 20 "$DIR/log/slurmctld.log" >&2 || true
    echo "--- sshd.log (tail):" >&2; tail -n 10 "$DIR/log/sshd.log" >&2 || true
    die "lab did not become healthy within 30 s"
fi
log "up: $NODE_COUNT nodes idle, sshd on $SSH_LISTEN:$SSH_PORT ($DIR)"
write_env
