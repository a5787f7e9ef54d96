#!/usr/bin/env bash
# A throw-away single-node Slurm (Debian's packages, no systemd, no accounting database) for
# testing the SLURM profile on this machine.
#
#   bash tests/slurm/cluster.sh run CMD...   start Slurm, run CMD, stop Slurm whatever happens,
#                                            then remove what it installed
#   bash tests/slurm/cluster.sh start | stop | status | uninstall
#
# `run` removes the packages it installed and the slurm.conf it wrote (PABENCH_SLURM_KEEP=1 keeps
# them): with slurm-client installed but no controller running, every later Snakemake start waits
# ~15 s on the SLURM plugin's `scontrol show config`.
# Needs root (apt-get, /etc/slurm, /etc/munge). The daemons run as plain processes; `stop` ends
# only the processes whose pid files this script wrote. Without slurmdbd, `sacct` knows nothing:
# Snakemake must be run with `--slurm-status-command squeue` (MinJobAge below keeps finished jobs
# visible to squeue long enough).
set -euo pipefail

STATE=${PABENCH_SLURM_STATE:-/tmp/pabench-slurm}
PACKAGES=(slurmctld slurmd slurm-client munge)
INSTALLED=$STATE/installed-packages   # the packages this script installed, for `uninstall`
CONF=/etc/slurm/slurm.conf   # not SLURM_CONF: the plugin's job step drops every SLURM_* variable
MARK="# written by pabench tests/slurm/cluster.sh"
HOST=$(hostname -s)

log() { echo "cluster.sh: $*" >&2; }

install() {
    local missing=()
    for cmd in slurmctld slurmd sinfo munged; do
        command -v "$cmd" >/dev/null || missing+=("$cmd")
    done
    [ ${#missing[@]} -eq 0 ] && return
    local new=()
    for pkg in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || new+=("$pkg")
    done
    log "installing ${new[*]} (missing: ${missing[*]})"
    mkdir -p "$STATE"
    [ ${#new[@]} -eq 0 ] || printf '%s\n' "${new[@]}" >>"$INSTALLED"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null ||
        { apt-get update >/dev/null &&
          apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null; }
}

uninstall() {
    if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then
        rm -f "$CONF"
    fi
    [ -s "$INSTALLED" ] || return 0
    local pkgs
    mapfile -t pkgs < <(grep -v '^$' "$INSTALLED" | sort -u)
    if [ ${#pkgs[@]} -eq 0 ]; then rm -f "$INSTALLED"; return 0; fi
    log "removing what this script installed: ${pkgs[*]} (PABENCH_SLURM_KEEP=1 keeps them)"
    DEBIAN_FRONTEND=noninteractive apt-get remove -y "${pkgs[@]}" >/dev/null ||
        log "could not remove ${pkgs[*]}"
    rm -f "$INSTALLED"
}

finish() {
    stop
    if [ "${PABENCH_SLURM_KEEP:-0}" != 1 ]; then
        uninstall
    fi
}

write_conf() {
    # Never overwrite a slurm.conf this script did not write (a real cluster's).
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        log "$CONF exists and is not ours; refusing to overwrite it"
        exit 1
    fi
    local cpus mem_mb
    cpus=$(nproc)
    # 80% of the machine's memory: slurmd drains a node that has less than RealMemory.
    mem_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
    mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d"
    cat >"$CONF" <<EOF
$MARK
ClusterName=pabench
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
# No cgroups or accounting on a plain (container) machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Finished jobs stay in squeue for 5 minutes: the plugin's squeue status check must see them end.
MinJobAge=300
ReturnToService=2
NodeName=$HOST CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
# One partition, no GPUs: the pre-flight check must refuse GPU rules here.
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    install
    write_conf
    mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chmod 400 /etc/munge/munge.key
    # munged wants to run as its own user; as root it needs --force.
    munged --force --pid-file="$STATE/munged.pid"
    slurmctld -c     # -c: start clean, without the jobs of an earlier run
    slurmd
    for _ in $(seq 60); do
        if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
            log "Slurm is up: $(sinfo -h -o '%P %D %T %c CPUs %m MB')"
            return
        fi
        sleep 1
    done
    log "Slurm did not come up; logs in $STATE"
    tail -n 20 "$STATE"/*.log >&2 || true
    return 1
}

stop() {
    scancel --user="$(id -un)" 2>/dev/null || true
    for name in slurmd slurmctld munged; do
        local pidfile="$STATE/$name.pid"
        [ -s "$pidfile" ] || continue
        local pid
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    log "Slurm stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) sinfo ;;
    uninstall) uninstall ;;
    run)
        shift
        trap finish EXIT
        start
        "$@"
        ;;
    *) echo "usage: $0 start|stop|status|uninstall|run CMD..." >&2; exit 2 ;;
esac
