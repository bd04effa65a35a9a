#!/usr/bin/env bash
# Installs Ringmaster's binaries and systemd units on this machine, and the
# Debian packages the binaries link against.
#   install.sh [--prefix /usr/local] [--enable coordinator,worker]
#              [--coordinator HOST:PORT] [--advertise-host NAME]
#              [--metrics-bind ADDRESS] [--http-bind ADDRESS]
#              [--store DSN --peers HOST:PORT,...]
#              [--queues FILE] [--images]
#              [--root /] [--bin-dir DIR] [--no-deps]
# --enable      enables (and, on a running systemd, starts) those units; with
#               coordinator, makes /etc/ringmaster/admin.token if there is none
# --coordinator where this machine's worker finds the coordinator
# --advertise-host
#               the name or address other machines reach this machine's
#               daemons at (default: its host name)
# --metrics-bind
#               where /metrics listens (default 127.0.0.1; 0.0.0.0 for a
#               Prometheus on another machine)
# --http-bind   where the coordinator's HTTP/JSON API and web console listen
#               (HTTPS, port 7072; default 127.0.0.1; 0.0.0.0 for browsers
#               on other machines; docs/console.md)
# --store, --peers
#               several coordinators on one PostgreSQL (docs/high-availability.md):
#               the database as libpq's URI (its password in
#               /etc/ringmaster/store.password, mode 600, the ringmaster
#               user's), and every coordinator's HOST:PORT
#               These are written to /etc/ringmaster/ringmaster.env, which the
#               units read.
# --queues      the coordinator's queues (docs/scheduling.md): FILE is
#               installed as /etc/ringmaster/queues.yaml, which the
#               coordinator reads again on `systemctl reload
#               ringmaster-coordinator` and when it changes
# --bin-dir     holds ringmaster, ringmaster-coordinator, ringmaster-worker,
#               ringmaster-trainer and ringmaster-container-init (default: bin/ beside this script in a
#               release archive, else bazel-bin of this checkout)
# --images      this machine's worker runs jobs with an image
#               (docs/containers.md): installs runc, skopeo and umoci, and the
#               unit's drop-in that lets the worker run them (as root)
# --root        installs below another directory (an image, or a test): no
#               user is created, no package installed, no unit started
# --no-deps     does not install the runtime packages (runtime-packages.txt)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local
root=/
bin_dir="$here/bin"
[ -d "$bin_dir" ] || bin_dir="$here/../bazel-bin"
enable=""
coordinator=""
advertise=""
metrics_bind=""
http_bind=""
store=""
peers=""
queues=""
images=0
deps=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --enable) enable=$2; shift 2 ;;
    --coordinator) coordinator=$2; shift 2 ;;
    --advertise-host) advertise=$2; shift 2 ;;
    --metrics-bind) metrics_bind=$2; shift 2 ;;
    --http-bind) http_bind=$2; shift 2 ;;
    --store) store=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --queues) queues=$2; shift 2 ;;
    --images) images=1; shift ;;
    --no-deps) deps=0; shift ;;
    *) echo "install.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
units=()
for role in ${enable//,/ }; do
  case "$role" in
    coordinator|worker) units+=("ringmaster-$role.service") ;;
    *) echo "install.sh: --enable takes coordinator and/or worker, not '$role'" >&2; exit 2 ;;
  esac
done
case "$coordinator" in
  ""|*:[0-9]*) ;;
  *) echo "install.sh: --coordinator takes HOST:PORT, not '$coordinator'" >&2; exit 2 ;;
esac
case "$store" in
  "") [ -z "$peers" ] || { echo "install.sh: --peers goes with --store" >&2; exit 2; } ;;
  postgresql://*|postgres://*)
    case "$peers" in
      *:[0-9]*) ;;
      *) echo "install.sh: --store needs --peers HOST:PORT,... (every coordinator)" >&2; exit 2 ;;
    esac ;;
  *) echo "install.sh: --store takes a postgresql:// URI, not '$store'" >&2; exit 2 ;;
esac
if [ -n "$queues" ] && [ ! -f "$queues" ]; then
  echo "install.sh: --queues $queues is not a file" >&2
  exit 2
