#!/usr/bin/env bash
# A throw-away local Slurm cluster for the tests (Debian 12, slurm-wlm 22.05,
# munge 0.5, as root, no systemd): munged, slurmctld and N slurmd ("nodes"
# node1..nodeN, all on 127.0.0.1) whose config, state, logs, munge key and
# socket all live in one directory, so that nothing in /etc is read or changed
# and the system's own munge/slurm services are neither needed nor touched.
#
#   scripts/slurm-local.sh check              exit 0 if usable, else 77 (skip)
#   scripts/slurm-local.sh start DIR [NODES]  NODES defaults to 3; writes DIR/env
#   scripts/slurm-local.sh stop DIR           cancels jobs, stops every daemon
#
# After `start`, `source DIR/env` points the Slurm clients (sbatch, squeue,
# scontrol, ...) at this cluster. Each node advertises CPUs=$(nproc) and the
# feature `local` (for --constraint); partition `debug` is the default.
# Environment: SLURM_LOCAL_TIMEOUT (seconds to wait for the nodes, default 60),
# SLURM_LOCAL_CRED_EXPIRE (AuthInfo cred_expire, default 10, at least 5: a
# requeued job waits cred_expire+1 s before it may start again; Slurm's default
# is 120). `scontrol update jobid=ID starttime=now` skips that wait.
# Functions called through wait_until look unreachable to shellcheck.
# shellcheck disable=SC2317
set -euo pipefail

readonly DEFAULT_NODES=3
readonly WAIT_S=${SLURM_LOCAL_TIMEOUT:-60}
readonly CRED_EXPIRE=${SLURM_LOCAL_CRED_EXPIRE:-10}
# Binaries this script runs; the first four are the ones the caller asked about.
readonly NEEDED=(slurmctld slurmd sbatch munged munge scontrol sinfo squeue scancel setsid)

