#!/bin/sh
# Runs the pre-flight suite with Debian's Python from the test's runfiles.
exec /usr/bin/python3 tests/preflight_test.py "$@"