fi
case "$advertise" in
  *:*|*/*|*" "*) echo "install.sh: --advertise-host takes a name or IPv4 address, not '$advertise'" >&2
                 exit 2 ;;
esac

find_bin() {
  for candidate in "$bin_dir/$1" "$bin_dir/client/$1" "$bin_dir/coordinator/$1" \
                   "$bin_dir/worker/$1" "$bin_dir/trainer/$1"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "install.sh: $1 not found in $bin_dir (build with bazel build //...)" >&2
  exit 1
}
# Every binary is found before anything is installed.
programs=(ringmaster ringmaster-coordinator ringmaster-worker ringmaster-trainer
          ringmaster-container-init)
sources=()
for program in "${programs[@]}"; do sources+=("$(find_bin "$program")"); done

# The Debian packages of the libraries the binaries link (a release archive
# lists them in runtime-packages.txt).
if [ "$root" = / ] && [ $deps = 1 ] && [ -f "$here/runtime-packages.txt" ]; then
  missing=()
  while read -r package; do
    [ -n "$package" ] || continue
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done < "$here/runtime-packages.txt"
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing runtime packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# The OCI runtime and the image tools of a worker that runs images.
if [ "$root" = / ] && [ $deps = 1 ] && [ $images = 1 ]; then
  missing=()
  for package in runc skopeo umoci; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing the image tools: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

dest="${root%/}"
install -d -m 0755 "$dest$prefix/bin" "$dest/etc/systemd/system"
for i in "${!programs[@]}"; do
  install -m 0755 "${sources[$i]}" "$dest$prefix/bin/${programs[$i]}"
done
for unit in ringmaster-coordinator.service ringmaster-worker.service; do
  sed "s|/usr/local/bin/|$prefix/bin/|g" "$here/systemd/$unit" > "$dest/etc/systemd/system/$unit"
  chmod 0644 "$dest/etc/systemd/system/$unit"
done
# The Slurm batch script, for users of the machine.
if [ -f "$here/slurm/ringmaster.sbatch" ]; then
  install -D -m 0755 "$here/slurm/ringmaster.sbatch" \
    "$dest$prefix/share/ringmaster/slurm/ringmaster.sbatch"
fi
# Credentials (TLS files, the admin token) live here; ranks write below /srv/ringmaster.
install -d -m 0750 "$dest/etc/ringmaster" "$dest/etc/ringmaster/tls"
install -d -m 1777 "$dest/srv/ringmaster"
# KEY=VALUE in ringmaster.env, replacing the key's old line.
set_env() {
  local file="$dest/etc/ringmaster/ringmaster.env"
  touch "$file"
  chmod 0644 "$file"
  grep -v "^$1=" "$file" > "$file.new" || true
  printf '%s=%s\n' "$1" "$2" >> "$file.new"
  mv "$file.new" "$file"
}
[ -z "$coordinator" ] || set_env RINGMASTER_COORDINATOR "$coordinator"
[ -z "$advertise" ] || set_env RINGMASTER_ADVERTISE_HOST "$advertise"
[ -z "$metrics_bind" ] || set_env RINGMASTER_METRICS_BIND "$metrics_bind"
[ -z "$http_bind" ] || set_env RINGMASTER_HTTP_BIND "$http_bind"
[ -z "$store" ] || set_env RINGMASTER_STORE_FLAGS \
  "\"--store=$store --store-password-file=/etc/ringmaster/store.password --peers=$peers\""
if [ -n "$queues" ]; then
  install -m 0640 "$queues" "$dest/etc/ringmaster/queues.yaml"
  set_env RINGMASTER_QUEUES_FLAGS --queues=/etc/ringmaster/queues.yaml
fi
if [ $images = 1 ]; then
  install -D -m 0644 "$here/systemd/ringmaster-worker-images.conf" \
    "$dest/etc/systemd/system/ringmaster-worker.service.d/images.conf"
  set_env RINGMASTER_WORKER_FLAGS \
    "\"--container-runtime=runc --container-init=$prefix/bin/ringmaster-container-init\""
fi
if [ ${#units[@]} -gt 0 ]; then
  if [ "$root" = / ]; then
    systemctl enable "${units[@]}"
  else
    systemctl --root="$dest" enable "${units[@]}"
  fi
fi

if [ "$root" = / ]; then
  if ! id ringmaster > /dev/null 2>&1; then
    # uid and gid 10001 where free, as in the image: the same on every
    # machine, so that files on shared storage (checkpoints) are its own
    # everywhere.
    groupadd --system $(getent group 10001 > /dev/null || echo --gid 10001) ringmaster
    useradd --system $(getent passwd 10001 > /dev/null || echo --uid 10001) --gid ringmaster \
      --home-dir /var/lib/ringmaster --shell /usr/sbin/nologin ringmaster
  fi
  chown root:ringmaster /etc/ringmaster
  [ ! -f /etc/ringmaster/queues.yaml ] || chown root:ringmaster /etc/ringmaster/queues.yaml
  chown ringmaster:ringmaster /etc/ringmaster/tls
  # The admin credential the coordinator's unit names, made once.
  if [[ " ${units[*]} " == *" ringmaster-coordinator.service "* ]] &&
     [ ! -f /etc/ringmaster/admin.token ]; then
    (umask 077; head -c 32 /dev/urandom | base64 > /etc/ringmaster/admin.token)
    chown ringmaster:ringmaster /etc/ringmaster/admin.token
    echo "made /etc/ringmaster/admin.token: the admin credential (ringmaster --token-file)"
  fi
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    # Started only once their credentials exist (see below).
    if [ ${#units[@]} -gt 0 ] && [ -f /etc/ringmaster/tls/ca.crt ]; then
      systemctl restart "${units[@]}"
    fi
  fi
  cat <<NEXT
Installed in $prefix/bin and /etc/systemd/system. Next (docs/quickstart-cluster.md):
  on ONE admin machine, make every certificate with one CA:
    ringmaster certs init --dir tls --host <coordinator host> --worker <each worker's hostname>...
  copy to this machine's /etc/ringmaster/tls only its own files (ca.crt, and
  coordinator.* or worker-<hostname>.*; never ca.key), then:
    chown -R ringmaster: /etc/ringmaster/tls
    systemctl start ringmaster-coordinator   # on the coordinator's host
    systemctl start ringmaster-worker        # on each worker
NEXT
fi
