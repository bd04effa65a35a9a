#!/bin/bash
# The API's protos as other languages take them: their Go and Java options
# (read back from Debian's protoc, as a descriptor set) and, when Debian's
# grpc-java plugin is installed, Java messages and stubs generated whole.
set -euo pipefail
. tests/test_lib.sh
python=/usr/bin/python3
"$python" -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf is not installed"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/proto-options.XXXXXX")"

protoc -I. --include_imports --descriptor_set_out="$work/api.pb" \
  proto/job.proto proto/cluster.proto proto/worker.proto proto/rendezvous.proto
options="$("$python" - "$work/api.pb" <<'PY'
import sys
from google.protobuf import descriptor_pb2
files = descriptor_pb2.FileDescriptorSet.FromString(open(sys.argv[1], "rb").read()).file
for f in files:
    if f.name.startswith("proto/"):
        o = f.options
        print(f.name, o.go_package, o.java_package, o.java_multiple_files)
PY
)"
echo "$options"
while read -r name go java multiple; do
  [ "$go $java $multiple" = "ringmaster.dev/api/ringmaster/v1;ringmasterv1 dev.ringmaster.api.v1 True" ] ||
    fail "$name options: $go $java $multiple"
done <<<"$options"
[ "$(wc -l <<<"$options")" -eq 4 ] || fail "expected the options of 4 protos"
if command -v grpc_java_plugin >/dev/null; then
  mkdir "$work/java"
  protoc -I. --java_out="$work/java" --grpc-java_out="$work/java" \
    --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" \
    proto/job.proto proto/cluster.proto proto/worker.proto proto/rendezvous.proto
  for f in Job JobServiceGrpc Worker WorkerServiceGrpc JobProto; do
    [ -f "$work/java/dev/ringmaster/api/v1/$f.java" ] || fail "no $f.java from protoc --java_out"
  done
fi
echo "PASS"
