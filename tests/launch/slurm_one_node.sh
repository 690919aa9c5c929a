#!/usr/bin/env bash
# Usage: tests/launch/slurm_one_node.sh SCRIPT_FILE
#
# Starts a throwaway one-node Slurm cluster (munged, slurmctld, slurmd) in a private temp
# dir, runs `bash SCRIPT_FILE` inside a whole-node allocation (salloc) from the caller's
# working directory and environment, and tears everything down again. SCRIPT_FILE's exit
# status is ours. The node has fake GPUs, so `srun --gpus-per-task=1` works without any.
#
# Exit 77 (ctest's skip code) when not root or Slurm/munge are missing
# (Debian: apt-get install slurm-wlm munge).
#
# Environment: SLURM_ONE_NODE_TIMEOUT  seconds for the allocation (default 300).
set -euo pipefail

skip() { echo "slurm_one_node: SKIP: $*" >&2; exit 77; }
die() { echo "slurm_one_node: error: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: $0 SCRIPT_FILE"
script_file=$1
[[ -r $script_file ]] || die "cannot read $script_file"
timeout_s=${SLURM_ONE_NODE_TIMEOUT:-300}
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || die "SLURM_ONE_NODE_TIMEOUT must be a positive integer"

[[ $(id -u) -eq 0 ]] || skip "needs root (slurmd runs jobs as any user)"
for bin in munged slurmctld slurmd salloc srun sinfo scontrol scancel timeout setsid; do
  command -v "$bin" >/dev/null || skip "$bin not found (apt-get install slurm-wlm munge)"
done

# An outer Slurm job's variables (SLURM_JOB_ID, ...) would leak into our cluster's jobs.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^SLURM_' || true)

# Unix socket paths (munge's, slurmd's per-step ones) must fit in 108 bytes.
tmp_parent=${TMPDIR:-/tmp}
(( ${#tmp_parent} <= 40 )) || tmp_parent=/tmp
tmp=$(mktemp -d "$tmp_parent/slurm1.XXXXXX")
# munged wants the socket directory searchable by all and writable by nobody else.
chmod 711 "$tmp"

# Every process we start, down to slurmstepd and the job's tasks, inherits this marker;
# teardown kills exactly the processes that carry it, so nothing of ours outlives us and
# nothing of anyone else's (a system slurmd, say) is touched.
export SLURM_ONE_NODE_DIR=$tmp
export SLURM_CONF=$tmp/slurm.conf

munged_pid='' ctld_pid='' slurmd_pid='' salloc_pid=''

# shellcheck disable=SC2317  # reached through the EXIT trap
stop_pid() {   # PID SECONDS: TERM, then KILL once SECONDS have passed
  local pid=$1 tries=$(( $2 * 10 ))
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while (( tries-- > 0 )) && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# shellcheck disable=SC2317
cleanup() {
  local rc=$? e pid found
  set +e
  trap - EXIT INT TERM HUP
  if [[ -n $salloc_pid ]] && kill -0 "$salloc_pid" 2>/dev/null; then
    kill -KILL -- "-$salloc_pid" 2>/dev/null   # salloc leads its own process group
    wait "$salloc_pid" 2>/dev/null
  fi
  # Cancel jobs while slurmctld and slurmd are up, so slurmstepd ends the tasks itself.
  if [[ -n $ctld_pid ]] && kill -0 "$ctld_pid" 2>/dev/null; then
    timeout 5 scancel --quiet --signal=KILL --full --user=root 2>/dev/null
    for _ in {1..50}; do
      [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  stop_pid "$slurmd_pid" 5
  stop_pid "$ctld_pid" 5
  # Whatever still carries our marker (a stuck slurmstepd or task) goes now. Our own
  # shell's /proc environ predates the export, and unsetting keeps grep from matching.
  # Repeated, as a dying script may still fork.
  unset SLURM_ONE_NODE_DIR
  for _ in 1 2 3; do
    found=0
    for e in /proc/[0-9]*/environ; do
      pid=${e#/proc/}; pid=${pid%/environ}
      [[ $pid == "$$" || $pid == "$munged_pid" ]] && continue
      if grep -qzxF "SLURM_ONE_NODE_DIR=$tmp" "$e" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null; found=1
      fi
    done
    (( found )) || break
    sleep 0.2
  done
  stop_pid "$munged_pid" 5
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

show_log() {   # DAEMON: its log file, or its stderr if it died before opening one
  local f=$tmp/$1.log
  [[ -s $f ]] || f=$tmp/$1.out
  [[ -s $f ]] && sed "s|^|  $1: |" "$f" >&2
  return 0
}

fail_daemon() {   # WHAT DAEMON...: report what did not come up, with the daemons' logs
  local what=$1 d; shift
  echo "slurm_one_node: error: $what did not come up; logs follow" >&2
  for d in "$@"; do show_log "$d"; done
  exit 1
}

free_ports() {   # N: N distinct TCP ports nobody listens on or is connected from
  local -A used=([29500]=1)   # the docs' LANES_ROOT_ADDR port
  local n=$1 p local_addr
  while read -r _ local_addr _; do
    used[$((16#${local_addr##*:}))]=1
  done < <(tail -q -n +2 /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  while (( n > 0 )); do
    p=$(( 20000 + RANDOM % 12000 ))   # below Linux's ephemeral range 32768-60999
    [[ -n ${used[$p]:-} ]] && continue
    used[$p]=1; echo "$p"; n=$(( n - 1 ))
  done
}

# --- munge: own key and socket, never the system's /run/munge ---
head -c 1024 /dev/urandom > "$tmp/munge.key"
chmod 400 "$tmp/munge.key"
munged --foreground --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
  --pid-file="$tmp/munged.pid" --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" \
  > "$tmp/munged.out" 2>&1 &
munged_pid=$!
for _ in {1..100}; do
  [[ -S $tmp/munge.sock ]] || ! kill -0 "$munged_pid" 2>/dev/null && break
  sleep 0.1
done
if [[ ! -S $tmp/munge.sock ]] || ! kill -0 "$munged_pid" 2>/dev/null; then
  fail_daemon munged munged
fi

# --- slurm.conf ---
node=$(hostname -s)
cpus=$(nproc)
(( cpus >= 8 )) || cpus=8   # more task slots than cores: the docs run 4 ranks on any box
ngpus=8
read -r ctld_port slurmd_port < <(free_ports 2 | xargs)
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/dev"
# Fake GPUs: gres/gpu only stat()s File= for a device major/minor, so links to /dev/null
# do; the trailing number is the index CUDA_VISIBLE_DEVICES gets.
for ((i = 0; i < ngpus; i++)); do ln -s /dev/null "$tmp/dev/gpu$i"; done
: > "$tmp/plugstack.conf"   # no site SPANK plugins from /etc/slurm
cat > "$tmp/gres.conf" <<EOF
AutoDetect=off
NodeName=$node Name=gpu File=$tmp/dev/gpu[0-$((ngpus - 1))]
EOF
cat > "$SLURM_CONF" <<EOF
ClusterName=lanes1
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
PlugStackConfig=$tmp/plugstack.conf
TmpFS=$tmp
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:$ngpus State=UNKNOWN
PartitionName=one Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

# --- daemons, in the foreground so we own their pids ---
slurmctld -D -c > "$tmp/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -N "$node" > "$tmp/slurmd.out" 2>&1 &
slurmd_pid=$!

# Ready when the node is idle; a daemon that died or never got there shows its log.
state='' deadline=$(( SECONDS + 30 ))
while (( SECONDS < deadline )); do
  kill -0 "$ctld_pid" 2>/dev/null || fail_daemon slurmctld slurmctld
  kill -0 "$slurmd_pid" 2>/dev/null || fail_daemon slurmd slurmd
  state=$(timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null || true)
  [[ $state == idle ]] && break
  sleep 0.1
done
[[ $state == idle ]] ||
  fail_daemon "node $node (state '${state:-unknown}' after 30 s)" slurmctld slurmd

# --- the job: whole node, all fake GPUs, the caller's cwd and environment ---
# setsid keeps salloc off the caller's terminal and signals. Once the command runs, salloc
# ignores TERM; HUP is what makes it give the allocation up. The command itself sits in a
# process group of salloc's making, so teardown's marker sweep is what ends it.
rc=0
setsid timeout -s HUP -k 10 "$timeout_s" \
  salloc -N 1 --exclusive --gres="gpu:$ngpus" --time=$(( (timeout_s + 59) / 60 )) \
  bash "$script_file" &
salloc_pid=$!
wait "$salloc_pid" || rc=$?
salloc_pid=
(( rc != 124 && rc != 137 )) || echo "slurm_one_node: error: $script_file timed out after $timeout_s s" >&2
exit "$rc"
