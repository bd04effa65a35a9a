#!/bin/bash
# python/tests with Debian's pytest, in the runfiles tree: the CLI and the
# daemons built here, the release archive for the install test.
set -euo pipefail
cd "$TEST_SRCDIR/$TEST_WORKSPACE"
/usr/bin/python3 -c 'import pytest, grpc' 2>/dev/null || {
  echo "python3-pytest and python3-grpcio are needed (./dev test installs them)" >&2
  exit 1
}
export RINGMASTER_CLI="$PWD/client/ringmaster"
export RINGMASTER_RELEASE_ARCHIVE="$PWD/ringmaster-linux-x86_64.tar.gz"
exec /usr/bin/python3 -m pytest -p no:cacheprovider -q --basetemp="$TEST_TMPDIR/pytest" \
  python/tests
