#!/usr/bin/env bash
# Installs Ringmaster's binaries and systemd units on this machine.
#   install.sh [--prefix /usr/local] [--root /] [--bin-dir DIR]
# --bin-dir holds ringmaster, ringmaster-coordinator, ringmaster-worker and
# ringmaster-trainer (default: bazel-bin of this checkout). --root installs
# below another directory (an image, or a test) and then neither creates
# the `ringmaster` user nor reloads systemd.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local
root=/
bin_dir="$here/../bazel-bin"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    *) echo "install.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

find_bin() {
  for candidate in "$bin_dir/$1" "$bin_dir/client/$1" "$bin_dir/coordinator/$1" \
                   "$bin_dir/worker/$1" "$bin_dir/trainer/$1"; do
    [ -x "$candidate" ] && { echo "$candidate"; return; }
  done
  echo "install.sh: $1 not found in $bin_dir (build with bazel build //...)" >&2
  exit 1
}

dest="${root%/}"
install -d -m 0755 "$dest$prefix/bin" "$dest/etc/systemd/system"
for program in ringmaster ringmaster-coordinator ringmaster-worker ringmaster-trainer; do
  install -m 0755 "$(find_bin "$program")" "$dest$prefix/bin/$program"
done
for unit in ringmaster-coordinator.service ringmaster-worker.service; do
  sed "s|/usr/local/bin/|$prefix/bin/|g" "$here/systemd/$unit" > "$dest/etc/systemd/system/$unit"
  chmod 0644 "$dest/etc/systemd/system/$unit"
done
# Credentials (TLS files, the admin token) live here; ranks write below /srv/ringmaster.
install -d -m 0750 "$dest/etc/ringmaster"
install -d -m 1777 "$dest/srv/ringmaster"

if [ "$root" = / ]; then
  if ! id ringmaster > /dev/null 2>&1; then
    useradd --system --home-dir /var/lib/ringmaster --shell /usr/sbin/nologin ringmaster
  fi
  chown root:ringmaster /etc/ringmaster
  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
  cat <<NEXT
Installed in $prefix/bin and /etc/systemd/system. Next (docs/security.md):
  ringmaster certs init --dir /etc/ringmaster/tls --host <coordinator host> --worker <each worker's hostname>
  chown -R ringmaster: /etc/ringmaster/tls
  systemctl enable --now ringmaster-coordinator   # on the coordinator's host
  systemctl enable --now ringmaster-worker        # on each worker
NEXT
fi
