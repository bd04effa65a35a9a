#!/usr/bin/env bash
# deploy/slurm/ringmaster.sbatch on a real Slurm of one node: munged,
# slurmctld and slurmd (Debian's slurm-wlm and munge) started here with a
# configuration of their own on free ports. A 2-rank trainer job ends the
# batch job with 0, and a job whose rank exits with 3 ends it with 3.
set -euo pipefail
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/test_lib.sh"
export PATH="$PATH:/usr/sbin:/sbin"  # the daemons
[ "$(id -u)" = 0 ] || skip "a private Slurm needs root (slurmd runs jobs as their users)"
for tool in munged slurmctld slurmd sbatch sinfo scontrol srun; do
  command -v "$tool" > /dev/null || skip "$tool not found (Debian packages slurm-wlm and munge; ./dev installs them)"
done
src="$TEST_SRCDIR/$TEST_WORKSPACE"
work=$(mktemp -d /var/tmp/ringmaster-slurm-XXXXXX)
chmod 0755 "$work"
cleanup() {
  scancel --full --signal=TERM --partition=rmtest 2> /dev/null || true
  for daemon in slurmctld slurmd munged; do
    [ -f "$work/$daemon.pid" ] && kill "$(cat "$work/$daemon.pid")" 2> /dev/null || true
  done
  for daemon in slurmctld slurmd munged; do
    for _ in $(seq 100); do
      [ -f "$work/$daemon.pid" ] && kill -0 "$(cat "$work/$daemon.pid")" 2> /dev/null || break
      sleep 0.1
    done
  done
  if [ "${status:-1}" != 0 ]; then
    for f in "$work"/*.log "$work"/rm/*.log "$work"/job/*.out; do
      [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
    done
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# munge, with a key and socket of its own.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 0400 "$work/munge.key"
munged --force --key-file="$work/munge.key" --socket="$work/munge.sock" \
    --pid-file="$work/munged.pid" --log-file="$work/munged.log" \
    --seed-file="$work/munge.seed" || skip "munged cannot start: $(tail -n 3 "$work/munged.log")"

node=$(hostname)
export SLURM_CONF="$work/slurm.conf"
mkdir -p "$work/state" "$work/spool"
cat > "$SLURM_CONF" <<CONF
ClusterName=ringmastertest
SlurmctldHost=$node
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=rmtest Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -i || skip "slurmctld cannot start: $(tail -n 3 "$work/slurmctld.log" 2> /dev/null)"
slurmd || skip "slurmd cannot start: $(tail -n 3 "$work/slurmd.log" 2> /dev/null)"
for _ in $(seq 300); do
  state=$(sinfo -h -o %T 2> /dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.1
done
[ "$state" = idle ] || skip "the Slurm node did not become idle (state '$state'): $(tail -n 5 "$work/slurmd.log")"
echo "slurm up: node $node idle"

# The binaries, in one directory as on an installed machine.
mkdir -p "$work/bin" "$work/job"
for program in client/ringmaster coordinator/ringmaster-coordinator worker/ringmaster-worker \
               trainer/ringmaster-trainer; do
  cp "$src/$program" "$work/bin/"
done
cat > "$work/job/train.yaml" <<'SPEC'
name: slurm-trainer
ranks: 2
trainer:
  model: {type: mlp, hidden: [32]}
  data: {path: "synthetic:rows=2048,features=16,classes=4"}
  epochs: 1
  batch_size: 64
SPEC
cat > "$work/job/fail.yaml" <<'SPEC'
name: slurm-exit-3
ranks: 1
command: ["sh", "-c", "echo failing on purpose; exit 3"]
SPEC

run_batch() {  # spec -> the batch job's exit code
  RINGMASTER_BIN_DIR="$work/bin" RINGMASTER_DIR="$work/rm" RINGMASTER_SLOTS=2 \
    RINGMASTER_PORT=$(free_port_pair) RINGMASTER_WORKER_PORT=$(free_port_pair) \
    sbatch --wait --nodes=1 --chdir="$work/job" --output="$work/job/$1.out" \
      --export=ALL "$src/deploy/slurm/ringmaster.sbatch" "$1.yaml" > /dev/null || return $?
}
rc=0
run_batch train || rc=$?
[ $rc = 0 ] || { echo "FAIL: the trainer job's batch job ended with $rc"; exit 1; }
grep -q "SUCCEEDED" "$work/job/train.out" || { echo "FAIL: no SUCCEEDED in the output"; exit 1; }
echo "trainer job over sbatch: exit 0"
rm -rf "$work/rm"
rc=0
run_batch fail || rc=$?
[ $rc = 3 ] || { echo "FAIL: a rank exiting with 3 ended the batch job with $rc"; exit 1; }
echo "failing job over sbatch: exit 3"
status=0
