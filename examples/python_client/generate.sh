#!/bin/sh
# Generates the Python modules of Ringmaster's API from proto/ into OUT
# (default: ./gen), with Debian's protoc and grpc_python_plugin
# (apt install protobuf-compiler protobuf-compiler-grpc python3-grpcio).
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$here/gen}"
mkdir -p "$out"
cd "$root"
protoc -I. --python_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  proto/job.proto proto/cluster.proto
echo "$out"
