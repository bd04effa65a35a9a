#!/usr/bin/env bash
# The systemd units as deploy/install.sh installs them: `systemd-analyze
# verify` finds nothing to say, and `systemd-analyze security` rates each
# unit's exposure at 3.0 or less (printed here).
set -euo pipefail
if ! command -v systemd-analyze > /dev/null; then
  echo "SKIPPED: systemd-analyze is not installed (Debian package systemd; ./dev installs it)"
  exit 0
fi
src="$TEST_SRCDIR/$TEST_WORKSPACE"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# The distribution's own units, which ours are wanted by and ordered after.
mkdir -p "$root/usr/lib/systemd"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
bins="$root/built"
mkdir -p "$bins"
for program in client/ringmaster coordinator/ringmaster-coordinator worker/ringmaster-worker \
               trainer/ringmaster-trainer; do
  cp "$src/$program" "$bins/"
done
"$src/deploy/install.sh" --root "$root" --bin-dir "$bins"

units=(ringmaster-coordinator.service ringmaster-worker.service)
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
exit $status