die() { echo "slurm-local: $*" >&2; exit 1; }
log() { echo "slurm-local: $*" >&2; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
wait_until() {  # wait_until SECONDS CMD...: poll CMD every 0.1 s until it succeeds
  local end=$(($(now_ms) + $1 * 1000))
  while [ "$(now_ms)" -lt "$end" ]; do "${@:2}" && return 0; sleep 0.1; done
  "${@:2}"
}

usage() {
  sed -n '8,10p' "$0" | sed 's/^# *//' >&2
  exit 2
}

# --- check -----------------------------------------------------------------

# SlurmUser/SlurmdUser=root and job launch need root; exit 77 tells ctest
# (SKIP_RETURN_CODE 77) to skip rather than fail.
cmd_check() {
  local why=() c
  [ "$(id -u)" = 0 ] || why+=("not root (the local cluster runs its daemons as root)")
  for c in "${NEEDED[@]}"; do
    command -v "$c" >/dev/null 2>&1 || why+=("$c not found (apt-get install slurm-wlm munge)")
  done
  [ ${#why[@]} -eq 0 ] && return 0
  printf 'slurm-local: cannot run a local cluster: %s\n' "${why[@]}" >&2
  exit 77
}

# --- process bookkeeping ----------------------------------------------------

# Our own pid files live in DIR/pid (the daemons write theirs to DIR/run);
# `stop` trusts these, and checks the command name so a reused pid is never hit.
pid_alive() {  # pid_alive PID NAME: is PID alive (not a zombie) and running NAME?
  local comm k v
  read -r comm 2>/dev/null <"/proc/$1/comm" || return 1
  [ "$comm" = "$2" ] || return 1
  while read -r k v; do
    [ "$k" = State: ] && { [[ $v != Z* ]]; return; }
  done 2>/dev/null <"/proc/$1/status"
  return 1
}

# Start a daemon fully detached: its own session (no controlling tty, no
# signals from the caller's process group), stdin from /dev/null, stdout and
# stderr to its log, and every other inherited fd closed, so that a harness
# reading our stdout/stderr through pipes (ctest) sees EOF when we return.
# Without job control, `( ... ) &` is not a process-group leader, so setsid
# calls setsid() in place instead of forking: $! stays the daemon's pid.
spawn() {  # spawn NAME LOG CMD... ; records the pid in $DIR/pid/NAME.pid
  local name=$1 logf=$2 fd
  shift 2
  (
    for fd in "/proc/$BASHPID/fd"/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec setsid nohup "$@" </dev/null >>"$logf" 2>&1
  ) &
  echo $! >"$DIR/pid/$name.pid"
  disown $!  # no "Killed" notice from this shell if stop has to SIGKILL it
}

# Parent pid of $1 into PARENT, with builtins only (no fork: see cluster_procs).
parent_of() {
  local k v
  PARENT=
  while read -r k v; do
    [ "$k" = PPid: ] && { PARENT=$v; return 0; }
  done 2>/dev/null <"/proc/$1/status"
  return 1
}

# Is $1 this script, one of its ancestors (the caller's shells name DIR on
# their command line and may carry SLURM_CONF) or one of its descendants
# (our own subshells and pipeline stages: same command line, SLURM_CONF)?
is_ours() {
  local p=$1
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do  # descendant or self
    [ "$p" = $$ ] && return 0
    parent_of "$p" || return 0  # gone: not a leftover either
    p=$PARENT
  done
  p=$$
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do  # ancestor
    [ "$p" = "$1" ] && return 0
    parent_of "$p" || break
    p=$PARENT
  done
  return 1
}

# Processes that belong to the cluster in DIR: the command line names a path
# in DIR (the daemons: see -f, --key-file), or SLURM_CONF=DIR/slurm.conf is in
# the environment of a Slurm daemon (slurmstepd, slurmscriptd...) or of a job's
# process (SLURM_JOB_ID set), whose command lines do not name DIR: with
# proctrack/linuxproc a job's child that forks while the job is being killed,
# or that daemonizes, escapes the kill. The caller's own processes that merely
# export SLURM_CONF (a harness, a pipeline next to us) have no SLURM_JOB_ID
# and are left alone. Prints "PID COMMAND LINE" per process.
cluster_procs() {
  local p cmd env e conf job comm
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    # mapfile reads NUL-separated /proc files without forking.
    mapfile -d "" -t cmd 2>/dev/null <"/proc/$p/cmdline" || continue
    [ ${#cmd[@]} -gt 0 ] || continue  # kernel thread or zombie
    mapfile -d "" -t env 2>/dev/null <"/proc/$p/environ" || env=()
    conf=0 job=0
    for e in "${env[@]}"; do
      case $e in
        "SLURM_CONF=$DIR/slurm.conf") conf=1 ;;
        SLURM_JOB_ID=*) job=1 ;;
      esac
    done
    read -r comm 2>/dev/null <"/proc/$p/comm" || comm=
    case $comm in slurmstepd | slurmscriptd | slurmctld | slurmd) job=1 ;; esac
    if [[ " ${cmd[*]} " == *"$DIR/"* ]] || [ $((conf & job)) = 1 ]; then
      is_ours "$p" || echo "$p ${cmd[*]}"
    fi
  done
  return 0
}

# --- start -------------------------------------------------------------------

port_listening() {  # is TCP port $1 in LISTEN state (0A) on any address?
  local hex
  hex=$(printf '%04X' "$1")
  awk -v h=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == h {f = 1} END {exit !f}' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# A random base port (away from the standard 6817/6818 and from the ephemeral
# range) with base..base+nodes all free: slurmctld gets the base, node i base+i.
pick_ports() {
  local base i busy
  for _ in $(seq 1 100); do
    base=$((20000 + RANDOM % 20000))
    busy=0
    for i in $(seq 0 "$NODES"); do
      port_listening $((base + i)) && { busy=1; break; }
    done
    [ $busy = 0 ] && { echo "$base"; return; }
  done
  die "no free port range found"
}

# munged with a private key and socket in DIR/munge. munged refuses to start
# unless every directory on the socket's path is searchable by all ("Socket
# is inaccessible: execute permissions for all required"), hence a+x on DIR.
start_munge() {
  local m=$DIR/munge
  mkdir -p "$m"
  chmod a+x "$DIR"
  chmod 755 "$m"
  dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
  chmod 400 "$m/munge.key"
  # -F: stay in the foreground so the pid we record is munged's own.
  spawn munged "$DIR/log/munged.out" munged -F --key-file="$m/munge.key" \
    --socket="$m/munge.sock" --pid-file="$DIR/run/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$m/munged.seed"
  wait_until 5 test -S "$m/munge.sock" || true  # the check below reports it
  munge -S "$m/munge.sock" -n </dev/null | unmunge -S "$m/munge.sock" >/dev/null ||
    fail_start "munged does not answer on $m/munge.sock"
}

write_conf() {
  local port=$1 host
  host=$(hostname -s 2>/dev/null || hostname)
  # Why each non-default line is there:
  #  SlurmctldHost/NodeAddr: all daemons on loopback; distinct slurmd ports
  #    let N slurmd share one host.
  #  cred_expire: a requeued job stays PENDING (Reason=BeginTime) for
  #    cred_expire+1 s (Slurm's default 120; values under 5 are rejected).
  #  proctrack/linuxproc, task/none, no accounting: no cgroups, no slurmdbd.
  #  SlurmdParameters=config_overrides: the local nodes' CPUs/memory come from
  #    this file, not from the hardware, so a mismatch does not drain them.
  #  JobRequeue=1: batch jobs are requeueable unless --no-requeue.
  #  MinJobAge=600: `scontrol show job` still knows finished jobs (no sacct).
  #  ReturnToService=2: a DOWN node returns to service as soon as its slurmd
  #    answers, so `scontrol update state=down` only kills and requeues its
  #    jobs (the node is idle again within ms); state=drain keeps it out.
  #  sched_interval=1: the main scheduler also runs every second, not every
  #    60 s; nothing else wakes it when a requeued job's BeginTime passes.
  #  batch_sched_delay=0 and short KillWait: tests should not wait on timers.
  cat >"$DIR/slurm.conf" <<EOF
ClusterName=local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock,cred_expire=$CRED_EXPIRE
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
TmpFS=$DIR/tmp/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
SlurmdParameters=config_overrides
JobRequeue=1
MinJobAge=600
ReturnToService=2
SchedulerParameters=batch_sched_delay=0,sched_interval=1
KillWait=5
InactiveLimit=0
NodeName=node[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((port + 1))-$((port + NODES))] CPUs=$(nproc) RealMemory=1000 Feature=local State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

idle_nodes() { sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l; }
all_idle() { [ "$(idle_nodes)" = "$NODES" ]; }

fail_start() {
  log "start failed: $*"
  local f
  for f in "$DIR"/log/*; do
    [ -s "$f" ] || continue
    echo "==== tail of $f" >&2
    tail -n 15 "$f" >&2
  done
  (cmd_stop) || true  # leave nothing running behind a failure (subshell: stop may exit)
  exit 1
}

cmd_start() {
  local t0 port n f
  t0=$(now_ms)
  cmd_check
  [[ $NODES =~ ^[1-9][0-9]*$ ]] || die "NODES must be a positive integer, got '$NODES'"
  # Slurm only logs an invalid cred_expire and silently keeps 120.
  { [[ $CRED_EXPIRE =~ ^[0-9]+$ ]] && [ "$CRED_EXPIRE" -ge 5 ]; } ||
    die "SLURM_LOCAL_CRED_EXPIRE must be an integer >= 5, got '$CRED_EXPIRE'"
  mkdir -p "$DIR"
  DIR=$(cd "$DIR" && pwd -P)  # absolute: daemons and /proc scans match on it
  mkdir -p "$DIR/pid" "$DIR/run" "$DIR/log"
  for f in "$DIR"/pid/*.pid; do
    [ -e "$f" ] || continue
    n=$(basename "$f" .pid)
    pid_alive "$(cat "$f")" "${n%%-*}" &&
      die "a cluster is already running in $DIR (stop it first)"
  done
  # Fresh state each time: a previous run's jobs must not come back.
  rm -rf "$DIR/state" "$DIR/spool" "$DIR/tmp" "$DIR"/pid/* "$DIR"/run/* "$DIR"/log/*
  mkdir -p "$DIR/state"
  for n in $(seq 1 "$NODES"); do mkdir -p "$DIR/spool/node$n" "$DIR/tmp/node$n"; done
  export SLURM_CONF=$DIR/slurm.conf

  start_munge
  port=$(pick_ports)
  write_conf "$port"
  # -D: foreground, so the recorded pid is the daemon; -i: ignore old state;
  # -f: redundant with SLURM_CONF, but puts DIR on the command line, where
  # `stop` looks for leftovers.
  spawn slurmctld "$DIR/log/slurmctld.out" slurmctld -D -i -f "$SLURM_CONF"
  for n in $(seq 1 "$NODES"); do
    spawn "slurmd-node$n" "$DIR/log/slurmd-node$n.out" slurmd -D -N "node$n" -f "$SLURM_CONF"
  done

  wait_until "$WAIT_S" all_idle ||
    fail_start "only $(idle_nodes) of $NODES nodes idle after ${WAIT_S}s: $(sinfo -h -N -o '%N=%T' 2>&1 | tr '\n' ' ')"

  cat >"$DIR/env" <<EOF
# source this file to use the local cluster in $DIR
export SLURM_CONF=$DIR/slurm.conf
export SLURM_LOCAL_DIR=$DIR
EOF
  log "cluster up in $(($(now_ms) - t0)) ms: $NODES node(s), ports $port-$((port + NODES)), source $DIR/env"
}

# --- stop ----------------------------------------------------------------------

# Any live slurmstepd leaves a socket NODE_JOB.STEP in its node's spool dir.
steps_left() { compgen -G "$DIR/spool/*/node*_[0-9]*.[0-9]*" >/dev/null; }
jobs_left() { [ -n "$(squeue -h -o %i 2>/dev/null)" ]; }

no_jobs() { ! jobs_left && ! steps_left; }

# Prints "NAME PID" for every recorded daemon still alive (NAME: munged,
# slurmctld, slurmd-nodeN).
daemons_alive() {
  local f name pid
  for f in "$DIR"/pid/*.pid; do
    [ -e "$f" ] || continue
    name=${f##*/} && name=${name%.pid}
    read -r pid <"$f" || continue
    pid_alive "$pid" "${name%%-*}" && echo "$name $pid"
  done
  return 0
}
# (Output captured first: `daemons_alive | grep -q` could die of SIGPIPE and,
# under pipefail, invert the answer.)
slurm_daemons_gone() { local a; a=$(daemons_alive); [[ $'\n'$a != *$'\n'slurm* ]]; }
munged_gone() { local a; a=$(daemons_alive); [[ $'\n'$a != *$'\n'munged* ]]; }

kill_recorded() {  # kill_recorded SIGNAL [munged|slurm]
  local name pid
  while read -r name pid; do
    case $2 in
      munged) [ "$name" = munged ] || continue ;;
      slurm) [ "$name" != munged ] || continue ;;
    esac
    kill "-$1" "$pid" 2>/dev/null || true
  done < <(daemons_alive)
}

leftovers() {  # every live process of the cluster, with its state
  local pid rest
  while read -r pid rest; do
    echo "$pid ($(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null)) $rest"
  done < <(cluster_procs; daemons_alive | awk '{print $2, "recorded daemon", $1}')
}
nothing_left() { [ -z "$(leftovers)" ]; }

cmd_stop() {
  local t0 left
  t0=$(now_ms)
  [ -d "$DIR" ] || die "no such directory: $DIR"
  DIR=$(cd "$DIR" && pwd -P)
  export SLURM_CONF=$DIR/slurm.conf
  mkdir -p "$DIR/pid"

  if [ -f "$SLURM_CONF" ] && ! slurm_daemons_gone; then
    # Cancel whole array jobs (%F) and plain jobs alike; SLURM_CONF scopes
    # this to our cluster. Then wait for the slurmstepds to finish cleanup,
    # so `scontrol shutdown` does not strand them.
    squeue -h -o %F 2>/dev/null | sort -u | xargs -r scancel --quiet 2>/dev/null || true
    wait_until 20 no_jobs || log "jobs or steps still present after 20s; shutting down anyway"
    # Stops slurmctld and every registered slurmd.
    scontrol shutdown >/dev/null 2>&1 || true
    wait_until 15 slurm_daemons_gone || {
      log "slurm daemons did not exit after scontrol shutdown; sending SIGKILL"
      kill_recorded KILL slurm
      wait_until 5 slurm_daemons_gone || true
    }
  fi
  kill_recorded TERM munged
  wait_until 5 munged_gone || { kill_recorded KILL munged; wait_until 5 munged_gone || true; }

  # Whatever else still belongs to this cluster (an escaped job process, a
  # stuck slurmstepd) gets SIGKILL; if even that leaves something, fail.
  left=$(cluster_procs)
  if [ -n "$left" ]; then
    log "killing leftover processes of $DIR:"$'\n'"$left"
    awk '{print $1}' <<<"$left" | xargs -r kill -KILL 2>/dev/null || true
  fi
  # A killed process takes a moment to go (an exiting one still shows in
  # /proc, with an empty command line), so poll before calling it stuck.
  wait_until 5 nothing_left || die "processes of the cluster in $DIR remain:"$'\n'"$(leftovers)"
  rm -f "$DIR"/pid/*.pid
  log "cluster in $DIR stopped in $(($(now_ms) - t0)) ms"
}

# --- main --------------------------------------------------------------------

main() {
  [ $# -ge 1 ] || usage
  case $1 in
    check) [ $# -eq 1 ] || usage; cmd_check ;;
    start) [ $# -eq 2 ] || [ $# -eq 3 ] || usage
      DIR=$2 NODES=${3:-$DEFAULT_NODES}; cmd_start ;;
    stop) [ $# -eq 2 ] || usage; DIR=$2; cmd_stop ;;
    *) usage ;;
  esac
}

main "$@"
