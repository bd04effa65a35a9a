#!/usr/bin/env bash
# Writes a release archive of Ringmaster:
#   package.sh OUT.tar.gz VERSION_FILE FILE...
# FILEs are the binaries (to bin/), deploy/... (to the archive's top:
# install.sh, systemd/, kubernetes/, slurm/, prometheus/, grafana/,
# Dockerfile), docs/..., proto/*.proto, python/... (the Python package,
# for `pip install ./python`) and README.md. The archive holds one directory,
# ringmaster-<version>/, and runtime-packages.txt: the Debian packages of
# the shared libraries the binaries link and of what ranks use beside them
# (python3-sklearn, python3-grpcio), for install.sh and the Dockerfile.
# The same inputs give the same bytes.
set -euo pipefail
out=$1
version=$(tr -d '[:space:]' < "$2")
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top="$stage/ringmaster-$version"
mkdir -p "$top/bin"
for file in "$@"; do
  case "$file" in
    */ringmaster|*/ringmaster-coordinator|*/ringmaster-worker|*/ringmaster-trainer|\
    */ringmaster-container-init)
      install -m 0755 "$file" "$top/bin/" ;;
    deploy/package.sh|deploy/BUILD) ;;
    deploy/*) install -D -m "$( [ -x "$file" ] && echo 0755 || echo 0644)" "$file" \
                "$top/${file#deploy/}" ;;
    docs/*|proto/*.proto|README.md|VERSION|python/*) install -D -m 0644 "$file" "$top/$file" ;;
    *) echo "package.sh: do not know where $file goes" >&2; exit 1 ;;
  esac
done
# Libraries resolved as the binaries load them, each to the package that
# ships a file of that name (of this architecture, not a 32-bit one).
# (ringmaster-container-init is static: ldd says so and fails.)
{ ldd "$top"/bin/* || true; } | awk '/=> \// { print $3 }' | sort -u | while read -r lib; do
  owner=$(dpkg -S "*/$(basename "$lib")" 2>/dev/null | grep -v -e ':i386' -e '-i386' -e '/lib32/' |
            head -n 1 | cut -d: -f1) || true
  if [ -n "$owner" ]; then
    echo "$owner"
  elif [[ "$lib" != /usr/local/cuda* ]]; then
    echo "package.sh: no Debian package ships $lib" >&2
    exit 1
  fi
done > "$stage/linked.txt"
# And what runs beside them: scikit-learn's handwritten digits (the `digits`
# data set of the trainer and `ringmaster demo`), gRPC for the Python
# module ranks report their progress with, elfutils' eu-stack, with
# which a worker takes a hung rank's native stacks, and sqlite3, which
# backs up the coordinator's store while it runs (docs/how-to.md).
printf '%s\n' python3-sklearn python3-grpcio elfutils sqlite3 | cat - "$stage/linked.txt" | sort -u \
  > "$top/runtime-packages.txt"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" \
    -cf - "ringmaster-$version" | gzip -n > "$out"
