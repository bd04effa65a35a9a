#!/usr/bin/env bash
# Builds an image for Ringmaster jobs from a Debian root file system
# (debootstrap's minbase and the packages named) and pushes it:
#
#   build.sh REGISTRY[:PORT]/NAME:TAG [PACKAGE...]     (default: python3)
#   build.sh registry.example:5000/team/python:3.11
#   build.sh registry.example:5000/team/torch:1.13 python3 python3-torch
#
# Needs root, debootstrap and buildah. REGISTRY_AUTH_FILE names the
# registry's credentials (auth.json, as `buildah login --authfile` writes
# it), CERT_DIR a directory with its ca.crt, DEBIAN_MIRROR another mirror,
# SUITE another release than bookworm.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 REGISTRY/NAME:TAG [PACKAGE...]" >&2
  exit 2
fi
ref=$1
shift
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(python3)
include=$(IFS=,; echo "${packages[*]}")
work=$(mktemp -d)
ctr=""
cleanup() {
  [ -z "$ctr" ] || buildah rm "$ctr" > /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

debootstrap --variant=minbase --include="$include" "${SUITE:-bookworm}" "$work/rootfs" \
  "${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What only apt needs.
rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*

ctr=$(buildah from scratch)
cp -a "$work/rootfs/." "$(buildah mount "$ctr")/"
buildah umount "$ctr" > /dev/null
buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --workingdir / "$ctr"
buildah commit -q "$ctr" "$ref" > /dev/null
buildah push -q ${REGISTRY_AUTH_FILE:+--authfile "$REGISTRY_AUTH_FILE"} \
  ${CERT_DIR:+--cert-dir "$CERT_DIR"} "$ref" "docker://$ref"
echo "pushed $ref ($(du -sh "$work/rootfs" | cut -f1) unpacked)"
