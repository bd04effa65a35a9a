#!/usr/bin/env bash
# The release archive (//:package) as a user installs it: unpacked, its
# install.sh --prefix --enable puts the binaries and units in place and
# enables them; the binaries run with the libraries runtime-packages.txt
# names; `systemd-analyze verify` finds nothing to say about the installed
# units, and `systemd-analyze security` rates each unit's exposure at 3.0
# or less (printed here). Bad arguments are refused before anything is
# installed.
set -euo pipefail
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/test_lib.sh"
command -v systemd-analyze > /dev/null ||
  skip "systemd-analyze is not installed (Debian package systemd; ./dev installs it)"
src="$TEST_SRCDIR/$TEST_WORKSPACE"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tar -xzf "$src/ringmaster-linux-x86_64.tar.gz" -C "$work"
version=$(tr -d '[:space:]' < "$src/VERSION")
pkg="$work/ringmaster-$version"
[ -d "$pkg" ] || fail "the archive has no ringmaster-$version/ directory: $(ls "$work")"
for file in install.sh Dockerfile runtime-packages.txt README.md docs/multi-host.md \
            docs/reference.md systemd/ringmaster-worker.service kubernetes/base/worker.yaml \
            slurm/ringmaster.sbatch bin/ringmaster bin/ringmaster-trainer proto/job.proto \
            proto/worker.proto python/pyproject.toml python/ringmaster/client.py \
            python/ringmaster/v1/job_pb2.py; do
  [ -e "$pkg/$file" ] || fail "the archive lacks $file"
done
grep -qx 'libgrpc++1.51' "$pkg/runtime-packages.txt" || fail "runtime-packages.txt lacks gRPC"
grep -qx 'python3-sklearn' "$pkg/runtime-packages.txt" || fail "runtime-packages.txt lacks python3-sklearn (the digits data set)"
grep -qx 'elfutils' "$pkg/runtime-packages.txt" || fail "runtime-packages.txt lacks elfutils (eu-stack, for hung ranks' stacks)"
grep -qx 'sqlite3' "$pkg/runtime-packages.txt" || fail "runtime-packages.txt lacks sqlite3 (the store's backup, docs/how-to.md)"
while read -r package; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    fail "runtime-packages.txt names $package, which is not installed here"
done < "$pkg/runtime-packages.txt"

# The Kubernetes files: no namespace of their own, a headless Service for
# the coordinator, /dev/shm in memory and the shared checkpoint volume for
# the ranks, the image of this version, GPUs per node in one place.
/usr/bin/python3 - "$pkg/kubernetes" "$version" <<'PY' || fail "Kubernetes files"
import glob, os, sys, yaml
top, version = sys.argv[1], sys.argv[2]
base = os.path.join(top, "base")
docs = {}
for path in glob.glob(os.path.join(base, "*.yaml")):
    for doc in yaml.safe_load_all(open(path)):
        if doc and "kind" in doc:
            assert "namespace" not in doc["metadata"], f"{path} names a namespace"
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
assert docs[("Service", "ringmaster-coordinator")]["spec"]["clusterIP"] == "None"
def pod(kind, name):
    return docs[(kind, name)]["spec"]["template"]["spec"]
def mounts(spec):
    return {m["mountPath"]: m["name"] for m in spec["containers"][0]["volumeMounts"]}
