#!/bin/bash
# examples/python_client against a real local cluster: its modules
# generated from proto/ by Debian's protoc, then it submits (twice, with one
# request id), watches every job of its label, breaks its stream and resumes,
# and cancels. The protos' Go and Java options are checked on the way.
set -euo pipefail
. tests/test_lib.sh
python=/usr/bin/python3
"$python" -c 'import grpc' 2>/dev/null || skip "python3-grpcio is not installed"
command -v grpc_python_plugin >/dev/null || skip "grpc_python_plugin (protobuf-compiler-grpc) is missing"

work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/python-client.XXXXXX")"
state="$work/cluster"
cli="$PWD/client/ringmaster"
cleanup() { "$cli" down --state-dir "$state" >/dev/null 2>&1 || true; }
trap cleanup EXIT

gen="$(examples/python_client/generate.sh "$work/gen")"
[ -f "$gen/proto/job_pb2_grpc.py" ] || fail "generate.sh wrote no job_pb2_grpc.py in $gen"
options="$(cd "$gen" && "$python" -c '
from proto import job_pb2
o = job_pb2.DESCRIPTOR.GetOptions()
print(o.go_package, o.java_package, o.java_multiple_files)')"
[ "$options" = "ringmaster.dev/api/ringmaster/v1;ringmasterv1 dev.ringmaster.api.v1 True" ] ||
  fail "proto options: $options"
if command -v grpc_java_plugin >/dev/null; then
  mkdir "$work/java"
  protoc -I. --java_out="$work/java" --grpc-java_out="$work/java" \
    --plugin=protoc-gen-grpc-java="$(command -v grpc_java_plugin)" \
    proto/job.proto proto/cluster.proto proto/worker.proto proto/rendezvous.proto
  for f in Job JobServiceGrpc Worker WorkerServiceGrpc JobProto; do
    [ -f "$work/java/dev/ringmaster/api/v1/$f.java" ] || fail "no $f.java from protoc --java_out"
  done
fi

port="$(free_port)"
"$cli" --coordinator "127.0.0.1:$port" up --workers 1 --slots 2 --state-dir "$state" >/dev/null
out="$("$python" examples/python_client/client.py --coordinator "127.0.0.1:$port" \
  --tls-dir "$state/tls" --generated "$gen" --label test-run 2>&1)" || fail "client.py: $out"
echo "$out"
job="$(sed -n 's/^submitted \([a-z0-9-]*\) .*/\1/p' <<<"$out")"
[ -n "$job" ] || fail "no job submitted"
grep -q "a retry gave $job)" <<<"$out" || fail "the retried submit made another job"
grep -q "^event $job RUNNING" <<<"$out" || fail "no RUNNING event"
grep -q "^resuming from " <<<"$out" || fail "the stream was not resumed"
grep -q "^event $job CANCELLED" <<<"$out" || fail "no CANCELLED event after resuming"
grep -q "^$job cancelled; 1 stream break(s) resumed" <<<"$out" || fail "did not end as expected"
state_now="$("$cli" --coordinator "127.0.0.1:$port" --tls-dir "$state/tls" status "$job" -o json |
  "$python" -c 'import json, sys; print(json.load(sys.stdin)["state"])')"
[ "$state_now" = CANCELLED ] || fail "job $job is $state_now"
echo "PASS"
