#!/bin/sh
# Runs the multi-host suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/multihost_test.py "$@"
