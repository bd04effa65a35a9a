#!/bin/sh
# Generates the Python modules of the ringmaster.v1 API (messages and gRPC
# stubs) from proto/ into OUT/ringmaster/v1, with Debian's protoc and
# grpc_python_plugin. The protos are read as ringmaster/v1/*.proto, so the
# modules import each other as `from ringmaster.v1 import job_pb2`.
#
#   python/generate_api.sh python     # refreshes python/ringmaster/v1
#
# The build runs it too (//python:api_generated), and //python:api_fresh_test
# fails when the files in python/ringmaster/v1 differ from what it makes.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 OUT [PROTO...]" >&2; exit 2; }
mkdir -p "$1"
out="$(cd "$1" && pwd)"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -gt 0 ] || set -- "$root/proto/job.proto" "$root/proto/cluster.proto" \
  "$root/proto/worker.proto" "$root/proto/rendezvous.proto"
plugin="$(command -v grpc_python_plugin)" ||
  { echo "grpc_python_plugin is missing (apt install protobuf-compiler-grpc)" >&2; exit 1; }
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/ringmaster/v1"
for proto in "$@"; do
  sed 's|^import "proto/|import "ringmaster/v1/|' "$proto" > "$tree/ringmaster/v1/$(basename "$proto")"
done
cd "$tree"
protoc -I. --python_out="$out" --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  ringmaster/v1/*.proto
