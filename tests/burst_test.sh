#!/bin/sh
# Runs the burst test with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/burst_test.py "$@"