worker, coordinator = pod("DaemonSet", "ringmaster-worker"), pod("StatefulSet", "ringmaster-coordinator")
volumes = {v["name"]: v for v in worker["volumes"]}
assert volumes[mounts(worker)["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
for spec in (worker, coordinator):
    claim = {v["name"]: v for v in spec["volumes"]}[mounts(spec)["/srv/ringmaster/checkpoints"]]
    assert claim["persistentVolumeClaim"]["claimName"] == "ringmaster-checkpoints"
assert ("PersistentVolumeClaim", "ringmaster-checkpoints") in docs
# The queues: a ConfigMap mounted as a directory (a subPath is never
# updated), its file given to --queues, in base/ and in ha/.
assert "queues.yaml" in docs[("ConfigMap", "ringmaster-queues")]["data"]
ha_docs = list(yaml.safe_load_all(open(os.path.join(top, "components", "ha", "coordinator-ha.yaml"))))
ha = [d for d in ha_docs if d["kind"] == "StatefulSet"][0]["spec"]["template"]["spec"]
for spec in (coordinator, ha):
    mount = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "queues"][0]
    assert mount["mountPath"] == "/etc/ringmaster/queues" and "subPath" not in mount, mount
    assert {v["name"]: v for v in spec["volumes"]}["queues"]["configMap"]["name"] == "ringmaster-queues"
    assert "--queues=/etc/ringmaster/queues/queues.yaml" in " ".join(spec["containers"][0]["command"])
# The DSN is quoted for the shell: a URI with & is not cut.
assert '--store="$RINGMASTER_STORE"' in " ".join(ha["containers"][0]["command"])
assert "nvidia.com/gpu" not in str(worker), "GPUs are set in kubernetes/gpu only"
image = yaml.safe_load(open(os.path.join(top, "components", "image", "kustomization.yaml")))
assert image["images"][0]["newTag"] == version
assert "nvidia.com/gpu" in open(os.path.join(top, "components", "gpu", "kustomization.yaml")).read()
print("Kubernetes files: namespace-free, headless Service, shm and checkpoint volumes")
PY
# The kustomizations build, where kubectl is installed (it is not a Debian
# package).
if command -v kubectl > /dev/null; then
  for dir in kubernetes kubernetes/gpu kubernetes/ha kubernetes/ha-gpu; do
    rendered=$(kubectl kustomize "$pkg/$dir" 2>&1) || fail "kubectl kustomize $dir: $rendered"
    grep -q "image: ringmaster:$version" <<< "$rendered" ||
      fail "kubectl kustomize $dir does not use the image ringmaster:$version"
  done
  # HA: two coordinators named to every worker and rank, a standby's name
  # resolving although it is never ready, and GPUs where asked for.
  for dir in gpu ha ha-gpu; do
    kubectl kustomize "$pkg/kubernetes/$dir" | /usr/bin/python3 -c '
import sys, yaml
name, docs = sys.argv[1], [d for d in yaml.safe_load_all(sys.stdin) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
worker = by[("DaemonSet", "ringmaster-worker")]["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e.get("value") for e in worker["env"]}
names = [e["name"] for e in worker["env"]]
assert names.index("POD_NAMESPACE") < names.index("COORDINATORS"), names
assert "--coordinator=$(COORDINATORS)" in " ".join(worker["command"])
gpus = "nvidia.com/gpu" in str(worker.get("resources"))
assert gpus == ("gpu" in name), f"{name}: GPUs {gpus}"
if "ha" not in name:
    assert by[("StatefulSet", "ringmaster-coordinator")]["spec"]["replicas"] == 1
    assert env["COORDINATORS"].count(":7070") == 1, env
    sys.exit(0)
assert ("StatefulSet", "ringmaster-coordinator") not in by, f"{name} keeps the SQLite coordinator"
ha = by[("StatefulSet", "ringmaster-coordinator-ha")]["spec"]
pod = ha["template"]["spec"]["containers"][0]
assert ha["replicas"] == 2 and ha["podManagementPolicy"] == "Parallel", ha
assert ha["updateStrategy"]["type"] == "OnDelete", "a standby is never ready: rolling updates stall"
assert pod["readinessProbe"]["httpGet"]["path"] == "/ready"
service = by[("Service", ha["serviceName"])]["spec"]
assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"], service
svc = ha["serviceName"]
pods = [f"{svc}-{i}.{svc}.$(POD_NAMESPACE).svc.cluster.local:7070" for i in range(2)]
assert env["COORDINATORS"] == ",".join(pods), env["COORDINATORS"]
peers = {e["name"]: e.get("value") for e in pod["env"]}["COORDINATORS"]
assert peers == ",".join(pods) and "--peers=$(COORDINATORS)" in " ".join(pod["command"]), peers
' "$dir" || fail "kubectl kustomize kubernetes/$dir"
  done
  # The image named once reaches every pod, the HA coordinators' too.
  renamed="$work/kubernetes-renamed"
  cp -r "$pkg/kubernetes" "$renamed"
  sed -i 's#newName: ringmaster#newName: registry.example/ringmaster#' \
    "$renamed/components/image/kustomization.yaml"
  for dir in . gpu ha ha-gpu; do
    images=$(kubectl kustomize "$renamed/$dir" | grep "image:")
    ! grep -qv "image: registry.example/ringmaster:$version" <<< "$images" ||
      fail "kubernetes/$dir: an image not renamed: $images"
  done
  echo "kubectl kustomize: kubernetes, gpu, ha and ha-gpu build; ha's workers name both coordinators; the image is named once"
else
  echo "kubectl is not installed: the kustomizations were not built"
fi

# A bad argument installs nothing.
root="$work/root"
mkdir "$root"
if out=$("$pkg/install.sh" --root "$root" --enable scheduler 2>&1); then
  fail "install.sh accepted --enable scheduler"
fi
grep -q "'scheduler'" <<< "$out" || fail "the error does not name what is wrong: $out"
[ -z "$(ls -A "$root")" ] || fail "a refused install left files: $(ls -A "$root")"
if out=$("$pkg/install.sh" --root "$root" --queues "$work/no-such-queues.yaml" 2>&1); then
  fail "install.sh accepted a --queues that is no file"
fi
grep -q "no-such-queues.yaml" <<< "$out" || fail "the error does not name the file: $out"
[ -z "$(ls -A "$root")" ] || fail "a refused install left files: $(ls -A "$root")"

# The distribution's own units, which ours are wanted by and ordered after,
# and its kill (procps), which the coordinator's ExecReload runs.
mkdir -p "$root/usr/lib/systemd" "$root/bin"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp /bin/kill "$root/bin/"
printf 'queues:\n  - {name: team-a, quota: {slots: 4}}\n' > "$work/queues.yaml"
"$pkg/install.sh" --root "$root" --prefix /opt/ringmaster --enable coordinator,worker \
    --coordinator 10.1.2.3:7070,10.1.2.4:7070 --store postgresql://ringmaster@db:5432/ringmaster \
    --peers 10.1.2.3:7070,10.1.2.4:7070 --queues "$work/queues.yaml"
for program in ringmaster ringmaster-coordinator ringmaster-worker ringmaster-trainer; do
  "$root/opt/ringmaster/bin/$program" --help > /dev/null || fail "$program --help failed"
done
units=(ringmaster-coordinator.service ringmaster-worker.service)
for unit in "${units[@]}"; do
  grep -q "ExecStart=/opt/ringmaster/bin/" "$root/etc/systemd/system/$unit" ||
    fail "$unit does not start the binary of the --prefix"
  [ -L "$root/etc/systemd/system/multi-user.target.wants/$unit" ] || fail "$unit is not enabled"
done
[ -x "$root/opt/ringmaster/share/ringmaster/slurm/ringmaster.sbatch" ] ||
  fail "the Slurm batch script was not installed"
grep -qx "RINGMASTER_COORDINATOR=10.1.2.3:7070,10.1.2.4:7070" "$root/etc/ringmaster/ringmaster.env" ||
  fail "the worker's coordinator addresses were not written"
grep -q '^RINGMASTER_STORE_FLAGS="--store=postgresql://ringmaster@db:5432/ringmaster .*--peers=10.1.2.3:7070,10.1.2.4:7070"$' \
  "$root/etc/ringmaster/ringmaster.env" || fail "the coordinators' store and peers were not written"
cmp -s "$work/queues.yaml" "$root/etc/ringmaster/queues.yaml" || fail "--queues was not installed"
grep -qx "RINGMASTER_QUEUES_FLAGS=--queues=/etc/ringmaster/queues.yaml" \
  "$root/etc/ringmaster/ringmaster.env" || fail "the coordinator's --queues was not written"
coordinator_unit="$root/etc/systemd/system/ringmaster-coordinator.service"
grep -q '\$RINGMASTER_QUEUES_FLAGS' "$coordinator_unit" || fail "the unit does not pass --queues"
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$coordinator_unit" ||
  fail "the coordinator's unit has no ExecReload (systemctl reload fails)"
echo "installed from the archive: 4 binaries run, both units enabled"

out=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) || {
  echo "FAIL: systemd-analyze verify: $out"; exit 1; }
[ -z "$out" ] || { echo "FAIL: systemd-analyze verify had something to say: $out"; exit 1; }
echo "systemd-analyze verify: both units clean"

status=0
for unit in "${units[@]}"; do
  line=$(systemd-analyze security --offline=yes "$root/etc/systemd/system/$unit" 2>&1 | tail -n 1)
  exposure=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) .*/\1/p')
  echo "$unit: exposure $exposure ($line)"
  if [ -z "$exposure" ] || ! awk -v e="$exposure" 'BEGIN { exit !(e <= 3.0) }'; then
    echo "FAIL: $unit exposure above 3.0"
    status=1
  fi
done

# A worker that runs images: the drop-in that lets the worker run them,
# read by systemd with the unit, and the runtime's flags for the worker.
images_root="$work/images-root"
mkdir -p "$images_root/usr/lib/systemd" "$images_root/bin"
cp -r /usr/lib/systemd/system "$images_root/usr/lib/systemd/"
"$pkg/install.sh" --root "$images_root" --prefix /opt/ringmaster --enable worker --images \
    --coordinator 10.1.2.3:7070
dropin="$images_root/etc/systemd/system/ringmaster-worker.service.d/images.conf"
[ -f "$dropin" ] || fail "install.sh --images did not install the worker's drop-in"
grep -qx 'User=root' "$dropin" || fail "the drop-in does not run the worker as root"
grep -qx 'RINGMASTER_WORKER_FLAGS="--container-runtime=runc --container-init=/opt/ringmaster/bin/ringmaster-container-init"' \
  "$images_root/etc/ringmaster/ringmaster.env" || fail "the worker's --container-runtime was not written"
usage=$("$images_root/opt/ringmaster/bin/ringmaster-container-init" 2>&1 || true)
[[ "$usage" == usage:* ]] || fail "ringmaster-container-init does not run: $usage"
file -L "$images_root/opt/ringmaster/bin/ringmaster-container-init" | grep -q 'statically linked' ||
  fail "ringmaster-container-init is not static (it must run in any image)"
out=$(systemd-analyze verify --root="$images_root" ringmaster-worker.service 2>&1) || {
  echo "FAIL: systemd-analyze verify with the images drop-in: $out"; exit 1; }
[ -z "$out" ] || { echo "FAIL: systemd-analyze verify had something to say: $out"; exit 1; }
echo "the worker with --images: drop-in installed, systemd-analyze verify clean"
exit $status
