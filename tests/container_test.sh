#!/usr/bin/env bash
# The image of deploy/Dockerfile, built from the release archive (//:package)
# as docs/multi-host.md says, on a Debian 12 base made here from Debian's
# packages (no registry is needed). Then a coordinator and a worker of that
# image, started with the commands, users, credential modes and volumes of
# deploy/kubernetes (free ports on loopback instead of 7070/7080), run a
# 2-rank trainer job submitted with the image's own CLI: the image holds
# every library the binaries and the ranks need, ranks run as nobody, and
# their checkpoints land on the shared volume.
#
# Containers run under buildah's chroot isolation with the host's network,
# which needs root but no container engine or cgroup delegation.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # debootstrap
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/test_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (buildah's chroot isolation)"
for tool in podman buildah debootstrap; do
  command -v "$tool" > /dev/null ||
    skip "$tool is not installed (Debian packages podman buildah debootstrap; ./dev installs them)"
done

src="$TEST_SRCDIR/$TEST_WORKSPACE"
version=$(tr -d '[:space:]' < "$src/VERSION")
work=$(mktemp -d /var/tmp/ringmaster-container-test.XXXXXX)
image="localhost/ringmaster-container-test-$$:$version"
container=""
pids=()
ports=()
# The daemons are the only processes with these ports on their lines.
signal_daemons() {  # signal_daemons SIGNAL: true if a daemon was there to get it
  local found=1
  for port in "${ports[@]}"; do pkill "-$1" -f -- "--port=$port( |\$)" && found=0; done
  return $found
}
cleanup() {
  if signal_daemons TERM; then
    for _ in $(seq 100); do signal_daemons 0 || break; sleep 0.1; done
    signal_daemons KILL || true
  fi
  wait 2> /dev/null || true
  [ -n "$container" ] && buildah rm "$container" > /dev/null 2>&1 || true
  podman rmi -f "$image" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The base: Debian 12 as debian:12-slim has it (minbase), kept between runs.
base=localhost/ringmaster-test-base:bookworm
if ! podman image exists "$base"; then
  mirror=${RINGMASTER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  if ! debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1
  then
    tail -n 5 "$work/debootstrap.log"
    skip "debootstrap could not make a Debian 12 base from $mirror"
  fi
  tar -C "$work/rootfs" -c . | podman import - "$base" > /dev/null
  rm -rf "$work/rootfs"
  echo "made the base image $base with debootstrap"
fi

# The build, from the directory that holds the archive, with the Dockerfile
# of the unpacked archive, as docs/multi-host.md says.
archive="ringmaster-$version-linux-x86_64.tar.gz"
mkdir "$work/context"
cp "$src/ringmaster-linux-x86_64.tar.gz" "$work/context/$archive"
tar -xzf "$work/context/$archive" -C "$work"
dockerfile="$work/ringmaster-$version/Dockerfile"
if ! podman build --isolation=chroot --network=host --pull=never --from "$base" \
    -f "$dockerfile" --build-arg "VERSION=$version" -t "$image" "$work/context" \
    > "$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log"
  fail "podman build of $dockerfile failed"
fi
echo "built $image from $archive"

# The GPU build as docs/multi-host.md gives it (--build-arg CUDA=13-0) takes
# the archive ./dev package --cuda writes, ...-cuda.tar.gz, by default: with
# only the CPU archive at hand it stops at the COPY, naming the one it
# wants; given that one, it goes on to NVIDIA's repository (which this test
# need not reach, so the build may end there).
cuda_archive="ringmaster-$version-linux-x86_64-cuda.tar.gz"
cuda_build() {  # cuda_build CONTEXT: the build's output
  podman build --isolation=chroot --network=host --pull=never --from "$base" \
      -f "$dockerfile" --build-arg "VERSION=$version" --build-arg CUDA=13-0 "$1" 2>&1 || true
}
out=$(cuda_build "$work/context")
grep -q "$cuda_archive" <<< "$out" ||
  { tail -n 20 <<< "$out"; fail "the CUDA build did not ask for $cuda_archive"; }
mkdir "$work/cuda-context"
ln "$work/context/$archive" "$work/cuda-context/$cuda_archive"
out=$(cuda_build "$work/cuda-context")
grep -q "developer.download.nvidia.com" <<< "$out" ||
  { tail -n 20 <<< "$out"; fail "the CUDA build with $cuda_archive did not reach the CUDA step"; }
echo "--build-arg CUDA=13-0 takes $cuda_archive"
container=$(buildah from --pull-never "$image")

for _ in 1 2 3 4; do ports+=("$(free_port)"); done
coordinator_port=${ports[0]} worker_port=${ports[2]}

# Volumes as the manifests mount them: the Secrets (coordinator's 0440 for
# its group, worker's 0400), the state volumes and the shared checkpoint
# volume, whose group is the coordinator's (fsGroup 10001).
mkdir -p "$work"/{tls,coordinator-tls,worker-tls,coordinator-state,worker-state,checkpoints,job}
in_image() {  # in_image [buildah run options] -- COMMAND...
  buildah run --isolation chroot --network host "$@"
}
in_image -v "$work/tls:/tls" "$container" -- \
    ringmaster certs init --dir /tls --host 127.0.0.1 --worker node-a > /dev/null
head -c 32 /dev/urandom | base64 > "$work/tls/admin.token"
cp "$work"/tls/{ca.crt,coordinator.crt,coordinator.key,admin.token} "$work/coordinator-tls/"
cp "$work"/tls/{ca.crt,worker-node-a.crt,worker-node-a.key} "$work/worker-tls/"
chown root:10001 "$work"/coordinator-tls/*
chmod 0440 "$work"/coordinator-tls/*
chmod 0400 "$work"/worker-tls/*
chown 10001:10001 "$work/coordinator-state"
chown root:10001 "$work/checkpoints"
chmod 2775 "$work/checkpoints"

in_image --user 10001:10001 -v "$work/coordinator-state:/var/lib/ringmaster" \
    -v "$work/checkpoints:/srv/ringmaster/checkpoints" \
    -v "$work/coordinator-tls:/etc/ringmaster/tls:ro" "$container" -- \
    ringmaster-coordinator --state-dir=/var/lib/ringmaster/state --port="$coordinator_port" \
    --metrics-port="${ports[1]}" --http-port=0 --bind=127.0.0.1 --tls-dir=/etc/ringmaster/tls \
    --token-file=/etc/ringmaster/tls/admin.token \
    --advertise-address="127.0.0.1:$coordinator_port" \
    --checkpoint-dir=/srv/ringmaster/checkpoints/jobs > "$work/coordinator.log" 2>&1 &
pids+=($!)
in_image -v "$work/worker-state:/var/lib/ringmaster-worker" \
    -v "$work/checkpoints:/srv/ringmaster/checkpoints" \
    -v "$work/worker-tls:/etc/ringmaster/tls:ro" "$container" -- \
    ringmaster-worker --coordinator="127.0.0.1:$coordinator_port" --id=node-a \
    --port="$worker_port" --metrics-port="${ports[3]}" --bind=127.0.0.1 \
    --tls-dir=/etc/ringmaster/tls --rank-user=nobody:nogroup \
    --advertise-address="127.0.0.1:$worker_port" --state-dir=/var/lib/ringmaster-worker \
    --trainer-bin=/usr/local/bin/ringmaster-trainer --slots=2 > "$work/worker.log" 2>&1 &
pids+=($!)

cli() {
  in_image --workingdir /job -v "$work/tls:/etc/ringmaster/admin:ro" -v "$work/job:/job" \
      "$container" -- ringmaster --coordinator "127.0.0.1:$coordinator_port" \
      --tls-dir /etc/ringmaster/admin "$@"
}
registered=0
for _ in $(seq 300); do
  if grep -q 'node-a.* ALIVE' <<< "$(cli workers 2> /dev/null)"; then registered=1; break; fi
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2> /dev/null || {
      tail -n 20 "$work/coordinator.log" "$work/worker.log"; fail "a daemon of the image ended"; }
  done
  sleep 0.2
done
[ $registered = 1 ] || { tail -n 20 "$work/coordinator.log" "$work/worker.log";
                         fail "the worker did not register within a minute"; }
echo "the image's coordinator (uid 10001) and worker run; node-a registered"

cat > "$work/job/job.yaml" <<'EOF'
name: in-the-image
ranks: 2
trainer:
  model: {type: mlp, hidden: [64]}
  data: {path: "synthetic:rows=2048,features=16,classes=4"}
  epochs: 2
  batch_size: 64
  checkpoint_every_steps: 8
EOF
if ! out=$(cli submit --follow job.yaml 2> "$work/submit.err"); then
  tail -n 20 "$work/submit.err"
  echo "$out" | tail -n 20
  tail -n 20 "$work/worker.log"
  fail "the job did not succeed in the image"
fi
job=$(echo "$out" | awk 'NR == 1 { print $1 }')
state=$(cli status "$job" | tr -s ' ' | grep -m 1 -o 'SUCCEEDED' || true)
[ "$state" = SUCCEEDED ] || fail "job $job is not SUCCEEDED: $(cli status "$job")"
owner=$(stat -c %U "$work/checkpoints/jobs/$job" 2> /dev/null || true)
checkpoints=$(find "$work/checkpoints/jobs/$job" -type f 2> /dev/null | wc -l)
[ "$checkpoints" -gt 0 ] || fail "no checkpoint of job $job on the shared volume"
[ "$owner" = nobody ] || fail "job $job's checkpoints were written by $owner, not the ranks' nobody"
echo "job $job SUCCEEDED in the image: its ranks (nobody) wrote $checkpoints checkpoint files" \
     "on the shared volume"
